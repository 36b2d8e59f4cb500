"""``tuner plan``: what the tuner would do with a cluster dump or the live cluster (reads only)."""
