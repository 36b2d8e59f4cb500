"""How good is the node-removal heuristic? Compared with exact MILP answers on small clusters.

Run: .venv/bin/python -m bench.packing_quality [instances]

Reports, over random small clusters (3-8 nodes, up to ~40 pods, mixed shapes, taints and
node selectors, StatefulSets and DaemonSets):
- per-node drain agreement: does best-fit-decreasing find a re-placement whenever one exists?
- cost gap: cost after the heuristic removes as many nodes as it can (only the removed nodes'
  pods move) versus the cheapest node set an exact solver finds when every movable pod may be
  re-placed anywhere (a lower bound no disruption-limited plan can beat).
"""

from __future__ import annotations

import sys
import time

from testkit.packing import compare, summarise


def main() -> None:
    """Run the comparison and print the figures."""
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    started = time.perf_counter()
    summary = summarise([compare(seed) for seed in range(count)])
    print(
        f"heuristic vs exact (HiGHS MILP) on {count} random small clusters "
        f"({time.perf_counter() - started:.1f} s)"
    )
    print(
        f"  per-node drain agreement   {summary['drain_agreement']:.1%}"
        f"  (missed {summary['drains_missed']:.0f}, wrong {summary['drains_wrong']:.0f})"
    )
    print(
        f"  cost gap to exact optimum  mean {summary['mean_cost_gap']:.1%},"
        f" max {summary['max_cost_gap']:.1%}"
    )
    print(f"  instances at the optimum   {summary['optimal_instances']:.1%}")
    print(f"  share of possible saving   {summary['share_of_possible_saving']:.1%}")


if __name__ == "__main__":
    main()
