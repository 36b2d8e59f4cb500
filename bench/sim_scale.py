"""Scale of the simulator: pools of 1,000 nodes, and 1,000 pods that never find a node.

Run: .venv/bin/python -m bench.sim_scale [--repeat 3] [--strategies autoscaler,karpenter,tuner]
[--scenarios pool-1000,drain-1000,pending-1000]

Three scenario files, each run for one simulated hour after the 30-minute warm-up, with each
strategy (``tuner simulate`` runs them one by one):

- ``pool-1000``: one e2-standard-4 pool of 1,000 nodes kept full by fixed Deployments
  (1,000 pods of 2 CPU, 2,000 of 500m) beside an HPA-scaled web tier on a day of Google 2019:
  every node is scheduled on, scanned by the autoscaler and analysed by the tuner each cycle.
- ``drain-1000``: the same pool with one 1.5-CPU pod per node (40 %): every node is a
  scale-down candidate, so the Cluster Autoscaler simulates draining each one every scan while it
  removes them one by one, and Karpenter consolidates.
- ``pending-1000``: a pool at its maximum of 3 nodes and a Deployment of 1,000 pods of 1 CPU;
  ~990 stay pending for the whole run (the Cluster Autoscaler cannot grow the pool).

Prints the median wall time of ``--repeat`` runs, per run and per simulated hour, with the
machine's load average before and after.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

from tuner.sim.report import run
from tuner.sim.scenario_file import build

POOL_1000: dict[str, Any] = {
    "name": "pool-1000",
    "hours": 1,
    "pools": [{"name": "p", "node_type": "e2-standard-4", "min": 0, "max": 1000, "initial": 1000}],
    "services": [
        {"name": "a", "namespace": "batch", "cpu": "2", "memory": "2Gi", "replicas": 1000},
        {"name": "b", "namespace": "batch", "cpu": "500m", "memory": "512Mi", "replicas": 1000},
        {"name": "c", "namespace": "batch", "cpu": "500m", "memory": "512Mi", "replicas": 1000},
        {
            "name": "web",
            "namespace": "web",
            "cpu": "250m",
            "memory": "256Mi",
            "replicas": 50,
            "hpa": {"min": 50, "max": 400, "target": 0.6},
            "cpu_per_load": 5,
        },
    ],
    "loads": {"web": {"trace": "google2019", "first_day": 1, "peak": 2000}},
}
DRAIN_1000: dict[str, Any] = {
    "name": "drain-1000",
    "hours": 1,
    "pools": [{"name": "p", "node_type": "e2-standard-4", "min": 0, "max": 1000, "initial": 1000}],
    "services": [
        {"name": "a", "namespace": "n", "cpu": "1500m", "memory": "2Gi", "replicas": 1000}
    ],
}
PENDING_1000: dict[str, Any] = {
    "name": "pending-1000",
    "hours": 1,
    "pools": [{"name": "p", "node_type": "e2-standard-4", "min": 1, "max": 3, "initial": 3}],
    "services": [{"name": "a", "namespace": "n", "cpu": "1", "memory": "1Gi", "replicas": 1000}],
}
SCENARIOS = (POOL_1000, DRAIN_1000, PENDING_1000)


def measure(doc: dict[str, Any], strategy: str, repeat: int) -> tuple[float, float]:
    """Median wall seconds of one run, and per simulated hour (warm-up included)."""
    scenario = build(doc)
    hours = (scenario.warmup + scenario.duration) / 3600
    walls = []
    for _ in range(repeat):
        started = time.perf_counter()
        run(scenario, strategy, 1)
        walls.append(time.perf_counter() - started)
    wall = statistics.median(walls)
    return wall, wall / hours


def main() -> None:
    """Print a table of medians with the load average."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strategies", default="autoscaler,karpenter,tuner")
    parser.add_argument("--scenarios", default=",".join(d["name"] for d in SCENARIOS))
    args = parser.parse_args()
    chosen = args.scenarios.split(",")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load before: {_load()}"
    )
    print(f"{'scenario':<14} {'strategy':<12} {'median s/run':>13} {'s per sim-h':>12}")
    for doc in (d for d in SCENARIOS if d["name"] in chosen):
        for strategy in args.strategies.split(","):
            wall, per_hour = measure(doc, strategy, args.repeat)
            print(f"{doc['name']:<14} {strategy:<12} {wall:>13.1f} {per_hour:>12.1f}", flush=True)
    print(f"load after: {_load()} (medians of {args.repeat} runs)")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
