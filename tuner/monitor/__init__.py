"""Monitor: where the cluster state and the load come from."""
