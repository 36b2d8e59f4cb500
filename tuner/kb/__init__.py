"""``tuner kb``: inspect, export, import and browse the knowledge base."""
