"""The knowledge base: every stable deployment, keyed by the load it served."""
