"""The replace option: drain several nodes onto fewer or cheaper new nodes of a pool's type
(:func:`tuner.analyse.replace.find_replacement`)."""

from __future__ import annotations

import math

from tuner.analyse.options import Option, Proposal
from tuner.analyse.replace import find_replacement
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Cluster
from tuner.model.movability import Movability
from tuner.model.pools import Pools
from tuner.settings import Settings

REPLACE = Option("replace_nodes", "replace nodes", "impossible", "cost_replace", "ReplacedNodes")


def propose_replace(
    cluster: Cluster, settings: Settings, movability: Movability, pools: Pools, current: float
) -> Proposal:
    """The replace proposal from the cluster costing ``current`` per hour."""
    result = find_replacement(cluster, settings, movability, pools)
    found = result.replacement
    if found is None:
        return Proposal(REPLACE, math.inf, DesiredChange(), result.reason)
    change = DesiredChange(
        relocations=tuple(Relocation(pod, node) for pod, node in found.moves),
        remove_nodes=found.drained,
        new_nodes=found.new_nodes,
    )
    return Proposal(REPLACE, current - found.saving, change, result.reason)
