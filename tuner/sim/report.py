"""Run a scenario under every strategy on the same load and compare them.

Per strategy: node-hours, cost, savings against the Cluster Autoscaler alone, gap to the lower
bound, pending-pod-seconds (pods waiting for a node), seconds over 100 % CPU demand
(workload-seconds in which an HPA-scaled workload's CPU demand exceeded the requests of its ready
pods), how many of the windows a tuner checked were stable (it acts on no other), and the actions
taken (failed = verification failed, transition stopped; landed elsewhere = verified, its pod
Ready off its source and the nodes being emptied but not on its target).

The room on a scenario is how far CA alone's cost is above the lower bound, as a share of CA
alone's cost; a strategy captures ``(CA alone - its cost) / (CA alone - bound)`` of it (not shown
where the room is under :data:`ROOM_MIN`: a few percent are the last node's rounding). The
forecast error of a tuner's row (:mod:`tuner.sim.forecast_error`) is that of the forecast its
settings make each cycle: MAPE of the expected peak, and how often the real peak was above the
band.

Evictions per hour count every pod any actor evicted (the Cluster Autoscaler's drains and node
deletions, the tuner's executor, a descheduler, Karpenter) over the simulated hours.

The lower bound (:mod:`tuner.sim.bound`), per tick, is the rule bound: the cheapest set of whole
nodes of the scenario's pools (within each pool's minimum and maximum) on which the CA-alone
run's non-DaemonSet pods could all run under the rules the simulated scheduler enforces: room
(CPU, memory, pod slots beside the DaemonSets), pods on ready nodes only, hard zone spreads and
required anti-affinities among a service's pods. It ignores how pods split across nodes and
provisioning time, so no strategy whose placement keeps the rules can go below it. The
whole-node bound (the same without the rules and the maximums) is kept beside it in
``results.json`` to show what the rules add.

The pinned bound (:mod:`tuner.sim.bound`) is the rule bound with the nodes that hold pinned pods
(StatefulSet pods, ``kube-system`` pods no PodDisruptionBudget covers: no safe strategy moves
them) kept while those pods stay in the CA-alone run. The **safe room** is how far CA alone is
above it, and a row captures ``(CA alone - its cost) / (CA alone - pinned bound)`` of it. It
bounds the rows that start with the pinned pods where CA alone has them and move none
(:meth:`Comparison.keeps_pinned`); another row (Karpenter, a MostAllocated scheduler, a Cluster
Autoscaler that drains a StatefulSet pod) can take more than all of it.

The no-wait bound is what a run in which no pod ever waits for a node must pay: at each tick,
the highest rule bound from that tick to a node's provisioning delay after it
(:func:`highest_ahead`). *Why*: a node ready at a tick ``t'`` within the delay after ``t`` was
created at ``t' - delay`` or before, so by ``t``, and it still exists at ``t'``, so it is billed
at ``t``; a run whose pods at ``t'`` all run holds them on nodes ready then, which cost at least
the rule bound of ``t'``; so its nodes billed at ``t`` cost at least every such bound. Every node
the simulated autoscalers add (the Cluster Autoscaler's, Karpenter's, those a tuner's
placeholders bring) takes the scenario's provisioning delay. It bounds no run that keeps a pod
pending (CA alone's included), so it shows how much of the room is bought with waiting pods,
not a target's reach.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tuner.sim.bound import Mix, RuleBound
from tuner.sim.command import STRATEGY_NAMES
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.forecast_error import ForecastError, ForecastKey, forecast_key
from tuner.sim.metrics import ActionCounts, TickSeries
from tuner.sim.room_ledger import Ledger, LedgerRecorder, RoomTrace, room_ledger
from tuner.sim.strategies import LABELS, STRATEGIES
from tuner.sim.strategies.tuner import ProjectTuner
from tuner.sim.strategy import Tally

ORDER = STRATEGY_NAMES
"""Strategies in table order: the CA alone, its peers, then the tuners."""
BASELINE = "autoscaler"
ROOM_MIN = 0.03
"""The least room (share of CA alone's cost above the lower bound) a capture is reported for
(issue 25's rule: targets hold where CA alone is at least 3 % above the bound)."""


@dataclass(frozen=True)
class StrategyRun:
    """One strategy's run."""

    strategy: str
    series: TickSeries
    tick: float
    actions: ActionCounts
    decisions: dict[str, int]
    windows: tuple[int, int] = (0, 0)
    """(stable, checked) windows of a tuner; (0, 0) for the autoscaler alone."""
    trace: RoomTrace | None = None
    """What the room ledger recorded of a tuner's run (None: not asked for, or not a tuner)."""

    @property
    def node_hours(self) -> float:
        """Sum of billed nodes over time."""
        return sum(self.series.nodes) * self.tick / 3600

    @property
    def cost(self) -> float:
        """Total cost over the run."""
        return sum(self.series.cost) * self.tick / 3600

    @property
    def pending_pod_seconds(self) -> float:
        """Pod-seconds spent pending."""
        return sum(self.series.pending) * self.tick

    @property
    def evictions_per_hour(self) -> float:
        """Pods evicted per simulated hour, by any actor."""
        hours = len(self.series.time) * self.tick / 3600
        return sum(self.series.evictions) / hours if hours else 0.0

    @property
    def short_seconds(self) -> float:
        """Workload-seconds with CPU demand over 100 % of the ready pods' requests."""
        return sum(self.series.short) * self.tick


@dataclass(frozen=True)
class Comparison:
    """Every strategy's outcome on one scenario, and the lower bound."""

    scenario: Scenario
    seed: int
    outcomes: tuple[StrategyRun, ...]
    lower_bound: tuple[float, ...]
    """Cost per hour of the lower bound at each tick."""
    lower_bound_nodes: tuple[int, ...] = ()
    """Nodes of the lower bound at each tick."""
    forecast_errors: Mapping[str, ForecastError] = field(default_factory=dict)
    """The error of the forecast each tuner's row makes (strategies that forecast only)."""
    whole_bound: tuple[float, ...] = ()
    """Cost per hour of the whole-node bound at each tick (the rules not counted)."""
    lower_bound_pools: tuple[tuple[int, ...], ...] = ()
    """Nodes of the lower bound per pool (in the scenario's order) at each tick."""
    pinned_bound: tuple[float, ...] = ()
    """Cost per hour of the pinned bound at each tick."""
    pinned_bound_nodes: tuple[int, ...] = ()
    """Nodes of the pinned bound at each tick."""

    def _over_time(self, per_tick: Sequence[float]) -> float:
        """A per-tick series summed over the run, in hours of it."""
        return sum(per_tick) * self.outcomes[0].tick / 3600

    @property
    def lower_bound_cost(self) -> float:
        """Total cost of the lower bound."""
        return self._over_time(self.lower_bound)

    @property
    def whole_bound_cost(self) -> float:
        """Total cost of the whole-node bound."""
        return self._over_time(self.whole_bound)

    @property
    def lower_bound_node_hours(self) -> float:
        """Node-hours of the lower bound."""
        return self._over_time(self.lower_bound_nodes)

    @property
    def no_wait_bound(self) -> tuple[float, ...]:
        """Cost per hour of the no-wait bound at each tick."""
        delay = self.scenario.autoscaler.provisioning_delay
        return highest_ahead(self.lower_bound, int(delay // self.outcomes[0].tick))

    @property
    def no_wait_bound_cost(self) -> float:
        """Total cost of the no-wait bound."""
        return self._over_time(self.no_wait_bound)

    @property
    def no_wait_room(self) -> float:
        """How far CA alone's cost is above the no-wait bound, as a share of CA alone's cost
        (negative: CA alone, which keeps pods pending, costs less than any run that does not)."""
        return self._room(self.no_wait_bound_cost)

    @property
    def pinned_bound_cost(self) -> float:
        """Total cost of the pinned bound."""
        return self._over_time(self.pinned_bound)

    @property
    def pinned_bound_node_hours(self) -> float:
        """Node-hours of the pinned bound."""
        return self._over_time(self.pinned_bound_nodes)

    def outcome(self, strategy: str) -> StrategyRun:
        """The outcome of one strategy."""
        return next(o for o in self.outcomes if o.strategy == strategy)

    def savings(self, strategy: str) -> float:
        """Fraction of the CA-alone cost saved."""
        base = self.outcome(BASELINE).cost
        return (base - self.outcome(strategy).cost) / base if base else 0.0

    @property
    def room(self) -> float:
        """How far CA alone's cost is above the lower bound, as a share of CA alone's cost."""
        return self._room(self.lower_bound_cost)

    @property
    def safe_room(self) -> float:
        """How far CA alone's cost is above the pinned bound, as a share of CA alone's cost."""
        return self._room(self.pinned_bound_cost)

    def captured(self, strategy: str) -> float | None:
        """The share of the room the strategy's saving takes (None: under :data:`ROOM_MIN`)."""
        return self._captured(strategy, self.lower_bound_cost)

    def safe_captured(self, strategy: str) -> float | None:
        """The share of the safe room the strategy's saving takes (None: under
        :data:`ROOM_MIN`)."""
        return self._captured(strategy, self.pinned_bound_cost)

    def keeps_pinned(self, strategy: str) -> bool:
        """Whether the row's run started with its pinned pods where CA alone's has them and
        moved none: the pinned bound bounds it."""
        series, base = self.outcome(strategy).series, self.outcome(BASELINE).series
        return series.pinned_start == base.pinned_start and series.pinned_lost == 0

    def _room(self, bound: float) -> float:
        base = self.outcome(BASELINE).cost
        return (base - bound) / base if base else 0.0

    def _captured(self, strategy: str, bound: float) -> float | None:
        if self._room(bound) < ROOM_MIN:
            return None
        base = self.outcome(BASELINE).cost
        return (base - self.outcome(strategy).cost) / (base - bound)

    def ledger(self, strategy: str) -> Ledger:
        """The room ledger of a tuner's row run with ``ledger`` (:mod:`tuner.sim.room_ledger`)."""
        outcome = self.outcome(strategy)
        if outcome.trace is None:
            raise ValueError(f"{strategy} was not run with the room ledger")
        return room_ledger(
            strategy,
            outcome.trace,
            outcome.series.cost,
            self.outcome(BASELINE).cost,
            zip(self.lower_bound, self.lower_bound_pools, strict=True),
            ((p.name, p.node_type.price, p.node_type.name) for p in self.scenario.pools),
            outcome.tick,
            (self.scenario.name, self.scenario.currency),
        )

    def gap(self, strategy: str) -> float:
        """Fraction above the lower bound."""
        bound = self.lower_bound_cost
        return (self.outcome(strategy).cost - bound) / bound if bound else 0.0


def highest_ahead(per_tick: Sequence[float], span: int) -> tuple[float, ...]:
    """Per tick, the highest value from it to ``span`` ticks after it (the series' end cuts the
    last spans short)."""
    return tuple(max(per_tick[i : i + span + 1]) for i in range(len(per_tick)))


class Bounds(NamedTuple):
    """The lower bounds of one tick."""

    rule: Mix
    whole: Mix
    pinned: Mix


def lower_bound(scenario: Scenario, series: TickSeries) -> tuple[Bounds, ...]:
    """The rule bound, the whole-node bound and the pinned bound holding each tick's pods."""
    bound = RuleBound(scenario.pools, scenario.daemonsets, scenario.services)
    return tuple(
        Bounds(
            bound(cpu, memory, pods, counts),
            bound.whole(cpu, memory, pods),
            bound(cpu, memory, pods, counts, held),
        )
        for cpu, memory, pods, counts, held in zip(
            series.cpu, series.memory, series.pods, series.ruled, series.pinned, strict=True
        )
    )


def run(
    scenario: Scenario,
    strategy: str,
    seed: int,
    progress: Callable[[float], object] | None = None,
    ledger: bool = False,
    strategy_from: float = 0.0,
) -> StrategyRun:
    """Simulate the scenario with one strategy, its first turn at ``strategy_from`` (0: the
    warm-up's end; later: the phase spread, :mod:`tuner.sim.phases`); with ``ledger``, a
    tuner's run is recorded for the room ledger (:mod:`tuner.sim.room_ledger`)."""
    sim = Simulation(
        scenario, seed, STRATEGIES[strategy](scenario, seed), strategy_from=strategy_from
    )
    tuner = sim.strategy
    recorder = LedgerRecorder(sim, tuner) if ledger and isinstance(tuner, ProjectTuner) else None
    total = scenario.warmup + scenario.duration
    step = 600.0
    done = 0.0
    while done < total - 1e-9:
        chunk = min(step, total - done)
        sim.advance(chunk)
        done += chunk
        if progress is not None:
            progress(chunk)
    tally = Tally() if sim.strategy is None else sim.strategy.tally()
    decisions = dict(tally.decisions)
    windows = (tally.stable_windows, tally.windows)
    trace = None if recorder is None else recorder.trace
    return StrategyRun(strategy, sim.series, sim.tick, sim.actions, decisions, windows, trace)


def with_baseline(strategies: Sequence[str]) -> list[str]:
    """The strategies to run: the CA alone first, then the others in their order."""
    return [BASELINE, *(s for s in strategies if s != BASELINE)]


def forecast_keys(
    scenario: Scenario, seed: int, strategies: Sequence[str]
) -> dict[str, ForecastKey]:
    """The forecast each tuner among ``strategies`` makes with its settings on ``scenario``."""
    keys: dict[str, ForecastKey] = {}
    for name in strategies:
        strategy = STRATEGIES[name](scenario, seed)
        key = forecast_key(strategy.settings) if isinstance(strategy, ProjectTuner) else None
        if key is not None:
            keys[name] = key
    return keys


def comparison(
    scenario: Scenario,
    seed: int,
    outcomes: tuple[StrategyRun, ...],
    forecast_errors: Mapping[str, ForecastError] | None = None,
) -> Comparison:
    """The outcomes (the CA alone's first), the lower bound from the CA alone's run and the
    tuners' forecast errors."""
    bounds = lower_bound(scenario, outcomes[0].series)
    return Comparison(
        scenario,
        seed,
        outcomes,
        tuple(b.rule.cost for b in bounds),
        tuple(b.rule.nodes for b in bounds),
        dict(forecast_errors or {}),
        tuple(b.whole.cost for b in bounds),
        tuple(b.rule.pools for b in bounds),
        tuple(b.pinned.cost for b in bounds),
        tuple(b.pinned.nodes for b in bounds),
    )


def _actions(counts: ActionCounts) -> str:
    if counts.total == 0:
        return "0"
    parts = [
        f"{n} {label}"
        for n, label in (
            (counts.migrate, "migrate"),
            (counts.add, "add"),
            (counts.remove, "remove"),
            (counts.remove_node, "remove_node"),
            (counts.provision_node, "provision_node"),
            (counts.failed, "failed"),
            (counts.landed_elsewhere, "landed elsewhere"),
        )
        if n
    ]
    return ", ".join(parts)


def _forecast(error: ForecastError | None) -> str:
    """MAPE of the expected peak and the share of real peaks above the band."""
    if error is None or math.isnan(error.mape):
        return "—"
    return f"{error.mape * 100:.1f} %, {error.above * 100:.0f} %"


def table(comparison: Comparison) -> str:
    """The comparison as a Markdown table."""
    currency = comparison.scenario.currency
    rows = [
        "| strategy | node-hours | cost | savings vs CA | room captured | safe room captured "
        "| gap to lower bound | evictions/h | pending pod-s | s over 100 % CPU "
        "| actionable windows | forecast error: MAPE, above band | actions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for outcome in comparison.outcomes:
        name = outcome.strategy
        savings = "—" if name == BASELINE else f"{comparison.savings(name) * 100:+.1f} %"
        captured, safe = (
            "—" if share is None or name == BASELINE else f"{share * 100:.0f} %"
            for share in (comparison.captured(name), comparison.safe_captured(name))
        )
        stable, checked = outcome.windows
        windows = f"{stable} of {checked}" if checked else "—"
        rows.append(
            f"| {LABELS[name]} | {outcome.node_hours:.2f} | {outcome.cost:.3f} {currency} "
            f"| {savings} | {captured} | {safe} | {comparison.gap(name) * 100:+.1f} % "
            f"| {outcome.evictions_per_hour:.1f} | {outcome.pending_pod_seconds:.0f} "
            f"| {outcome.short_seconds:.0f} "
            f"| {windows} | {_forecast(comparison.forecast_errors.get(name))} "
            f"| {_actions(outcome.actions)} |"
        )
    base = comparison.outcome(BASELINE).cost
    for label, node_hours, cost, room in (
        (
            "lower bound",
            comparison.lower_bound_node_hours,
            comparison.lower_bound_cost,
            comparison.room,
        ),
        (
            "pinned bound",
            comparison.pinned_bound_node_hours,
            comparison.pinned_bound_cost,
            comparison.safe_room,
        ),
        ("no-wait bound", None, comparison.no_wait_bound_cost, comparison.no_wait_room),
    ):
        saved = f"{room * 100:+.1f} %" if base else "—"
        hours = "—" if node_hours is None else f"{node_hours:.2f}"
        rows.append(
            f"| {label} | {hours} | {cost:.3f} {currency} "
            f"| {saved} | — | — | — | — | — | — | — | — | — |"
        )
    return "\n".join(rows)
