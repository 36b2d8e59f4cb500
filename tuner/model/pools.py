"""Node pools as the tuner sees them: groups of identical nodes an autoscaler resizes.

A node's pool is named by the first of :data:`POOL_LABELS` it carries (GKE node pool, EKS
managed node group, Karpenter NodePool), else by its instance type; the ``pools`` settings may
name pools, their minimum and maximum size and a template for pools with no node yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tuner.model.cluster import INSTANCE_TYPE_LABELS, Node

POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
)
"""Labels naming a node's pool, in the order they are read; the instance type is the fallback."""


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


def pool_name(node: Node) -> str:
    """The node's pool: the first pool label it carries, else its instance type, else ``""``."""
    for key in (*POOL_LABELS, *INSTANCE_TYPE_LABELS):
        value = node.labels.get(key)
        if value:
            return value
    return ""
