"""Node pools as the tuner sees them: groups of identical nodes an autoscaler resizes.

A node's pool is named by the first of :data:`~tuner.model.conventions.POOL_LABELS` it carries
(GKE node pool, EKS managed node group, Karpenter NodePool), else by its instance type; the
``pools`` settings may name pools, their minimum and maximum size and a template for pools with
no node yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from tuner.model.cluster import INSTANCE_TYPE_LABELS, Cluster, Node
from tuner.model.constraints import HOSTNAME_KEY, ZONE_KEY, Taint
from tuner.model.conventions import POOL_LABELS, Keys
from tuner.model.resources import Resources
from tuner.settings import PoolSettings, PoolTemplate, Settings


def _no_selector() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class NodePool:
    """A group of identical nodes: what a new one looks like and how far the pool may move."""

    name: str
    node_type: str
    template: Node
    """A node of the pool as it would join (capacity, allocatable, pod slots, labels, taints);
    its name is empty."""
    min_size: int = 0
    """The tuner never plans the pool below this many nodes."""
    max_size: int | None = None
    """The pool never grows past this many nodes (None: no known limit)."""
    selector: Mapping[str, str] = field(default_factory=_no_selector)
    """Node labels that select the pool's nodes (what a placeholder pod's nodeSelector asks)."""


def _pool_label(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """The first of the pool labels, then the instance-type labels, that ``labels`` carry."""
    for key in (*POOL_LABELS, *INSTANCE_TYPE_LABELS):
        value = labels.get(key)
        if value:
            return key, value
    return None


OWN_TAINT_PREFIXES = (
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
    "karpenter.sh/",
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
)
"""Taints that say something about one node's state (autoscalers' marks, not-ready,
unschedulable), not about the pool: a template drops them, and the tuner's own."""


@dataclass(frozen=True, slots=True)
class Member:
    """How a node was found to be in a pool: the pool's name and the selector it was found by."""

    pool: str
    selector: Mapping[str, str]


def membership(node: Node, settings: Settings) -> Member | None:
    """The node's pool: a ``pools`` entry whose selector matches, else the first pool label,
    else the instance type (None when the node carries none of them)."""
    for name, spec in settings.pools.items():
        if spec.selector and all(node.labels.get(k) == v for k, v in spec.selector):
            return Member(name, MappingProxyType(dict(spec.selector)))
    found = _pool_label(node.labels)
    return None if found is None else Member(found[1], MappingProxyType(dict([found])))


def template_of(node: Node, settings: Settings) -> Node:
    """A node of the pool as a new one would join, copied from ``node``: no name, no hostname
    label, schedulable, without the tuner's and the autoscalers' labels, annotations and taints;
    only the price annotation is kept."""
    keys = Keys(settings.execute.label_prefix)
    labels = {k: v for k, v in node.labels.items() if k != HOSTNAME_KEY and not keys.owns(k)}
    price = settings.pricing.price_annotation
    annotations = {price: node.annotations[price]} if price in node.annotations else {}
    taints = tuple(
        t for t in node.taints if not (t.key.startswith(OWN_TAINT_PREFIXES) or keys.owns(t.key))
    )
    return replace(
        node,
        name="",
        labels=MappingProxyType(labels),
        annotations=MappingProxyType(annotations),
        taints=taints,
        unschedulable=False,
    )


def _configured_template(spec: PoolTemplate) -> Node:
    labels = {**dict(spec.labels), INSTANCE_TYPE_LABELS[0]: spec.instance_type}
    size = Resources(spec.cpu, spec.memory)
    return Node(
        name="",
        capacity=size,
        allocatable=size,
        max_pods=spec.pods,
        labels=MappingProxyType(labels),
        taints=tuple(Taint(k, v, e) for k, v, e in spec.taints),
    )


@dataclass(frozen=True)
class Pools:
    """The cluster's pools and which pool each node is in."""

    by_name: Mapping[str, NodePool]
    node_pool: Mapping[str, str]
    """Node name -> pool name (nodes in no pool are absent)."""

    def size(self, pool: str) -> int:
        """How many of the cluster's nodes are in the pool now."""
        return sum(1 for p in self.node_pool.values() if p == pool)

    def of(self, node: str) -> NodePool | None:
        """The node's pool, if any."""
        name = self.node_pool.get(node)
        return None if name is None else self.by_name[name]

    def room(self, pool: str) -> int | None:
        """How many nodes the pool may still grow by (None: no known limit)."""
        found = self.by_name[pool]
        return None if found.max_size is None else max(found.max_size - self.size(pool), 0)

    def spare(self, pool: str) -> int:
        """How many nodes the pool may shrink by before it reaches its minimum."""
        return max(self.size(pool) - self.by_name[pool].min_size, 0)


def discover(cluster: Cluster, settings: Settings) -> Pools:
    """The pools of ``cluster``'s nodes, plus the ``pools`` settings' entries with a template.

    A pool's template is its first node (sorted by name) as a new one would join, without a
    zone label when the pool's nodes are in several zones (which zone a new node joins is its
    autoscaler's choice); the settings' template serves a pool with no node now. Its minimum
    defaults to 0 when the settings do not say (the pool's autoscaler still enforces its own),
    its maximum to no limit.
    """
    node_pool: dict[str, str] = {}
    found: dict[str, tuple[Node, Mapping[str, str]]] = {}
    zones: dict[str, set[str | None]] = {}
    for node in sorted(cluster.nodes, key=lambda n: n.name):
        member = membership(node, settings)
        if member is None:
            continue
        node_pool[node.name] = member.pool
        found.setdefault(member.pool, (template_of(node, settings), member.selector))
        zones.setdefault(member.pool, set()).add(node.labels.get(ZONE_KEY))
    for name, seen in zones.items():
        if len(seen) > 1:  # its autoscaler picks the zone of a new node: the plan cannot
            template, selector = found[name]
            labels = {k: v for k, v in template.labels.items() if k != ZONE_KEY}
            found[name] = (replace(template, labels=MappingProxyType(labels)), selector)
    pools: dict[str, NodePool] = {}
    for name in sorted(set(found) | set(settings.pools)):
        spec = settings.pools.get(name, PoolSettings())
        if name in found:
            template, selector = found[name]
        elif spec.template is not None:
            template = _configured_template(spec.template)
            selector = _selector(name, spec, template)
        else:
            continue
        pools[name] = NodePool(
            name,
            template.instance_type,
            template,
            min_size=spec.min_size or 0,
            max_size=spec.max_size,
            selector=selector,
        )
    return Pools(MappingProxyType(pools), MappingProxyType(node_pool))


def _selector(name: str, spec: PoolSettings, template: Node) -> Mapping[str, str]:
    """The selector of a configured pool with no node now: its settings' selector, else the
    first pool label its template carries, else its instance type."""
    if spec.selector:
        return MappingProxyType(dict(spec.selector))
    found = _pool_label(template.labels)
    return MappingProxyType(dict([found]) if found else {INSTANCE_TYPE_LABELS[0]: name})
