"""Replay actions on a cluster's occupancy and check that every step is feasible.

Independent of the planner, so tests (and the CLI's "after" figures) can trust a plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tuner.model.cluster import Cluster
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode


class InfeasiblePlan(Exception):
    """A step of the plan does not fit, or refers to something that is not there."""


@dataclass
class Occupancy:
    """Requests and pod keys per node while a plan is replayed."""

    allocatable: dict[str, Resources]
    max_pods: dict[str, int]
    requested: dict[str, Resources] = field(default_factory=dict)
    pods: dict[str, set[str]] = field(default_factory=dict)
    fixed: dict[str, set[str]] = field(default_factory=dict)
    """Pods that follow their node (DaemonSet, mirror): they may stay on a removed node."""
    removed: set[str] = field(default_factory=set)

    @staticmethod
    def of(cluster: Cluster) -> Occupancy:
        """The occupancy of a cluster now."""
        occupancy = Occupancy(
            allocatable={n.name: n.allocatable for n in cluster.nodes},
            max_pods={n.name: n.max_pods for n in cluster.nodes},
        )
        for node in cluster.nodes:
            pods = cluster.pods_by_node[node.name]
            occupancy.requested[node.name] = Resources.total([p.requests for p in pods])
            occupancy.pods[node.name] = {p.key for p in pods}
            occupancy.fixed[node.name] = {p.key for p in pods if p.follows_node}
        return occupancy

    def room(self, node: str) -> Resources:
        """Free allocatable on a node."""
        return self.allocatable[node] - self.requested[node]

    def fits(self, node: str, requests: Resources) -> bool:
        """True when ``requests`` fit on the node now."""
        return (
            node not in self.removed
            and requests.fits_in(self.room(node))
            and len(self.pods[node]) < self.max_pods[node]
        )

    def take(self, node: str, key: str, requests: Resources) -> None:
        """Place a pod (key) on a node."""
        self.requested[node] = self.requested[node] + requests
        self.pods[node].add(key)

    def release(self, node: str, key: str, requests: Resources) -> None:
        """Take a pod (key) off a node."""
        self.requested[node] = self.requested[node] - requests
        self.pods[node].discard(key)


def replay(cluster: Cluster, actions: Iterable[Action]) -> Occupancy:
    """Apply the actions in order; raise :class:`InfeasiblePlan` at the first bad step."""
    state = Occupancy.of(cluster)
    added = 0
    for step, action in enumerate(actions, 1):
        match action:
            case Migrate(pod=pod, target=target):
                _need_pod(state, pod.node, pod.key, step)
                _need_room(state, target, pod.requests, step)
                state.release(pod.node or "", pod.key, pod.requests)
                state.take(target, pod.key, pod.requests)
            case Add(workload=workload, target=target, requests=requests):
                _need_room(state, target, requests, step)
                added += 1
                state.take(target, f"+{workload}#{added}", requests)
            case Remove(pod=pod):
                _need_pod(state, pod.node, pod.key, step)
                state.release(pod.node or "", pod.key, pod.requests)
            case RemoveNode(node=node):
                left = state.pods[node] - state.fixed[node]
                if left:
                    raise InfeasiblePlan(f"step {step}: node {node} still runs {sorted(left)[0]}")
                state.removed.add(node)
    return state


def _need_pod(state: Occupancy, node: str | None, key: str, step: int) -> None:
    if node is None or key not in state.pods.get(node, set()):
        raise InfeasiblePlan(f"step {step}: pod {key} is not on node {node}")


def _need_room(state: Occupancy, node: str, requests: Resources, step: int) -> None:
    if node not in state.allocatable:
        raise InfeasiblePlan(f"step {step}: unknown node {node}")
    if not state.fits(node, requests):
        raise InfeasiblePlan(f"step {step}: no room on node {node}")
