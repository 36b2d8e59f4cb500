"""Cost of nodes per hour: explicit price, price table, or the per-core/per-GiB formula.

Cost uses capacity (what you pay for); fitting uses allocatable.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from tuner.model.cluster import Node
from tuner.model.quantity import GIB
from tuner.settings import Pricing


class PriceSource(StrEnum):
    """Where a node's price came from, in the order they are tried."""

    ANNOTATION = "annotation"
    """The node's ``pricing.price_annotation``."""
    NODE_TYPES = "node_types"
    """``pricing.node_types`` for the node's instance type."""
    FORMULA = "formula"
    """cores * ``pricing.price_per_core`` + GiB * ``pricing.price_per_gb`` on capacity."""


@dataclass(frozen=True)
class TypePrice:
    """The nodes of one instance type priced alike: how many, at what price, from where."""

    node_type: str
    nodes: int
    price: float
    source: PriceSource


def priced(node: Node, pricing: Pricing) -> tuple[float, PriceSource]:
    """Price of a node per hour, and where it came from.

    The annotation is checked where nodes are read (:func:`tuner.monitor.dump.cluster_from_objects`
    refuses a node whose annotation is not a finite price >= 0); one that slips through here
    (a custom ``pricing.price_annotation`` on a live node) is ignored, never planned with.
    """
    explicit = node.annotations.get(pricing.price_annotation)
    if explicit is not None:
        try:
            price = float(explicit)
        except ValueError:
            price = math.nan
        if math.isfinite(price) and price >= 0:
            return price, PriceSource.ANNOTATION
    if node.instance_type in pricing.node_types:
        return pricing.node_types[node.instance_type], PriceSource.NODE_TYPES
    cores = node.capacity.cpu / 1000
    gib = node.capacity.memory / GIB
    return cores * pricing.price_per_core + gib * pricing.price_per_gb, PriceSource.FORMULA


def node_price(node: Node, pricing: Pricing) -> float:
    """Price of a node per hour (see :func:`priced`)."""
    return priced(node, pricing)[0]


def type_prices(nodes: Iterable[Node], pricing: Pricing) -> tuple[TypePrice, ...]:
    """The prices the nodes were costed at, grouped by instance type, price and source."""
    groups = Counter(
        (node.instance_type or "(no instance type)", *priced(node, pricing)) for node in nodes
    )
    return tuple(
        TypePrice(node_type, count, price, source)
        for (node_type, price, source), count in sorted(groups.items(), key=lambda g: g[0][:2])
    )


def nodes_cost(nodes: Iterable[Node], pricing: Pricing) -> float:
    """Total price per hour of the nodes."""
    return sum(node_price(n, pricing) for n in nodes)
