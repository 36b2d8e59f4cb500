"""The node-removal option: the nodes that can go together, their pods re-placed elsewhere
(:func:`tuner.analyse.removal.find_removal`)."""

from __future__ import annotations

import math
from dataclasses import replace

from tuner.analyse.options import Option, Proposal
from tuner.analyse.removal import CandidateTimers, find_removal
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Cluster
from tuner.model.limits import Budget
from tuner.model.movability import Movability
from tuner.model.pools import Pools
from tuner.settings import Settings

REMOVAL = Option("remove_nodes", "remove nodes", "impossible", "cost_removal", "RemovedNodes")


def propose_removal(
    cluster: Cluster,
    settings: Settings,
    movability: Movability,
    current: float,
    timers: CandidateTimers | None,
    now: float,
    pools: Pools | None = None,
    budget: Budget | None = None,
) -> tuple[Proposal, CandidateTimers | None]:
    """The removal proposal from the cluster costing ``current`` per hour, and the
    candidate-delay timers updated (None when not tracked)."""
    result = find_removal(cluster, settings, movability, timers, now, pools, budget)
    found = result.removal
    if found is None:
        proposal = Proposal(REMOVAL, math.inf, DesiredChange(), result.reason)
        return replace(proposal, limited=result.limited), result.timers
    change = DesiredChange(
        relocations=tuple(Relocation(pod, node) for pod, node in found.moves),
        remove_nodes=found.nodes,
    )
    proposal = Proposal(REMOVAL, current - found.saving, change, result.reason)
    return replace(proposal, limited=result.limited), result.timers
