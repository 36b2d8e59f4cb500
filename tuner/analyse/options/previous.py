"""The previous-deployment option: return to the cheapest attainable knowledge-base entry for
this load (:func:`tuner.analyse.previous.find_previous`); the entries found unattainable are
forgotten, the chosen one is held until it proves stable again."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.analyse.options import Forget, Option, Proposal
from tuner.analyse.previous import find_previous
from tuner.model.change import DesiredChange
from tuner.model.cluster import Cluster
from tuner.model.execution import Execution
from tuner.model.movability import Movability
from tuner.model.pools import Pools
from tuner.settings import Pricing

PREVIOUS = Option(
    "previous_deployment",
    "previous deployment",
    "none",
    "cost_previous",
    "PreviousDeployment",
    "return to the cheapest previous deployment: ",
)


def propose_previous(
    cluster: Cluster,
    movability: Movability,
    pricing: Pricing,
    history: Sequence[Execution],
    current: float,
    pools: Pools | None = None,
) -> Proposal:
    """The previous-deployment proposal among ``history`` (entries for this load); missing
    nodes come from ``pools`` that can grow."""
    result = find_previous(cluster, movability, pricing, history, current, pools)
    forget = tuple(Forget(entry, "unattainable", why) for entry, why in result.unattainable)
    if result.execution is None or result.change is None:
        return Proposal(PREVIOUS, result.cost, DesiredChange(), result.reason, forget)
    return Proposal(
        PREVIOUS,
        result.cost,
        result.change,
        result.reason,
        forget,
        holds=result.execution.id,
    )
