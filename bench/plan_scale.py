"""Scale benchmark: dump parsing and analyse+plan on clusters of 100, 1,000 and 5,000 nodes.

Run: .venv/bin/python -m bench.plan_scale [--sizes 100,1000,5000] [--repeat 5]

Clusters come from testkit.synthetic.random_cluster (~30 pods per node, mixed node types, many
Deployments with HPAs and PDBs, StatefulSets, two DaemonSets). Parsing (JSON text to the domain
model) and analyse+plan are timed separately; medians of ``--repeat`` runs are printed. The
``--spread-sizes`` rows repeat a size with the nodes in three zones and ``--spread-share`` of the
Deployments spread over them (``maxSkew: 1``, ``DoNotSchedule``) and softly over nodes.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from fractions import Fraction

from testkit.synthetic import random_cluster
from tuner.analyse.decision import analyse
from tuner.monitor.dump import cluster_from_objects
from tuner.report.build import build_report
from tuner.settings import Analyse, Settings, Thresholds

SETTINGS = Settings(
    analyse=Analyse(
        max_parallel_removals=5,
        thresholds=Thresholds(Fraction(9, 10), Fraction(9, 10)),
        migration_chance=0.0,
    )
)


def run(nodes: int, repeat: int, spread_share: float = 0.0) -> dict[str, float]:
    """Median seconds for parsing and analyse+plan of one cluster size."""
    text = json.dumps(random_cluster(nodes, seed=nodes, spread_share=spread_share))
    parse_times, plan_times = [], []
    pods = actions = 0
    for _ in range(repeat):
        started = time.perf_counter()
        cluster = cluster_from_objects(json.loads(text)["items"])
        parsed = time.perf_counter()
        report = build_report(cluster, SETTINGS, analyse(cluster, SETTINGS, [], random.Random(0)))
        done = time.perf_counter()
        parse_times.append(parsed - started)
        plan_times.append(done - parsed)
        pods, actions = len(cluster.pods), len(report.actions)
    return {
        "nodes": nodes,
        "pods": pods,
        "actions": actions,
        "parse_s": statistics.median(parse_times),
        "plan_s": statistics.median(plan_times),
    }


def main() -> None:
    """Print a table of medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--spread-sizes", default="1000")
    parser.add_argument("--spread-share", type=float, default=0.2)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    header = ("nodes", "pods", "actions", "parse s", "analyse+plan s", "plan µs/pod", "spread")
    print("{:>6} {:>7} {:>7} {:>8} {:>15} {:>11} {:>7}".format(*header))
    cases = [(int(s), 0.0) for s in args.sizes.split(",") if s]
    cases += [(int(s), args.spread_share) for s in args.spread_sizes.split(",") if s]
    for size, share in cases:
        r = run(size, args.repeat, share)
        print(
            f"{r['nodes']:>6} {r['pods']:>7} {r['actions']:>7} {r['parse_s']:>8.2f} "
            f"{r['plan_s']:>15.3f} {r['plan_s'] / r['pods'] * 1e6:>11.1f} {share:>7.0%}"
        )


if __name__ == "__main__":
    main()
