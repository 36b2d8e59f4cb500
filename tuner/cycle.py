"""One MAPE-K cycle of the daemon: monitor, record, analyse, plan, execute.

The cycle is a function from (time, state) to (outcome, new state). Effects go through three
ports so the same cycle runs against a real cluster, the simulator or a dry run:

- :class:`WindowObserver`: was the deployment stable over a window, and what load did it serve;
- :class:`Actuator`: read the cluster, carry out actions (or, in a dry run, only check them);
- the knowledge base (:class:`knowledge.base.KnowledgeBase`);
- optionally the load's history (:class:`LoadHistory`), from which each cycle forecasts the
  load of the next horizon (:func:`~tuner.reserving.forecast_at`): the analysis leaves room
  for its upper band, and a :class:`ReserveKeeper` holds the room its rise asks for each
  cycle, whatever the window (:func:`~tuner.reserving.reserve_at`), and every
  ``windows.retry_s`` between cycles (:func:`hold_reserve`).

Rules (thesis §3.2; concepts.md): act only on an actionable window (under ``windows.scope``
``cluster`` one stable as a whole; under ``touched`` one without a pod pending or a node joining
or leaving, whose changed nodes and workloads stay out of the plan; or one the decline rule
releases, :class:`~tuner.model.acting.Acting`); record the deployment only after a whole window
stable as a whole (its key is the whole load); retry a window not actionable after
``windows.retry_s``; after a change, start the next window a warm-up after it ended (during a
decline, a settle time, in which the transition's own moves, :attr:`CycleState.own`, are told
from the load's). A chosen previous deployment, looked up for the load expected next, is deleted
from the knowledge base until the next window proves it stable; the option reads only the
cheapest ``knowledge.lookup_limit`` entries cheaper than the cluster now
(:func:`~tuner.recall.previous_candidates`) and deletes those found unattainable. Candidate
timers live across cycles. Unless in a dry run, a cycle first takes back the nodes an autoscaler
did not remove (:meth:`Actuator.reclaim_unremoved`) and keeps them for :data:`KEEP_S`. An
unreachable knowledge base skips the previous-deployment option, nothing else; a dry run reads
it, writes nothing and carries nothing out. What the cluster read holds that the window did not
see (:mod:`tuner.model.unseen`): an unobserved node stays out of the plan and nothing is
recorded; a pending pod keeps the cycle from acting.

Limits (``limits``, :mod:`tuner.model.limits`): the analysis keeps within the eviction budget
the :class:`Safeguards` ledger leaves; a planned change is carried out only while the tuner is
not paused (read every cycle) and inside a maintenance window — otherwise the cycle is
:attr:`Outcome.HELD`, with the plan and why (a dry run says the same). A ledger or pause
switch that cannot be read holds the change too. Before a transition its evictions are
written to the ledger; after it, they are replaced by those of the actions it really ran (the
verified ones and the one that failed).
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from knowledge.base import KnowledgeBase
from tuner.analyse.decision import Analysis, analyse
from tuner.analyse.removal import CandidateTimers
from tuner.errors import ServiceError
from tuner.holds import (
    MemorySafeguards,
    Safeguards,
    budget_left,
    closed_by,
    paused_by,
    settle,
)
from tuner.model.acting import Acting, decline_retry_s, decline_settle_s, window_start
from tuner.model.cluster import Cluster
from tuner.model.conventions import Keys
from tuner.model.demand import decided_by, expected_load
from tuner.model.execution import execution_of
from tuner.model.forecast import Forecast, LoadSeries
from tuner.model.load import Load
from tuner.model.reserve import Reserve, ReserveOutcome
from tuner.model.unseen import Unseen, unseen
from tuner.model.window_report import OwnChange, Release
from tuner.own_moves import own_change
from tuner.plan.actions import Action, evictions
from tuner.recall import entries_for, forget_entry, record
from tuner.report.build import PlanReport, build_report
from tuner.reserving import forecast_at, reserve_at, reserve_forecast
from tuner.settings import Settings

if TYPE_CHECKING:
    from tuner.model.window_report import WindowReport

log = logging.getLogger(__name__)


class WindowObserver(Protocol):
    """Monitors stability and load over a window (epoch seconds): the monitor's
    :func:`~tuner.monitor.observe.observe_window` behind an adapter."""

    def observe(self, start: float, end: float) -> WindowReport:
        """The verdict for [start, end] and, when stable, the load served."""


@dataclass(frozen=True)
class TransitionResult:
    """How a transition went: the actions that ran and were verified, and why it stopped."""

    done: tuple[Action, ...]
    completed: bool
    reason: str = ""
    eviction_only: tuple[Action, ...] = ()
    """The verified migrates and adds (of :attr:`done`) whose workload is not onboarded: the
    scheduler chose the node (placement not controlled), the executor only verified it is not
    the source or a node being emptied."""
    landed_elsewhere: tuple[tuple[Action, str], ...] = ()
    """The verified migrates and adds (of :attr:`done`) of onboarded workloads whose new pod
    the scheduler put on another node than the labelled destination, each with that node."""
    took_s: float = 0.0
    """How long it took, by the actuator's clock: the warm-up after it counts from its end."""


