"""Replay actions on a cluster and check that every step is feasible by every fit rule.

Independent of the planner and of the scheduling simulation it orders with
(:mod:`tuner.model.snapshot`): plain per-node dictionaries, one step at a time, asking the
domain model's rule predicates (:mod:`tuner.model.scheduling`, its census for the rules that
count other pods) directly. Tests and the CLI's "after" figures trust a plan because it
survives this replay. A provisioned node joins as its pool's template under the action's
provisional name, with the DaemonSet pods that start on it. The nodes the plan removes are
cordoned from its first step, as the executor cordons them before the first pod leaves; a
migrated pod no longer counts on its source when its new place is checked (an evicted pod does
not count for the scheduler). Soft topology spread is held to the census' "as close as it was"
unless ``soft=False`` (how a scheduler's own placements are checked: it only scores soft
rules). Whether a pod may be moved at all (PDBs, owners, annotations) is the analysis'
movability, not a fit rule: the property tests check it beside the replay.
"""

from __future__ import annotations

from collections.abc import Iterable, KeysView
from dataclasses import dataclass, field, replace

from tuner.model.census import Census
from tuner.model.change import NewNode, daemon_pods, started_pod, templates
from tuner.model.cluster import Cluster, Node, Pod, Workload
from tuner.model.resources import Resources
from tuner.model.scheduling import resource_fit, static_fit
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode


class InfeasiblePlan(Exception):
    """A step of the plan does not fit, or refers to something that is not there."""


@dataclass(frozen=True)
class Occupancy:
    """Where pods are after a replayed plan."""

    allocatable: dict[str, Resources]
    requested: dict[str, Resources]
    residents: dict[str, dict[str, Pod]]
    """Pods by key on each node."""
    removed: set[str]

    @property
    def pods(self) -> dict[str, KeysView[str]]:
        """Pod keys per node."""
        return {name: pods.keys() for name, pods in self.residents.items()}


@dataclass
class _State:
    """The replay's own bookkeeping: pods by key and their requests on each node, removed
    nodes."""

    cluster: Cluster
    nodes: dict[str, Node]
    residents: dict[str, dict[str, Pod]]
    requested: dict[str, Resources]
    census: Census
    soft: bool = True
    removed: set[str] = field(default_factory=set)
    templates: dict[Workload, Pod] | None = None

    def instance(self, add: Add, step: int) -> Pod:
        """The pod an addition starts (named after its step)."""
        if self.templates is None:
            self.templates = templates(self.cluster)
        workload = add.workload
        like = self.templates.get(workload)
        return started_pod(workload, add.target, add.requests, like, f"+{workload.name}#{step}")


def replay(cluster: Cluster, actions: Iterable[Action], *, soft: bool = True) -> Occupancy:
    """Apply the actions in order; raise :class:`InfeasiblePlan` naming the step and the rule
    at the first bad step."""
    by_node = cluster.pods_by_node
    steps = list(actions)
    nodes = {n.name: n for n in cluster.nodes}
    state = _State(
        cluster,
        nodes=nodes,
        residents={n.name: {p.key: p for p in by_node[n.name]} for n in cluster.nodes},
        requested={
            n.name: Resources.total([p.requests for p in by_node[n.name]]) for n in cluster.nodes
        },
        census=Census(nodes, by_node, lambda: cluster.label_counts),
        soft=soft,
    )
    for action in steps:
        if isinstance(action, RemoveNode) and action.node in state.nodes:
            state.census.cordon(action.node)
            state.nodes[action.node] = replace(state.nodes[action.node], unschedulable=True)
    for step, action in enumerate(steps, 1):
        match action:
            case ProvisionNode(node=node, pool=pool):
                if node in state.nodes:
                    raise InfeasiblePlan(f"step {step}: node {node} already exists")
                joined = NewNode(node, pool).node
                state.nodes[node] = joined
                state.residents[node] = {}
                state.requested[node] = Resources()
                state.census.add_node(node, joined)
                for daemon in daemon_pods(cluster, joined):  # they start there as it joins
                    started = replace(daemon, name=f"{daemon.name}@{node}", node=node)
                    state.residents[node][started.key] = started
                    state.requested[node] = state.requested[node] + started.requests
                    state.census.add(node, started)
            case Migrate(pod=pod, target=target):
                _take_off(state, pod, step)
                _put_on(state, replace(pod, node=target), step)
            case Add():
                _put_on(state, state.instance(action, step), step)
            case Remove(pod=pod):
                _take_off(state, pod, step)
            case RemoveNode(node=node):
                if node not in state.residents or node in state.removed:
                    raise InfeasiblePlan(f"step {step}: unknown node {node}")
                left = sorted(k for k, p in state.residents[node].items() if not p.follows_node)
                if left:
                    raise InfeasiblePlan(f"step {step}: node {node} still runs {left[0]}")
                state.removed.add(node)
    return Occupancy(
        allocatable={name: n.allocatable for name, n in state.nodes.items()},
        requested=state.requested,
        residents=state.residents,
        removed=state.removed,
    )


def _take_off(state: _State, pod: Pod, step: int) -> None:
    node = pod.node
    if node is None or node in state.removed or pod.key not in state.residents.get(node, {}):
        raise InfeasiblePlan(f"step {step}: pod {pod.key} is not on node {node}")
    gone = state.residents[node].pop(pod.key)
    state.requested[node] = state.requested[node] - pod.requests
    state.census.remove(node, gone)


def _put_on(state: _State, pod: Pod, step: int) -> None:
    """Place a pod (``pod.node`` is its target) after checking every fit rule."""
    name = pod.node or ""
    node = state.nodes.get(name)
    if node is None:
        raise InfeasiblePlan(f"step {step}: unknown node {name}")
    if name in state.removed:
        raise InfeasiblePlan(f"step {step}: node {name} was removed")
    free = node.allocatable - state.requested[name]
    why = (
        static_fit(pod.constraints, node)
        or resource_fit(pod.requests, free, node.max_pods - len(state.residents[name]))
        or state.census.why_not(pod, name, soft=state.soft)
    )
    if why is not None:
        raise InfeasiblePlan(f"step {step}: pod {pod.key} cannot go to node {name}: {why}")
    state.residents[name][pod.key] = pod
    state.requested[name] = state.requested[name] + pod.requests
    state.census.add(name, pod)
