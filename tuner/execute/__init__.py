"""Execute: actions through the Kubernetes API, verification, and the dry-run printer."""
