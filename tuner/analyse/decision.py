"""The decision (thesis Algorithm 1): remove nodes, return to a previous deployment, or stay;
then replace nodes.

removal if cost_removal <= cost_previous; else stay if cost_current <= cost_previous; else
previous. When both options are impossible (both infinite) the answer is "stay", not
"remove". Replace (new nodes of a pool's type, :mod:`tuner.analyse.replace`) is weighed after
that, by cost after: it wins when it costs less than what Algorithm 1 chose (staying costs
``cost_current``); on an equal cost it wins against a previous deployment only when it is
less disruptive (:attr:`Disruption.rank`), and never against removal or staying. An option
whose saving is below ``min_saving_per_hour`` is not worth its disruption: stay. When
staying, with probability ``migration_chance``, one random migration. Every option keeps
within the eviction budget, when there is one: removal takes fewer nodes, another option whose
change would exceed it is refused (:meth:`Proposal.within`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tuner.analyse.options import Forget, Proposal
from tuner.analyse.options.exploration import EXPLORATION, propose_exploration
from tuner.analyse.options.previous import PREVIOUS, propose_previous
from tuner.analyse.options.removal import REMOVAL, propose_removal
from tuner.analyse.options.replace import REPLACE, propose_replace
from tuner.analyse.removal import CandidateTimers
from tuner.model.change import DesiredChange
from tuner.model.cluster import Cluster, Workload
from tuner.model.execution import Execution
from tuner.model.limits import Budget
from tuner.model.movability import Movability, Policy, assess
from tuner.model.pools import discover
from tuner.model.price import nodes_cost
from tuner.settings import Settings


class Choice(StrEnum):
    """What the tuner decided to do this window."""

    REMOVE_NODES = REMOVAL.choice
    PREVIOUS = PREVIOUS.choice
    REPLACE_NODES = REPLACE.choice
    STAY = "stay"
    RANDOM = EXPLORATION.choice


@dataclass(frozen=True)
class Analysis:
    """The decision, why, the proposals weighed, and the change to make."""

    decision: Choice
    reason: str
    cost_current: float
    cost_after: float
    change: DesiredChange
    proposals: tuple[Proposal, ...]
    """Every priced option's proposal, chosen or not, in the order they are reported."""
    chosen: Proposal | None
    """The proposal to carry out (None when staying)."""
    movability: Movability
    timers: CandidateTimers | None = None
    """The candidate-delay timers updated with this analysis (None when not tracked)."""

    @property
    def limited(self) -> str | None:
        """Why the eviction budget cut or refused an option, the first such (None: none)."""
        return next((p.limited for p in self.proposals if p.limited), None)

    @property
    def forget(self) -> tuple[Forget, ...]:
        """Knowledge-base entries to delete whatever is decided."""
        return tuple(f for p in self.proposals for f in p.forget)

    @property
    def holds(self) -> str | None:
        """The knowledge-base entry the chosen change returns to (see :attr:`Proposal.holds`)."""
        return self.chosen.holds if self.chosen else None


def choose(cost_current: float, cost_removal: float, cost_previous: float) -> Choice:
    """Algorithm 1 with the both-impossible guard."""
    if math.isinf(cost_removal) and math.isinf(cost_previous):
        return Choice.STAY
    if cost_removal <= cost_previous:
        return Choice.REMOVE_NODES
    if cost_current <= cost_previous:
        return Choice.STAY
    return Choice.PREVIOUS


def replace_wins(chosen: Proposal | None, cost_current: float, replace: Proposal) -> bool:
    """Whether ``replace`` beats what Algorithm 1 chose (``chosen``; None: stay)."""
    if not replace.possible:
        return False
    if chosen is None:
        return replace.cost_after < cost_current
    if replace.cost_after != chosen.cost_after or chosen.option is not PREVIOUS:
        return replace.cost_after < chosen.cost_after
    return replace.disruption.rank < chosen.disruption.rank


def analyse(
    cluster: Cluster,
    settings: Settings,
    history: Sequence[Execution],
    rng: random.Random,
    timers: CandidateTimers | None = None,
    now: float = 0.0,
    kept: frozenset[str] = frozenset(),
    *,
    unsettled_nodes: frozenset[str] = frozenset(),
    unsettled_workloads: frozenset[Workload] = frozenset(),
    budget: Budget | None = None,
) -> Analysis:
    """Analyse one actionable window. ``history`` holds the knowledge-base entries for this
    load; ``timers`` (with ``now``) track the candidate delay across windows (see
    find_removal); the ``kept`` nodes are not removed; the unsettled nodes and workloads
    changed during the window and are kept out of the change; no change evicts more pods than
    ``budget`` leaves (None: no limit)."""
    policy = Policy(
        settings.analyse.excluded_namespaces, kept, unsettled_nodes, unsettled_workloads
    )
    movability = assess(cluster, policy)
    current = nodes_cost(cluster.nodes, settings.pricing)
    pools = discover(cluster, settings)
    removal, timers = propose_removal(
        cluster, settings, movability, current, timers, now, pools, budget
    )
    previous = propose_previous(cluster, movability, settings.pricing, history, current, pools)
    replace = propose_replace(cluster, settings, movability, pools, current)
    proposals = tuple(p.within(budget) for p in (removal, previous, replace))
    removal, previous, replace = proposals
    choice = choose(current, removal.cost_after, previous.cost_after)
    chosen = {Choice.REMOVE_NODES: removal, Choice.PREVIOUS: previous}.get(choice)
    if chosen is not None and not chosen.possible:
        chosen = None
    if replace_wins(chosen, current, replace):
        choice, chosen = Choice.REPLACE_NODES, replace
    if chosen is not None:
        reason = chosen.option.announce + chosen.reason
    else:
        reason = "stay: " + "; ".join(p.reason for p in proposals)
        choice = Choice.STAY
    saving = current - (chosen.cost_after if chosen else current)
    if chosen is not None and saving < settings.analyse.min_saving_per_hour:
        reason = (
            f"stay: saving {saving:.4f}/h is below min_saving_per_hour "
            f"{settings.analyse.min_saving_per_hour:g} ({reason})"
        )
        choice, chosen = Choice.STAY, None
    if chosen is None and rng.random() < settings.analyse.migration_chance:
        explore = propose_exploration(cluster, movability, settings.analyse.usability, rng, current)
        if explore is not None and explore.within(budget).possible:
            choice, chosen = Choice.RANDOM, explore
            reason = f"explore: {reason}; {explore.reason}"
    return Analysis(
        decision=choice,
        reason=reason,
        cost_current=current,
        cost_after=chosen.cost_after if chosen else current,
        change=chosen.change if chosen else DesiredChange(),
        proposals=proposals,
        chosen=chosen,
        movability=movability,
        timers=timers,
    )
