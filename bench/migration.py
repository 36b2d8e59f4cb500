"""How long a verified migration takes on the real control plane (scripts/cluster.sh).

Run: .venv/bin/python -m bench.migration [--runs 20]   (from the repository root)

Starts a private cluster (free ports, its own state dir), creates two KWOK nodes and an
onboarded one-replica Deployment, then migrates its pod back and forth ``--runs`` times with
:class:`tuner.execute.actuator.KubeActuator`. Each figure is one whole ``carry_out``: journal,
label the destination, evict, watch the replacement until it is Ready off its source (with two
nodes: on the destination), unlabel, drop the journal. Prints the median, min and max; the
cluster's own start is not timed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from testkit.cluster_fixture import ClusterHarness
from tuner.execute.actuator import KubeActuator
from tuner.monitor.kube import read_cluster
from tuner.plan.actions import Migrate
from tuner.settings import settings_from_dict


def run(runs: int) -> list[float]:
    """Seconds per verified migration."""
    with tempfile.TemporaryDirectory(prefix="tuner-bench-") as state:
        kube = ClusterHarness(Path(state), f"tuner-bench-{os.getpid()}")
        kube.start()
        try:
            kube.new_namespace()
            nodes = [kube.add_node(f"bench-n{i}") for i in (1, 2)]
            kube.deployment("web", 1)
            actuator = KubeActuator(kube.api, settings_from_dict(kube.settings_doc()))
            times = []
            for _ in range(runs):
                pod = next(p for p in read_cluster(kube.api).pods if p.namespace == kube.namespace)
                target = next(n for n in nodes if n != pod.node)
                start = time.perf_counter()
                result = actuator.carry_out([Migrate(pod, target)])
                times.append(time.perf_counter() - start)
                if not result.completed:
                    raise SystemExit(f"migration failed: {result.reason}")
                kube.wait_available("web", 1)  # the old pod fully gone before the next run
            return times
        finally:
            kube.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    times = run(args.runs)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(
        f"verified migration over {len(times)} runs: median {statistics.median(times):.3f} s, "
        f"min {min(times):.3f} s, max {max(times):.3f} s"
    )


if __name__ == "__main__":
    main()
