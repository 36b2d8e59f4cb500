"""Replay actions on a cluster and check that every step is feasible by every fit rule.

Independent of the planner and of the scheduling simulation it orders with
(:mod:`tuner.model.snapshot`): plain per-node dictionaries, one step at a time, asking the
domain model's rule predicates (:mod:`tuner.model.scheduling`) directly. Tests and the CLI's
"after" figures trust a plan because it survives this replay. Whether a pod may be moved at
all (PDBs, owners, annotations) is the analysis' movability, not a fit rule: the property
tests check it beside the replay.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.resources import Resources
from tuner.model.scheduling import repels, resource_fit, static_fit
from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode


class InfeasiblePlan(Exception):
    """A step of the plan does not fit, or refers to something that is not there."""


@dataclass(frozen=True)
class Occupancy:
    """Where pods are after a replayed plan."""

    allocatable: dict[str, Resources]
    requested: dict[str, Resources]
    pods: dict[str, set[str]]
    """Pod keys per node."""
    fixed: dict[str, set[str]]
    """Pods that follow their node (DaemonSet, mirror): they may stay on a removed node."""
    removed: set[str]


@dataclass
class _State:
    """The replay's own bookkeeping: the pods by key on each node, and the removed nodes."""

    nodes: dict[str, Node]
    residents: dict[str, dict[str, Pod]]
    removed: set[str] = field(default_factory=set)

    def result(self) -> Occupancy:
        """The occupancy at the end."""
        return Occupancy(
            allocatable={name: node.allocatable for name, node in self.nodes.items()},
            requested={
                name: Resources.total([p.requests for p in pods.values()])
                for name, pods in self.residents.items()
            },
            pods={name: set(pods) for name, pods in self.residents.items()},
            fixed={
                name: {key for key, p in pods.items() if p.follows_node}
                for name, pods in self.residents.items()
            },
            removed=set(self.removed),
        )


def replay(cluster: Cluster, actions: Iterable[Action]) -> Occupancy:
    """Apply the actions in order; raise :class:`InfeasiblePlan` naming the step and the rule
    at the first bad step."""
    state = _State(
        nodes=dict(cluster.node_by_name),
        residents={n.name: {p.key: p for p in cluster.pods_by_node[n.name]} for n in cluster.nodes},
    )
    templates = {p.workload: p for p in reversed(cluster.pods)}
    for step, action in enumerate(actions, 1):
        match action:
            case Migrate(pod=pod, target=target):
                _take_off(state, pod, step)
                _put_on(state, replace(pod, node=target), step)
            case Add(workload=workload, target=target, requests=requests):
                like = templates.get(workload) or Pod(
                    workload.namespace, workload.name, None, requests, workload, ""
                )
                name = f"+{workload.name}#{step}"
                _put_on(state, replace(like, name=name, node=target, requests=requests), step)
            case Remove(pod=pod):
                _take_off(state, pod, step)
            case RemoveNode(node=node):
                if node not in state.nodes or node in state.removed:
                    raise InfeasiblePlan(f"step {step}: unknown node {node}")
                left = sorted(k for k, p in state.residents[node].items() if not p.follows_node)
                if left:
                    raise InfeasiblePlan(f"step {step}: node {node} still runs {left[0]}")
                state.removed.add(node)
    return state.result()


def _take_off(state: _State, pod: Pod, step: int) -> None:
    node = pod.node
    if node is None or node in state.removed or pod.key not in state.residents.get(node, {}):
        raise InfeasiblePlan(f"step {step}: pod {pod.key} is not on node {node}")
    del state.residents[node][pod.key]


def _put_on(state: _State, pod: Pod, step: int) -> None:
    """Place a pod (``pod.node`` is its target) after checking every fit rule."""
    name = pod.node or ""
    node = state.nodes.get(name)
    if node is None:
        raise InfeasiblePlan(f"step {step}: unknown node {name}")
    if name in state.removed:
        raise InfeasiblePlan(f"step {step}: node {name} was removed")
    residents = state.residents[name].values()
    free = node.allocatable - Resources.total([p.requests for p in residents])
    why = static_fit(pod.constraints, node) or resource_fit(
        pod.requests, free, node.max_pods - len(residents)
    )
    if why is None:
        why = next(
            (
                f"required pod anti-affinity with {other.key}"
                for other in residents
                if repels(pod.constraints, other.namespace, other.labels)
                or repels(other.constraints, pod.namespace, pod.labels)
            ),
            None,
        )
    if why is not None:
        raise InfeasiblePlan(f"step {step}: pod {pod.key} cannot go to node {name}: {why}")
    state.residents[name][pod.key] = pod
