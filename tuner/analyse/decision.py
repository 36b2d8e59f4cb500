"""The decision (thesis Algorithm 1): remove nodes, return to a previous deployment, or stay.

removal if cost_removal <= cost_previous; else stay if cost_current <= cost_previous; else
previous. When both options are impossible (both infinite) the answer is "stay", not
"remove". An option whose saving is below ``min_saving_per_hour`` is not worth its
disruption: stay. When staying, with probability ``migration_chance``, one random migration.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tuner.analyse.exploration import random_migration
from tuner.analyse.previous import PreviousResult, find_previous
from tuner.analyse.removal import CandidateTimers, RemovalResult, find_removal
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Cluster
from tuner.model.execution import Execution
from tuner.model.movability import Movability, Policy, assess
from tuner.model.price import nodes_cost
from tuner.settings import Settings


class Choice(StrEnum):
    """What the tuner decided to do this window."""

    REMOVE_NODES = "remove_nodes"
    PREVIOUS = "previous_deployment"
    STAY = "stay"
    RANDOM = "random_migration"


@dataclass(frozen=True)
class Analysis:
    """The decision, why, what each option costs, and the change to make."""

    decision: Choice
    reason: str
    cost_current: float
    cost_removal: float
    cost_previous: float
    cost_after: float
    change: DesiredChange
    removal: RemovalResult
    previous: PreviousResult
    movability: Movability


def choose(cost_current: float, cost_removal: float, cost_previous: float) -> Choice:
    """Algorithm 1 with the both-impossible guard."""
    if math.isinf(cost_removal) and math.isinf(cost_previous):
        return Choice.STAY
    if cost_removal <= cost_previous:
        return Choice.REMOVE_NODES
    if cost_current <= cost_previous:
        return Choice.STAY
    return Choice.PREVIOUS


def analyse(
    cluster: Cluster,
    settings: Settings,
    history: Sequence[Execution],
    rng: random.Random,
    timers: CandidateTimers | None = None,
    now: float = 0.0,
    kept: frozenset[str] = frozenset(),
) -> Analysis:
    """Analyse one stable window. ``history`` holds the knowledge-base entries for this load;
    ``timers`` (with ``now``) track the candidate delay across windows (see find_removal);
    the ``kept`` nodes are not removed."""
    movability = assess(cluster, Policy(settings.analyse.excluded_namespaces, kept))
    current = nodes_cost(cluster.nodes, settings.pricing)
    removal = find_removal(cluster, settings, movability, timers, now)
    previous = find_previous(cluster, movability, settings.pricing, history, current)
    cost_removal = current - removal.removal.saving if removal.removal else math.inf
    choice = choose(current, cost_removal, previous.cost)
    change = DesiredChange()
    after = current
    if choice is Choice.REMOVE_NODES and removal.removal:
        reason = removal.reason
        change = DesiredChange(
            relocations=tuple(Relocation(pod, node) for pod, node in removal.removal.moves),
            remove_nodes=removal.removal.nodes,
        )
        after = cost_removal
    elif choice is Choice.PREVIOUS and previous.change:
        reason = f"return to the cheapest previous deployment: {previous.reason}"
        change, after = previous.change, previous.cost
    else:
        reason = f"stay: {removal.reason}; {previous.reason}"
    saving = current - after
    if (
        choice in (Choice.REMOVE_NODES, Choice.PREVIOUS)
        and saving < settings.analyse.min_saving_per_hour
    ):
        reason = (
            f"stay: saving {saving:.4f}/h is below min_saving_per_hour "
            f"{settings.analyse.min_saving_per_hour:g} ({reason})"
        )
        choice, change, after = Choice.STAY, DesiredChange(), current
    if choice is Choice.STAY and rng.random() < settings.analyse.migration_chance:
        move = random_migration(cluster, movability, settings.analyse.usability, rng)
        if move is not None:
            choice = Choice.RANDOM
            reason = f"explore: {reason}; random migration of {move.pod.key} to {move.node}"
            change = DesiredChange(relocations=(move,))
    return Analysis(
        decision=choice,
        reason=reason,
        cost_current=current,
        cost_removal=cost_removal,
        cost_previous=previous.cost,
        cost_after=after,
        change=change,
        removal=removal,
        previous=previous,
        movability=movability,
    )
