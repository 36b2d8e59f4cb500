"""Run a scenario under every strategy on the same load and compare them.

Per strategy: node-hours, cost, savings against the Cluster Autoscaler alone, gap to the lower
bound, pending-pod-seconds (pods waiting for a node), seconds over 100 % CPU demand
(workload-seconds in which an HPA-scaled workload's CPU demand exceeded the requests of its ready
pods), how many of the windows a tuner checked were stable (it acts on no other), and the actions
taken (failed = verification failed, transition stopped).

Evictions per hour count every pod any actor evicted (the Cluster Autoscaler's drains and node
deletions, the tuner's executor, a descheduler, Karpenter) over the simulated hours.

The lower bound (:mod:`tuner.sim.bound`), per tick, is the cheapest mix of *whole* nodes of the
scenario's pool node types (at least each pool's minimum) whose allocatable, minus each node's
DaemonSet pods, covers the CA-alone run's non-DaemonSet CPU requests, memory requests and pod
count. It ignores placement rules, how pods split across nodes and provisioning time, so no
strategy can go below it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tuner.sim.bound import Mix, WholeBound
from tuner.sim.command import STRATEGY_NAMES
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.metrics import ActionCounts, TickSeries
from tuner.sim.strategies import LABELS, STRATEGIES

ORDER = STRATEGY_NAMES
"""Strategies in table order: the CA alone, its peers, then the tuners."""
BASELINE = "autoscaler"


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

    @property
    def lower_bound_cost(self) -> float:
        """Total cost of the lower bound."""
        tick = self.outcomes[0].tick
        return sum(self.lower_bound) * tick / 3600

    @property
    def lower_bound_node_hours(self) -> float:
        """Node-hours of the lower bound."""
        return sum(self.lower_bound_nodes) * self.outcomes[0].tick / 3600

    def outcome(self, strategy: str) -> StrategyRun:
        """The outcome of one strategy."""
        return next(o for o in self.outcomes if o.strategy == strategy)

    def savings(self, strategy: str) -> float:
        """Fraction of the CA-alone cost saved."""
        base = self.outcome(BASELINE).cost
        return (base - self.outcome(strategy).cost) / base if base else 0.0

    def gap(self, strategy: str) -> float:
        """Fraction above the lower bound."""
        bound = self.lower_bound_cost
        return (self.outcome(strategy).cost - bound) / bound if bound else 0.0


def lower_bound(scenario: Scenario, series: TickSeries) -> tuple[Mix, ...]:
    """The cheapest mix of whole nodes holding each tick's requests."""
    bound = WholeBound(scenario.pools, scenario.daemonsets)
    return tuple(
        bound(cpu, memory, pods)
        for cpu, memory, pods in zip(series.cpu, series.memory, series.pods, strict=True)
    )


def run(
    scenario: Scenario,
    strategy: str,
    seed: int,
    progress: Callable[[float], object] | None = None,
) -> StrategyRun:
    """Simulate the scenario with one strategy."""
    sim = Simulation(scenario, seed, STRATEGIES[strategy](scenario, seed))
    total = scenario.warmup + scenario.duration
    step = 600.0
    done = 0.0
    while done < total - 1e-9:
        chunk = min(step, total - done)
        sim.advance(chunk)
        done += chunk
        if progress is not None:
            progress(chunk)
    decisions = dict(getattr(sim.strategy, "decisions", {}))
    windows = (getattr(sim.strategy, "stable_windows", 0), getattr(sim.strategy, "windows", 0))
    return StrategyRun(strategy, sim.series, sim.tick, sim.actions, decisions, windows)


def with_baseline(strategies: Sequence[str]) -> list[str]:
    """The strategies to run: the CA alone first, then the others in their order."""
    return [BASELINE, *(s for s in strategies if s != BASELINE)]


def comparison(scenario: Scenario, seed: int, outcomes: tuple[StrategyRun, ...]) -> Comparison:
    """The outcomes (the CA alone's first) and the lower bound from the CA alone's run."""
    bound = lower_bound(scenario, outcomes[0].series)
    return Comparison(
        scenario, seed, outcomes, tuple(m.cost for m in bound), tuple(m.nodes for m in bound)
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
        )
        if n
    ]
    return ", ".join(parts)


def table(comparison: Comparison) -> str:
    """The comparison as a Markdown table."""
    currency = comparison.scenario.currency
    rows = [
        "| strategy | node-hours | cost | savings vs CA | gap to lower bound "
        "| evictions/h | pending pod-s | s over 100 % CPU | actionable windows | actions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for outcome in comparison.outcomes:
        name = outcome.strategy
        savings = "—" if name == BASELINE else f"{comparison.savings(name) * 100:+.1f} %"
        stable, checked = outcome.windows
        windows = f"{stable} of {checked}" if checked else "—"
        rows.append(
            f"| {LABELS[name]} | {outcome.node_hours:.2f} | {outcome.cost:.3f} {currency} "
            f"| {savings} | {comparison.gap(name) * 100:+.1f} % "
            f"| {outcome.evictions_per_hour:.1f} | {outcome.pending_pod_seconds:.0f} "
            f"| {outcome.short_seconds:.0f} "
            f"| {windows} | {_actions(outcome.actions)} |"
        )
    base = comparison.outcome(BASELINE).cost
    saved = f"{(1 - comparison.lower_bound_cost / base) * 100:+.1f} %" if base else "—"
    rows.append(
        f"| lower bound | {comparison.lower_bound_node_hours:.2f} "
        f"| {comparison.lower_bound_cost:.3f} {currency} "
        f"| {saved} | — | — | — | — | — | — |"
    )
    return "\n".join(rows)
