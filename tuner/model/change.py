"""A desired change of the deployment: what analyse decides and plan turns into actions."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

from tuner.model.cluster import Cluster, Node, Pod, Workload
from tuner.model.constraints import HOSTNAME_KEY
from tuner.model.pools import NodePool
from tuner.model.resources import Resources
from tuner.model.scheduling import static_fit


@dataclass(frozen=True, slots=True)
class Relocation:
    """Pod ``pod`` should run on node ``node`` instead."""

    pod: Pod
    node: str


@dataclass(frozen=True, slots=True)
class Addition:
    """One more instance of ``workload`` should run on ``node``."""

    workload: Workload
    node: str
    requests: Resources


@dataclass(frozen=True, slots=True)
class NewNode:
    """A node to obtain from ``pool`` before pods move onto it. ``name`` is provisional (it
    contains ``+``, which no Kubernetes node name does): the change's relocations and additions
    use it, and the executor binds it to the real node once that is Ready."""

    name: str
    pool: NodePool

    @property
    def node(self) -> Node:
        """The node as the plan sees it: the pool's template under the provisional name, which
        is also its hostname (a domain of its own for hostname topology rules)."""
        template = self.pool.template
        labels = MappingProxyType({**template.labels, HOSTNAME_KEY: self.name})
        return replace(template, name=self.name, labels=labels)


def templates(cluster: Cluster) -> dict[Workload, Pod]:
    """The first pod of each workload in the cluster: what an added instance of it looks like
    (its constraints and labels)."""
    return {p.workload: p for p in reversed(cluster.pods)}


def started_pod(
    workload: Workload, node: str, requests: Resources, like: Pod | None, name: str
) -> Pod:
    """The pod an addition of ``workload`` starts on ``node`` with ``requests``, named
    ``name``: like ``like`` (a pod of the workload, see :func:`templates`), or a bare pod of
    the workload when none runs."""
    base = like or Pod(workload.namespace, name, None, requests, workload, "")
    return replace(base, name=name, node=node, requests=requests)


def daemon_pods(cluster: Cluster, node: Node) -> list[Pod]:
    """One pod of each DaemonSet whose pods would run on a new node like ``node`` (they start
    there as it joins: their requests, and their labels for the rules that count pods)."""
    seen: dict[Workload, Pod] = {}
    for pod in cluster.pods:
        if pod.owner_kind == "DaemonSet" and pod.workload not in seen:
            seen[pod.workload] = pod
    return [p for p in seen.values() if static_fit(p.constraints, node) is None]


@dataclass(frozen=True, slots=True)
class DesiredChange:
    """Per-node changes: nodes to obtain, pods to relocate, pods to remove, instances to add,
    nodes to delete."""

    relocations: tuple[Relocation, ...] = ()
    removals: tuple[Pod, ...] = ()
    additions: tuple[Addition, ...] = ()
    remove_nodes: tuple[str, ...] = ()
    new_nodes: tuple[NewNode, ...] = ()

    @property
    def empty(self) -> bool:
        """True when nothing changes."""
        return not (
            self.relocations
            or self.removals
            or self.additions
            or self.remove_nodes
            or self.new_nodes
        )