class Actuator(Protocol):
    """Reads the cluster and carries out actions."""

    def read(self) -> Cluster:
        """The cluster now."""

    def check(self, actions: Sequence[Action]) -> TransitionResult:
        """The dry run: check each action (reads only) and say what it would do."""

    def carry_out(self, actions: Sequence[Action]) -> TransitionResult:
        """Run the actions in order, verifying each; stop at the first failure."""

    def reclaim_unremoved(self, now: float) -> tuple[str, ...]:
        """Take back the nodes left for an autoscaler that did not remove them in time; their
        names."""

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        """Take back the nodes left for an autoscaler that pending pods would run on (at any
        time: the daemon checks every ``windows.retry_s``); their names."""


class LoadHistory(Protocol):
    """The load's past: Prometheus in the daemon, what the simulation served in the simulator.
    May raise a :class:`~tuner.errors.ServiceError`."""

    def series(self, end: float) -> LoadSeries:
        """The load at every step of the look-back up to ``end`` (never after now)."""


class ReserveKeeper(Protocol):
    """Holds the room a forecast rise asks for as placeholder pods: the daemon's through the
    Kubernetes API, the simulator's in the simulation."""

    def hold(self, reserve: Reserve, now: float) -> ReserveOutcome:
        """Make the placeholders held match ``reserve``: create those missing, remove those
        it no longer asks for (or whose reserve expired), each verified."""


class Outcome(StrEnum):
    """How a cycle ended (also the label of the cycles metric)."""

    WAITING = "waiting"
    UNSTABLE = "unstable"
    UNKNOWN = "unknown"
    STAYED = "stayed"
    ACTED = "acted"
    PLANNED = "planned"
    """Dry run: a change was planned and printed, nothing was done."""
    FAILED = "failed"
    SKIPPED = "skipped"
    """A change was planned but is larger than one cycle may disrupt."""
    HELD = "held"
    """A change was planned (or cut to nothing by the eviction budget) but not carried out:
    paused, outside every maintenance window, or the budget spent."""
    ERROR = "error"
    """The cycle raised (a service failed); the moderator retries after the retry window."""


KEEP_S = 24 * 3600.0
"""How long a node taken back from the autoscaler is not removed again."""


@dataclass(frozen=True)
class CycleState:
    """What the daemon remembers between cycles."""

    stable_since: float = -math.inf
    """No window may start before this: the last change the tuner made ended a warm-up
    earlier (so the warm-up the monitor checks before a window never includes the change)."""
    timers: CandidateTimers = field(default_factory=CandidateTimers)
    awaiting: str | None = None
    """Id of the previous deployment chosen last cycle, until a stable window re-adds it."""
    recorded_to: float = -math.inf
    """The end of the last window recorded: a window overlapping it is not recorded again (the
    cycle may look again before a whole window passed, during a decline)."""
    kept: tuple[tuple[str, float], ...] = ()
    """Nodes taken back from an autoscaler that did not remove them, and when: the analysis
    does not remove them for :data:`KEEP_S` (removing them again would only repeat that)."""
    own: OwnChange | None = None
    """What the last transition changed by its verified moves (:func:`own_change`): the
    decline rule tells it from what the load changed."""

    def keep(self, nodes: Sequence[str], now: float) -> CycleState:
        """Remember the nodes taken back at ``now``; forget those kept :data:`KEEP_S`."""
        kept = {n: t for n, t in self.kept if now - t < KEEP_S} | dict.fromkeys(nodes, now)
        return replace(self, kept=tuple(sorted(kept.items())))


