"""The actions the tuner performs (thesis §3.2.4, plus obtaining a node from a pool) and their
JSON form (docs/concepts.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tuner.model.cluster import Pod, Workload
from tuner.model.limits import pod_evictions
from tuner.model.pools import NodePool
from tuner.model.resources import Resources


@dataclass(frozen=True, slots=True)
class Migrate:
    """Move ``pod`` from its node to ``target``."""

    pod: Pod
    target: str

    @property
    def source(self) -> str:
        """The node the pod leaves."""
        return self.pod.node or ""


@dataclass(frozen=True, slots=True)
class Add:
    """Start one more instance of ``workload`` on ``target``."""

    workload: Workload
    target: str
    requests: Resources


@dataclass(frozen=True, slots=True)
class Remove:
    """Remove ``pod`` (one replica fewer)."""

    pod: Pod


@dataclass(frozen=True, slots=True)
class RemoveNode:
    """Remove an emptied node."""

    node: str


@dataclass(frozen=True, slots=True)
class ProvisionNode:
    """Obtain a new node from ``pool`` (through its autoscaler, or the user's command). Later
    actions target it by the provisional name ``node`` until the executor binds the real one.
    ``requests`` is what the plan puts on it (what a placeholder pod asks for)."""

    node: str
    pool: NodePool
    requests: Resources

    @property
    def placeholder_requests(self) -> Resources:
        """What a placeholder pod asks for: ``requests``, no more than the new node offers."""
        room = self.pool.template.allocatable
        return Resources(min(self.requests.cpu, room.cpu), min(self.requests.memory, room.memory))


Action = ProvisionNode | Migrate | Add | Remove | RemoveNode


PROVISIONAL = "+"
"""In a node name, marks a plan's name for a node still to be provisioned (no Kubernetes node
name has it)."""


def provisional(name: str) -> bool:
    """A plan's name for a node still to be provisioned (``general-8+1``)."""
    return PROVISIONAL in name


def resolved(action: Action, bindings: Mapping[str, str]) -> Action:
    """The action with the provisional node names bound so far (provisional -> real name)
    replaced by the real ones."""
    match action:
        case Migrate(target=target) | Add(target=target) if target in bindings:
            return replace(action, target=bindings[target])
        case RemoveNode(node=node) if node in bindings:
            return replace(action, node=bindings[node])
    return action


def emptied(actions: Sequence[Action]) -> tuple[str, ...]:
    """The nodes a plan empties (its ``remove_node`` actions'), in plan order."""
    nodes = (a.node for a in actions if isinstance(a, RemoveNode) and not provisional(a.node))
    return tuple(dict.fromkeys(nodes))


def first_move(actions: Sequence[Action]) -> int | None:
    """The index of the plan's first action that moves, adds or removes a pod (the nodes it
    empties are made unschedulable before it); None when there is none."""
    return next((i for i, a in enumerate(actions) if not isinstance(a, ProvisionNode)), None)


def placed_workload(action: Action) -> Workload | None:
    """The workload whose new pod a migrate or add places on its target; None otherwise."""
    match action:
        case Migrate(pod=pod):
            return pod.workload
        case Add(workload=workload):
            return workload
        case Remove() | RemoveNode() | ProvisionNode():
            return None


def evictions(actions: Iterable[Action]) -> dict[str, int]:
    """Pods per namespace the actions make go: one per migrate (evicted) and remove (one
    replica fewer, that pod chosen), as the eviction budget counts them."""
    return pod_evictions(a.pod for a in actions if isinstance(a, Migrate | Remove))


def action_json(action: Action) -> dict[str, Any]:
    """The action as in the plan output contract."""
    match action:
        case Migrate(pod=pod, target=target):
            return {
                "op": "migrate",
                "pod": pod.key,
                "workload": str(pod.workload),
                "from": pod.node,
                "to": target,
            }
        case Add(workload=workload, target=target):
            return {"op": "add", "workload": str(workload), "to": target}
        case Remove(pod=pod):
            return {"op": "remove", "pod": pod.key, "workload": str(pod.workload), "from": pod.node}
        case RemoveNode(node=node):
            return {"op": "remove_node", "node": node}
        case ProvisionNode(node=node, pool=pool):
            return {"op": "provision_node", "node": node, "pool": pool.name, "type": pool.node_type}
