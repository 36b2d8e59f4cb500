"""Regenerate examples/cluster-dump.json: a small GKE-like cluster running an online shop.

Run: .venv/bin/python -m examples.generate
"""

from __future__ import annotations

import json
from pathlib import Path

from testkit.synthetic import E2_STANDARD_4, E2_STANDARD_8, MIB, NodeSpec, WorkloadSpec, generate

GIB = 1024 * MIB

NODES = [
    NodeSpec("gke-shop-pool-a-1", E2_STANDARD_4, "europe-west1-b"),
    NodeSpec("gke-shop-pool-a-2", E2_STANDARD_4, "europe-west1-c"),
    NodeSpec("gke-shop-pool-a-3", E2_STANDARD_4, "europe-west1-d"),
    NodeSpec("gke-shop-pool-a-4", E2_STANDARD_4, "europe-west1-b"),
    NodeSpec("gke-shop-pool-b-1", E2_STANDARD_8, "europe-west1-c", {"pool": "highmem"}),
    NodeSpec("gke-shop-pool-b-2", E2_STANDARD_8, "europe-west1-d", {"pool": "highmem"}),
]

WORKLOADS = [
    WorkloadSpec("kube-system", "kube-proxy", "DaemonSet", 0, 100, 64 * MIB),
    WorkloadSpec("logging", "fluent-bit", "DaemonSet", 0, 50, 100 * MIB),
    WorkloadSpec("kube-system", "coredns", "Deployment", 2, 100, 70 * MIB, pdb_min_available=1),
    WorkloadSpec("kube-system", "metrics-server", "Deployment", 1, 100, 200 * MIB),
    WorkloadSpec("shop", "frontend", "Deployment", 4, 300, 512 * MIB, hpa=True),
    WorkloadSpec("shop", "cart", "Deployment", 3, 200, 256 * MIB, anti_affinity=True),
    WorkloadSpec("shop", "catalog", "Deployment", 3, 250, 512 * MIB, pdb_min_available=2),
    WorkloadSpec("shop", "checkout", "Deployment", 2, 200, 256 * MIB),
    WorkloadSpec("shop", "recommendation", "Deployment", 2, 400, GIB),
    WorkloadSpec("shop", "postgres", "StatefulSet", 1, 1000, 4 * GIB, volume=True),
    WorkloadSpec(
        "shop",
        "redis",
        "Deployment",
        1,
        200,
        GIB,
        annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    ),
    WorkloadSpec(
        "shop", "report-worker", "Deployment", 2, 500, 2 * GIB, node_selector={"pool": "highmem"}
    ),
]


def main() -> None:
    """Write the dump next to this script."""
    dump = generate(NODES, WORKLOADS, seed=7)
    target = Path(__file__).with_name("cluster-dump.json")
    target.write_text(json.dumps(dump, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {target} ({len(dump['items'])} objects)")


if __name__ == "__main__":
    main()