@dataclass(frozen=True)
class CycleReport:
    """Everything one cycle saw and did (logged, exported as metrics, printed in dry runs)."""

    outcome: Outcome
    start: float
    end: float
    reason: str
    next_in: float
    """Seconds until the next cycle."""
    window: WindowReport | None = None
    """What the monitor saw (None while waiting for a full window)."""
    load: Load | None = None
    """The load the window served, which the knowledge base keys it by."""
    plan: PlanReport | None = None
    result: TransitionResult | None = None
    recorded: str | None = None
    """Id under which the deployment was recorded (never in a dry run)."""
    paused: str | None = None
    """Why the tuner was paused during this cycle (None: it was not)."""
    hold: str | None = None
    """Why a change was not carried out (:attr:`Outcome.HELD`), or None."""
    cluster: Cluster | None = None
    """The cluster the cycle analysed (None when it did not read one)."""
    forecast: Forecast | None = None
    """The load expected over the next horizon (None: no history port, or see
    :attr:`no_forecast`)."""
    no_forecast: str | None = None
    """Why there is no forecast although one was asked for."""
    reserve: Reserve | None = None
    """The room the forecast asks to hold (None: no keeper and not a dry run)."""
    reserved: ReserveOutcome | None = None
    """What holding it did (None: not held, as in a dry run)."""
    decline: Release | None = None
    """The decline rule's answer on the window (None: not asked)."""
    unobserved: frozenset[str] = frozenset()
    """Nodes in the cluster read that the window did not observe (they joined after it): kept
    out of the plan, and the deployment not recorded (:mod:`tuner.model.unseen`)."""


@dataclass(frozen=True)
class Ports:
    """The effects a cycle may have."""

    observer: WindowObserver
    actuator: Actuator
    knowledge: KnowledgeBase
    safeguards: Safeguards = field(default_factory=MemorySafeguards)
    history: LoadHistory | None = None
    reserve: ReserveKeeper | None = None
    """Where the room ahead of a forecast rise is held (None: nothing is held)."""


def run_cycle(
    now: float,
    state: CycleState,
    settings: Settings,
    ports: Ports,
    rng: random.Random,
    *,
    dry_run: bool = False,
) -> tuple[CycleReport, CycleState]:
    """Run one cycle at time ``now``; its report carries the forecast made at ``now`` and the
    reserve it asks for (held between cycles too: :func:`hold_reserve`)."""
    forecast, why = forecast_at(ports.history, settings, now)
    actuator, keeper = ports.actuator, ports.reserve
    ahead = reserve_forecast(ports.history, settings, now, forecast)
    reserve, held = reserve_at(now, settings, ahead, actuator, keeper, dry_run=dry_run)
    report, state = _cycle(now, state, settings, ports, rng, forecast, dry_run=dry_run)
    report = replace(report, forecast=forecast, no_forecast=why, reserve=reserve, reserved=held)
    return report, state


def hold_reserve(
    now: float, settings: Settings, ports: Ports
) -> tuple[Reserve | None, ReserveOutcome | None]:
    """Between cycles (every ``windows.retry_s``, as the moderator runs it): the reserve the
    forecast made at ``now`` asks for, held by the keeper; (None, None) without a keeper or
    with reserving off. A reserve looks a node's start-up plus one retry ahead
    (:meth:`~tuner.settings.ForecastSettings.lead`), so it is held that often whatever the
    cycle's own cadence (a full window after a change)."""
    if ports.reserve is None or settings.forecast.reserve_max_nodes <= 0:
        return None, None
    forecast = reserve_forecast(ports.history, settings, now, None)
    return reserve_at(now, settings, forecast, ports.actuator, ports.reserve, dry_run=False)


