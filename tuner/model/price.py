"""Cost of nodes per hour: explicit price, price table, or the per-core/per-GiB formula.

Cost uses capacity (what you pay for); fitting uses allocatable.
"""

from __future__ import annotations

from collections.abc import Iterable

from tuner.model.cluster import Node
from tuner.model.quantity import GIB
from tuner.settings import Pricing


def node_price(node: Node, pricing: Pricing) -> float:
    """Price of a node per hour."""
    explicit = node.annotations.get(pricing.price_annotation)
    if explicit is not None:
        try:
            return float(explicit)
        except ValueError:
            pass
    if node.instance_type in pricing.node_types:
        return pricing.node_types[node.instance_type]
    cores = node.capacity.cpu / 1000
    gib = node.capacity.memory / GIB
    return cores * pricing.price_per_core + gib * pricing.price_per_gb


def nodes_cost(nodes: Iterable[Node], pricing: Pricing) -> float:
    """Total price per hour of the nodes."""
    return sum(node_price(n, pricing) for n in nodes)
