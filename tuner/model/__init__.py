"""Domain model: immutable values describing a cluster, its nodes, pods and workloads."""