def _cycle(
    now: float,
    state: CycleState,
    settings: Settings,
    ports: Ports,
    rng: random.Random,
    forecast: Forecast | None,
    *,
    dry_run: bool = False,
) -> tuple[CycleReport, CycleState]:
    """One cycle at time ``now`` with the forecast made at ``now`` (None: none)."""
    windows = settings.windows
    if not dry_run:
        state = state.keep(ports.actuator.reclaim_unremoved(now), now)
    paused = paused_by(ports.safeguards)
    wait = state.stable_since + windows.measure_s - now
    opening = window_start(settings, decided_by(forecast, settings), now, state.stable_since)
    if opening is None:
        reason = f"a full window has not passed since the last change ({wait:.0f} s to go)"
        report = CycleReport(Outcome.WAITING, state.stable_since, now, reason, wait)
        return replace(report, paused=paused), state
    start, whole = opening
    window = ports.observer.observe(start, now)
    acting = Acting.of(
        window, decided_by(forecast, settings), whole, windows.release_on_decline, state.own
    )
    cluster = ports.actuator.read() if acting.actionable else None
    acting = acting.read(cluster) if cluster else acting
    late = unseen(window, cluster, Keys(settings.execute.label_prefix)) if cluster else Unseen()
    if cluster is None or window.load is None or not acting.actionable or late.blocker:
        retry = windows.retry_s if whole else min(wait, windows.retry_s)
        report = CycleReport(
            Outcome(acting.outcome), start, now, late.blocker or acting.reason, retry, window
        )
        return replace(report, paused=paused, decline=acting.release), state
    load = window.load
    history = entries_for(ports.knowledge, cluster, settings, expected_load(load, forecast))
    budget, unbudgeted = budget_left(settings, ports.safeguards, now)
    analysis = analyse(
        cluster,
        acting.settled(settings),
        history,
        rng,
        state.timers,
        now,
        frozenset(n for n, _ in state.kept),
        unsettled_nodes=acting.unsettled_nodes | late.nodes,
        unsettled_workloads=acting.unsettled_workloads,
        budget=budget,
        forecast=forecast,
    )
    recorded = None
    if not dry_run and acting.records and not late.nodes and start >= state.recorded_to:
        execution = execution_of(cluster, analysis.movability, settings.pricing, load, start, now)
        recorded = record(ports.knowledge, execution, state.awaiting)
        state = replace(state, awaiting=None, recorded_to=now)
    state = replace(state, timers=analysis.timers or state.timers)
    plan = build_report(cluster, settings, analysis)
    # After staying on a window that was not stable as a whole, slide on as after an unstable
    # one: the next whole-stable window (the one a deployment is recorded after) comes sooner.
    base = CycleReport(
        Outcome.STAYED,
        start,
        now,
        analysis.reason,
        _next_after_staying(settings, acting, analysis, now),
        window,
        load,
        plan,
        recorded=recorded,
        paused=paused,
        cluster=cluster,
        decline=acting.release,
        unobserved=late.nodes,
    )
    if not dry_run:
        for forget in analysis.forget:
            forget_entry(ports.knowledge, forget.entry, f"{forget.kind}: {forget.reason}")
    if not plan.actions:
        if analysis.limited is None:
            return base, state
        return replace(base, outcome=Outcome.HELD, hold=analysis.limited), state
    limit = settings.execute.max_actions_per_cycle
    if len(plan.actions) > limit:
        reason = (
            f"{analysis.reason}; not done: {len(plan.actions)} actions exceed "
            f"max_actions_per_cycle {limit}"
        )
        return replace(base, outcome=Outcome.SKIPPED, reason=reason), state
    hold = paused or unbudgeted or closed_by(settings, now)
    if hold is not None:
        reason = f"{analysis.reason}; not done: {hold}"
        return replace(base, outcome=Outcome.HELD, reason=reason, hold=hold), state
    held = analysis.holds
    if held and not dry_run:
        forget_entry(ports.knowledge, held, "chosen: it returns when the next window is stable")
        state = replace(state, awaiting=held)
    if dry_run:
        result = ports.actuator.check(plan.actions)
        return replace(base, outcome=Outcome.PLANNED, result=result), state
    report, state = _transition(now, state, settings, ports, plan, base)
    if acting.released and report.result is not None:  # a decline: look again sooner
        report = replace(report, next_in=windows.warmup_s + decline_settle_s(settings))
    return report, state


def _next_after_staying(
    settings: Settings, acting: Acting, analysis: Analysis, now: float
) -> float:
    """When to look again after staying: a whole window later after a window stable as a
    whole (the next one a deployment is recorded after) but not released (during a released
    decline the HPAs are about to shrink the workloads), else the retry window later (during a
    released decline ``windows.decline_retry_s`` later) — but no later than the first removal
    candidate still waiting passes its delay (at least that retry later)."""
    windows = settings.windows
    retry = decline_retry_s(settings) if acting.released else windows.retry_s
    wait = windows.measure_s if acting.records and not acting.released else retry
    delay = acting.settled(settings).analyse.candidate_delay_s
    since = analysis.timers.since if analysis.timers else ()
    ripening = [t + delay - now for _, t in since if t + delay > now]
    return min(wait, max(min(ripening), retry)) if ripening else wait


def _transition(
    now: float,
    state: CycleState,
    settings: Settings,
    ports: Ports,
    plan: PlanReport,
    base: CycleReport,
) -> tuple[CycleReport, CycleState]:
    """Carry out a planned change, its evictions in the ledger before and after."""
    windows = settings.windows
    try:
        ports.safeguards.begin(evictions(plan.actions))
    except ServiceError as err:
        hold = f"the eviction ledger was not written: {err}"
        return replace(
            base, outcome=Outcome.HELD, reason=f"{base.reason}; not done: {hold}", hold=hold
        ), state
    result = ports.actuator.carry_out(plan.actions)
    settle(ports.safeguards, plan.actions, len(result.done) + (0 if result.completed else 1))
    stable = now + result.took_s + windows.warmup_s
    own = own_change(base.cluster, result, now, stable) if base.cluster else None
    state = replace(state, stable_since=stable, own=own)
    changed = replace(base, result=result, next_in=windows.warmup_s + windows.measure_s)
    if not result.completed:
        done = f"{len(result.done)} of {len(plan.actions)}"
        reason = f"{base.reason}; stopped after {done} actions: {result.reason}"
        return replace(changed, outcome=Outcome.FAILED, reason=reason), state
    return replace(changed, outcome=Outcome.ACTED), state
