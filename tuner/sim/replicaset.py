"""Which pods a ReplicaSet deletes first when it scales down.

kube-controller-manager v1.33 (``pkg/controller/controller_utils.go``, ``ActivePodsWithRanks``;
``replicaset/replica_set.go``, ``getPodsToDelete``) ranks the pods, first deleted first:
unassigned before assigned; not ready before ready; more pods of the same set on the same node
before fewer; then, as ``LogarithmicScaleDown`` (stable and on since 1.31) compares
times, the more recently ready (or, between pods not ready, created) pod first **only when the
two times differ in their base-2 logarithm of nanoseconds before now**; pods in the same
logarithmic bucket go in the order of their UIDs, which is random. (Pod deletion costs and
container restarts, which the simulated pods do not have, are left out.)

So a scale-down does not delete the newest pods as such: it picks semi-randomly among the pods
of the same age class, and which nodes it empties follows from that. The simulator stands in
for the random UIDs with a fixed scramble of its pod numbers (not drawn from the simulation's
generator, so that the rest of a seeded run stays as it was).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tuner.sim.state import SimPod

NANOSECONDS = 1e9
_SCRAMBLE = 2654435761
"""Knuth's multiplicative hash constant: pod numbers 1, 2, 3 ... to a pseudo-random order."""


def age_class(seconds: float) -> int:
    """The logarithmic bucket kube-controller-manager compares: ``floor(log2(ns))``, -1 for no
    age."""
    return int(math.log2(seconds * NANOSECONDS)) if seconds > 0 else -1


def uid_order(uid: int) -> int:
    """Where a pod falls among pods of one age class (the stand-in for its random UID)."""
    return (uid * _SCRAMBLE) % 2**32


def deletion_order(
    pods: Sequence[SimPod], now: float, ready_since: Callable[[SimPod], float | None]
) -> list[SimPod]:
    """``pods`` of one workload, the first to delete first. ``ready_since(pod)``: when it
    became ready, None while it is not."""
    on_node: dict[str | None, int] = {}
    for pod in pods:
        on_node[pod.node] = on_node.get(pod.node, 0) + 1

    def rank(pod: SimPod) -> tuple[bool, bool, int, int, int]:
        since = ready_since(pod)
        age = now - (since if since is not None else pod.created)
        return (
            pod.node is not None,
            since is not None,
            -on_node[pod.node],
            age_class(age),
            uid_order(pod.uid),
        )

    return sorted(pods, key=rank)
