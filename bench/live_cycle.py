"""The daemon's cycle on a synced cache, offline: read (the cache's cluster) + analyse + plan.

    .venv/bin/python -m bench.live_cycle [--nodes 1000] [--repeat 5] [--events 100]

A generated cluster (``testkit.synthetic.random_cluster``: ~30 pods a node) is fed to the
cache's stores the way a list fills them (:func:`tuner.monitor.cache.entry`), then each repeat
applies ``--events`` watch events (pods moved to another node, as the scheduler's and kwok's
updates arrive) and times, in CPU seconds of this process:

- *parse every object* — what a read cost before the stores kept parsed values: the same
  objects, pruned (as the stores held them; not timed), through
  :func:`~tuner.monitor.dump.cluster_from_objects`;
- *assemble the parsed stores* — a read now (:func:`tuner.monitor.cache.cluster_of`);
- *analyse + plan* on that cluster, as ``tuner plan`` does them;
- the events' application (parsing each changed object once, in the watcher thread).

No control plane is needed: the stores are filled and changed directly.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from testkit.synthetic import random_cluster
from tuner.analyse.decision import analyse
from tuner.monitor.cache import Store, apply_event, cluster_of, entry
from tuner.monitor.dump import cluster_from_objects
from tuner.monitor.kube import KINDS
from tuner.monitor.owners import Followed
from tuner.monitor.prune import pruned
from tuner.report.build import build_report
from tuner.settings import Settings


def cpu(work: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds (user + sys, all threads) ``work`` took, and what it returned."""
    start = time.process_time()
    result = work()
    return time.process_time() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--events", type=int, default=100)
    args = parser.parse_args()
    items = [i for i in random_cluster(args.nodes, seed=args.nodes)["items"] if i["kind"] in KINDS]
    objects = {kind: [i for i in items if i["kind"] == kind] for kind in KINDS}
    fill_s, stores = cpu(
        lambda: {kind: dict(entry(kind, o) for o in objects[kind]) for kind in KINDS}
    )
    nodes = [o["metadata"]["name"] for o in objects["Node"]]
    pods = objects["Pod"]
    rng = random.Random(0)
    followed = Followed()  # as the cache keeps it between reads
    figures: dict[str, list[float]] = {"before": [], "after": [], "plan": [], "events": []}
    for _ in range(args.repeat):
        figures["events"].append(cpu(lambda: _move(stores, pods, nodes, args.events, rng))[0])
        for key, seconds in _cycle(objects, stores, followed).items():
            figures[key].append(seconds)
    print(
        f"{args.nodes} nodes, {len(pods)} pods, {len(items)} objects; "
        f"load {os.getloadavg()[0]:.1f}; filling the stores: {fill_s:.2f} s CPU"
    )
    median = {key: statistics.median(values) for key, values in figures.items()}
    print(f"| read: parse every object (before) | {median['before']:.2f} s |")
    print(f"| read: assemble the parsed stores (now) | {median['after']:.3f} s |")
    print(f"| analyse + plan | {median['plan']:.2f} s |")
    print(
        f"| cycle before / now | {median['before'] + median['plan']:.2f} s "
        f"/ {median['after'] + median['plan']:.2f} s |"
    )
    print(
        f"| {args.events} watch events applied (each object parsed once) "
        f"| {median['events']:.3f} s |"
    )


def _cycle(
    objects: dict[str, list[dict[str, Any]]], stores: dict[str, Store], followed: Followed
) -> dict[str, float]:
    """One read the old way and the new (checked equal), and analyse + plan: CPU seconds."""
    stored = [pruned(o["kind"], o) for kind in KINDS for o in objects[kind]]  # as it was kept
    before, old = cpu(lambda: cluster_from_objects(stored, strict=False))
    after, cluster = cpu(lambda: cluster_of(stores, followed))
    assert cluster == old, "the stores and a parse of every object disagree"
    settings = Settings()
    plan, _ = cpu(
        lambda: build_report(cluster, settings, analyse(cluster, settings, [], random.Random(0)))
    )
    return {"before": before, "after": after, "plan": plan}


def _move(
    stores: dict[str, Store],
    pods: list[dict[str, Any]],
    nodes: list[str],
    events: int,
    rng: random.Random,
) -> None:
    """``events`` pods moved to another node (MODIFIED), in the stores and in ``pods``."""
    for _ in range(events):
        index = rng.randrange(len(pods))
        pod = copy.deepcopy(pods[index])
        pod["spec"]["nodeName"] = rng.choice(nodes)
        pods[index] = pod
        apply_event(stores["Pod"], "Pod", {"type": "MODIFIED", "object": pod})


if __name__ == "__main__":
    main()
