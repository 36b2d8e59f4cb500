"""Exploration (thesis FR08): one random migration, so the tuner does not stay in a local minimum.

The pair (movable pod, destination with room) is drawn uniformly among *all* feasible pairs:
pods that share constraints, requests, labels and node share their feasible destinations, so
each group is weighted by (pods x destinations) and one pair is drawn within the group.
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from tuner.model.change import Relocation
from tuner.model.cluster import Cluster, Pod
from tuner.model.movability import Movability, busy_with_other_autoscaler
from tuner.model.snapshot import Snapshot
from tuner.settings import Usability


def random_migration(
    cluster: Cluster, movability: Movability, usability: Usability, rng: random.Random
) -> Relocation | None:
    """A uniformly drawn feasible migration, or None when no pod can move anywhere."""
    snapshot = Snapshot(cluster)
    for i, node in enumerate(cluster.nodes):
        if busy_with_other_autoscaler(node) or node.name in movability.closed:
            snapshot.close(i)
    groups: dict[tuple[object, ...], list[Pod]] = defaultdict(list)
    for pod in cluster.pods:
        if pod.node is not None and movability.movable(pod):
            key = (
                pod.constraints,
                pod.requests,
                pod.namespace,
                tuple(pod.labels.items()),
                pod.node,
            )
            groups[key].append(pod)
    options: list[tuple[list[Pod], np.ndarray]] = []
    weights: list[int] = []
    for pods in groups.values():
        source = snapshot.index[pods[0].node or ""]
        mask = snapshot.fit_mask(pods[0], leaving=source)
        mask[source] = False
        destinations = np.flatnonzero(mask)
        if destinations.size:
            options.append((pods, destinations))
            weights.append(len(pods) * int(destinations.size))
    if not options:
        return None
    pods, destinations = rng.choices(options, weights=weights)[0]
    pod = rng.choice(pods)
    target = int(destinations[rng.randrange(destinations.size)])
    return Relocation(pod, cluster.nodes[target].name)
