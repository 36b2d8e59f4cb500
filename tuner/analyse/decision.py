"""The decision (thesis Algorithm 1, extended by replace and exploration): the options of
:data:`WEIGHED` propose in order over one :class:`~tuner.analyse.context.Context`, and the walk
keeps the first that beats the one ahead of it, starting from staying.

An option beats the one ahead when its proposal costs less after; at an equal cost only when it
says so (:meth:`~tuner.analyse.options.Option.wins_tie`): removal wins a tie with staying
(Algorithm 1: removal when it costs no more than a previous deployment, which costs less than
staying), a previous deployment never does, replace only against a previous deployment that is
more disruptive (:attr:`~tuner.analyse.options.Disruption.rank`). So: removal if cost_removal <=
cost_previous; else stay if cost_current <= cost_previous; else previous; then replace when it
costs less still. When both removal and previous are impossible the answer is "stay". An option
whose saving is below ``min_saving_per_hour`` is not worth its disruption: stay. When staying,
with probability ``migration_chance``, one random migration (:class:`Exploration`). Every option
keeps within the eviction budget, when there is one: removal takes fewer nodes, another option
whose change would exceed it is refused (:meth:`Proposal.within`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.analyse.context import Context
from tuner.analyse.exploration import Exploration
from tuner.analyse.options import Choice, Forget, Option, Proposal
from tuner.analyse.previous import PreviousDeployment
from tuner.analyse.removal import CandidateTimers, RemoveNodes
from tuner.analyse.replace import ReplaceNodes
from tuner.model.change import DesiredChange
from tuner.model.cluster import Cluster, Workload
from tuner.model.execution import Execution
from tuner.model.forecast import Forecast
from tuner.model.limits import Budget
from tuner.model.movability import Movability, Policy, assess
from tuner.settings import Settings

__all__ = ["Analysis", "Choice", "Stay", "analyse", "beats", "walk"]


class Stay:
    """Staying: the change is nothing, the cost what it is now. Where every walk starts."""

    name = Choice.STAY
    announce = ""

    def propose(self, context: Context) -> Proposal:
        """Nothing to change."""
        return Proposal(self.name, context.current, DesiredChange(), "stay")

    def wins_tie(self, mine: Proposal, incumbent: Proposal) -> bool:
        """It is where the walk starts: nothing to beat."""
        return False


WEIGHED: tuple[Option, ...] = (RemoveNodes(), PreviousDeployment(), ReplaceNodes())
"""The options the decision weighs, in the order it walks them (and reports them)."""


@dataclass(frozen=True)
class Analysis:
    """The decision, why, the proposals weighed, and the change to make."""

    decision: Choice
    reason: str
    cost_current: float
    cost_after: float
    change: DesiredChange
    proposals: tuple[Proposal, ...]
    """Every weighed option's proposal, chosen or not, in the order of :data:`WEIGHED`."""
    chosen: Proposal | None
    """The proposal to carry out (None when staying)."""
    movability: Movability
    timers: CandidateTimers | None = None
    """The candidate-delay timers updated with this analysis (None when not tracked)."""
    candidates: frozenset[str] = frozenset()
    """The nodes that passed the linear candidate check (the context's, for reports)."""

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


def beats(option: Option, mine: Proposal, incumbent: Proposal) -> bool:
    """Whether ``option``'s proposal beats the one ahead so far (see the module)."""
    if not mine.possible:
        return False
    if mine.cost_after != incumbent.cost_after:
        return mine.cost_after < incumbent.cost_after
    return option.wins_tie(mine, incumbent)


def walk(stay: Proposal, weighed: Sequence[tuple[Option, Proposal]]) -> Proposal:
    """The proposal the walk keeps: staying, or the last option that beat the one ahead."""
    chosen = stay
    for option, proposal in weighed:
        if beats(option, proposal, chosen):
            chosen = proposal
    return chosen


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
    forecast: Forecast | None = None,
) -> Analysis:
    """Analyse one actionable window. ``history`` holds the knowledge-base entries for the load
    expected next; ``timers`` (with ``now``) track the candidate delay across windows (see
    :class:`~tuner.analyse.context.Context`); the ``kept`` nodes are not removed; the
    unsettled nodes and workloads changed during the window and are kept out of the change; no
    change evicts more pods than ``budget`` leaves (None: no limit); with ``forecast`` a
    removal or a replacement leaves room for its upper band (``analyse.headroom``)."""
    policy = Policy(
        settings.analyse.excluded_namespaces, kept, unsettled_nodes, unsettled_workloads
    )
    movability = assess(cluster, policy)
    context = Context.of(
        cluster,
        settings,
        movability,
        budget=budget,
        history=history,
        timers=timers,
        now=now,
        forecast=forecast,
    )
    current = context.current
    stay = Stay().propose(context)
    proposals = tuple(option.propose(context).within(budget) for option in WEIGHED)
    chosen = walk(stay, list(zip(WEIGHED, proposals, strict=True)))
    if chosen is not stay:
        announce = next(o.announce for o in WEIGHED if o.name is chosen.option)
        reason = announce + chosen.reason
    else:
        reason = "stay: " + "; ".join(p.reason for p in proposals)
    saving = current - chosen.cost_after
    if chosen is not stay and saving < settings.analyse.min_saving_per_hour:
        reason = (
            f"stay: saving {saving:.4f}/h is below min_saving_per_hour "
            f"{settings.analyse.min_saving_per_hour:g} ({reason})"
        )
        chosen = stay
    if chosen is stay and rng.random() < settings.analyse.migration_chance:
        exploration = Exploration(rng)
        explore = exploration.propose(context)
        if beats(exploration, explore.within(budget), chosen):
            chosen = explore
            reason = f"explore: {reason}; {explore.reason}"
    return Analysis(
        decision=chosen.option,
        reason=reason,
        cost_current=current,
        cost_after=chosen.cost_after,
        change=chosen.change,
        proposals=proposals,
        chosen=None if chosen is stay else chosen,
        movability=movability,
        timers=context.timers,
        candidates=context.candidates,
    )
