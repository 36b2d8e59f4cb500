"""The provider's node groups (GKE node pools, EKS managed node groups; the Cluster Autoscaler's
``NodeGroup``): one instance type, a size range, the nodes a scenario starts with.

They are the cloud side of a pool, what the simulated autoscalers resize. The tuner's own view of
a pool (:class:`tuner.model.pools.NodePool`: a template node and a selector) is not built from
them: the simulated tuner discovers it from the nodes and its ``pools`` settings, as the daemon
does (:func:`tuner.sim.strategies.tuner.pool_settings`).

The Cluster Autoscaler grows one pool per scale-up (which one is its expander's choice,
:mod:`tuner.sim.expander`) and never shrinks a pool below its minimum. Every node carries its
pool's name as a label, under the key the scenario's provider uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.settings import Pricing
from tuner.sim.prices import NodeType


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """A group of identical VMs the autoscaler resizes between min and max (a GKE node pool or
    an EKS managed node group in one zone)."""

    name: str
    node_type: NodeType
    min_nodes: int = 0
    max_nodes: int = 100
    initial_nodes: int = 0
    zone: str = ""
    """The zone its nodes are in (``topology.kubernetes.io/zone``; ``""``: no zone label). A
    node pool over several zones is one pool per zone, as GKE's multi-zonal node pools (one
    instance group per zone) and EKS' one node group per Availability Zone for the Cluster
    Autoscaler are."""


def pricing(pools: tuple[NodeGroup, ...]) -> Pricing:
    """The tuner's pricing table for the pools' node types."""
    return Pricing(
        node_types={p.node_type.name: p.node_type.price for p in pools},
        currency=pools[0].node_type.currency,
    )
