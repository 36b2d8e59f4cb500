"""This project's tuner in the simulator: the daemon's own cycle (``tuner.cycle.run_cycle``: the
real monitor verdict rules, knowledge-base bookkeeping, ``tuner.analyse`` and ``tuner.plan``) over
the simulation's ports (``tuner.sim.ports``), with an in-memory knowledge base.

Settings: the headline ``tuner`` row (:func:`simulation_settings`) runs the daemon's defaults —
no cluster thresholds, a removal or a replacement must leave room for the upper band of the
load forecast (``analyse.headroom: forecast``), and during a falling load the forecast agrees
with the workloads the HPAs shrink count as settled (``windows.release_on_decline``) — plus
``execute.node_removal: command``: a drained node is deleted at once through the provider's
API (a managed instance group's ``delete-instances``, an auto scaling group's
``terminate-instance-in-auto-scaling-group --should-decrement-desired-capacity``, a Cluster API
machine annotation, a Karpenter NodeClaim delete), as docs/operating.md tells an operator to set,
modelled by the simulator's ``drain_node``. :func:`unlimited_settings` are the same defaults with
emptied nodes left cordoned to the autoscaler (the default ``execute.node_removal``), which
deletes them after its own unneeded time. The tuner as first raced (85 % CPU and memory
request thresholds, nodes left to the autoscaler) is no longer a row: it captured none of the
room on six of the eight scenarios (issue 25's table). All: the scenario's node price table;
up to two nodes per plan; candidates must stay candidates for 10 minutes; a 10-minute window
re-checked every minute; no exploration. Each cycle forecasts the load from what the simulation
served up to then (:mod:`tuner.sim.history`; a node's start-up is the Cluster Autoscaler model's
provisioning delay). The scenario's node pools, with their minimum and maximum size and a
template from their node type (for a pool with no node now), are the ``pools`` settings: nodes
are found in them by the pool label the simulated provider sets.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from knowledge.memory import MemoryKnowledge
from tuner.cycle import CycleReport, CycleState, Ports, hold_reserve, run_cycle
from tuner.holds import MemorySafeguards
from tuner.model.cluster import INSTANCE_TYPE_LABELS
from tuner.model.constraints import ZONE_KEY
from tuner.model.conventions import POOL_LABEL_BY_SYSTEM
from tuner.settings import (
    Analyse,
    Execute,
    ForecastSettings,
    LoadSettings,
    PoolSettings,
    PoolTemplate,
    Settings,
    Windows,
)
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.history import SimLoadHistory
from tuner.sim.karpenter import Karpenter
from tuner.sim.pools import pricing
from tuner.sim.ports import SimActuator, SimObserver
from tuner.sim.reserve import SimReserveKeeper
from tuner.sim.strategies.binpacking import BinPacking
from tuner.sim.strategies.karpenter import KarpenterStrategy
from tuner.sim.strategy import Strategy, Tally


def unlimited_settings(scenario: Scenario, seed: int) -> Settings:
    """The daemon's defaults in the simulator: no thresholds, headroom for the forecast's upper
    band, the decline rule; emptied nodes left cordoned to the autoscaler (the default
    ``execute.node_removal``); the scenario's prices and pools, up to two nodes per plan, a
    10-minute window re-checked every minute (every half minute during a released decline), no
    exploration."""
    return Settings(
        pricing=pricing(scenario.pools),
        analyse=Analyse(
            max_parallel_removals=2,
            candidate_delay_s=600.0,
            migration_chance=0.0,
            seed=seed,
        ),
        load=LoadSettings(delta=0.1),
        windows=Windows(measure_s=600.0, retry_s=60.0),
        execute=Execute(node_removal="autoscaler"),
        pools=pool_settings(scenario),
        forecast=ForecastSettings(node_startup_s=scenario.autoscaler.provisioning_delay),
    )


def simulation_settings(scenario: Scenario, seed: int) -> Settings:
    """The headline row's settings: the daemon's defaults (:func:`unlimited_settings`) with
    ``execute.node_removal: command``, a drained node deleted at once through the provider's
    API, as docs/operating.md tells an operator to set."""
    settings = unlimited_settings(scenario, seed)
    return replace(settings, execute=replace(settings.execute, node_removal="command"))


def reserve_settings(scenario: Scenario, seed: int) -> Settings:
    """The headline row's settings with provisioning ahead of a forecast rise (placeholders for
    up to three nodes, ``forecast.reserve_max_nodes: 3``; the daemon's default is off)."""
    settings = simulation_settings(scenario, seed)
    return replace(settings, forecast=replace(settings.forecast, reserve_max_nodes=3))


def pool_settings(scenario: Scenario) -> dict[str, PoolSettings]:
    """The scenario's pools as the tuner's ``pools`` settings."""
    label = POOL_LABEL_BY_SYSTEM.get(scenario.system)
    pools: dict[str, PoolSettings] = {}
    for pool in scenario.pools:
        kind = pool.node_type
        labels = {INSTANCE_TYPE_LABELS[0]: kind.name, **({label: pool.name} if label else {})}
        if pool.zone:
            labels[ZONE_KEY] = pool.zone
        template = PoolTemplate(
            kind.name,
            kind.allocatable.cpu,
            kind.allocatable.memory,
            kind.max_pods,
            tuple(sorted(labels.items())),
        )
        selector = ((label, pool.name),) if label else ()
        pools[pool.name] = PoolSettings(pool.min_nodes, pool.max_nodes, selector, template)
    return pools


class ProjectTuner(Strategy):
    """The daemon's cycle, run whenever the previous one said the next is due."""

    name = "tuner"

    def __init__(self, scenario: Scenario, seed: int, settings: Settings | None = None) -> None:
        self.settings = settings or simulation_settings(scenario, seed)
        self.rng = random.Random(seed)
        self.knowledge = MemoryKnowledge()
        self.state = CycleState()
        self.next_check = -math.inf
        self.next_take_back = -math.inf
        self.windows = 0
        """Windows the monitor judged."""
        self.stable_windows = 0
        self.decisions: Counter[str] = Counter()
        """The decisions taken, and what held the tuner back: removal's refusals by kind, the
        windows not acted on by outcome, the decline rule's answers by kind."""
        self.safeguards = MemorySafeguards()
        """The eviction ledger and the pause switch (on the simulation's clock once it runs)."""
        self._ports: Ports | None = None
        self.history: SimLoadHistory | None = None
        """The tuner's load source (once the simulation runs)."""
        self.forecasts = 0
        """Cycles that forecast the load."""
        self.watchers: list[Callable[[float, CycleReport], None]] = []
        """Called with each cycle's time and report (the room ledger's,
        :mod:`tuner.sim.room_ledger`)."""

    def removal(self) -> str:
        """How the simulation removes a node the daemon drained (``drain_node``'s mode):
        ``execute.node_removal`` as it is."""
        return self.settings.execute.node_removal

    def load_history(self, sim: Simulation) -> SimLoadHistory:
        """The tuner's load source: what the simulation served up to its now."""
        options = self.settings.forecast
        return SimLoadHistory(sim.scenario, lambda: sim.now, options.step_s, options.lookback_s)

    def tally(self) -> Tally:
        """Decisions by kind (and the counters beside them), windows stable and judged."""
        return Tally(self.decisions, self.stable_windows, self.windows)

    def on_tick(self, sim: Simulation) -> None:
        """Take back needed nodes and hold the reserve every ``windows.retry_s`` (as the
        moderator does); run a cycle when one is due."""
        if self._ports is None:
            execute = self.settings.execute
            actuator = SimActuator(
                sim, self.removal(), execute.max_moves_at_once, execute.surge_lone_pods
            )
            observer = SimObserver(sim, self.settings.windows)
            self.safeguards.clock = lambda: sim.now
            self.history = self.load_history(sim)
            self._ports = Ports(
                observer,
                actuator,
                self.knowledge,
                self.safeguards,
                self.history,
                SimReserveKeeper(sim, self.settings, self.removal()),
            )
        if sim.now >= self.next_take_back:  # as the moderator's jobs between cycles
            self.next_take_back = sim.now + self.settings.windows.retry_s
            self._ports.actuator.take_back_needed(sim.now)
            if sim.now < self.next_check:
                hold_reserve(sim.now, self.settings, self._ports)
        if sim.now < self.next_check:
            return
        report, self.state = run_cycle(sim.now, self.state, self.settings, self._ports, self.rng)
        for watch in self.watchers:
            watch(sim.now, report)
        if report.window is not None:
            self.windows += 1
            self.stable_windows += report.window.actionable
        if report.plan is not None:
            self.decisions[report.plan.analysis.decision.value] += 1
            removal = report.plan.analysis.proposals[0].refusal
            if removal is not None:  # why no node could go
                self.decisions[f"removal refused: {removal.name.lower()}"] += 1
        elif report.window is not None:  # why the window was not acted on
            self.decisions[f"window: {report.outcome.value}"] += 1
        self.forecasts += report.forecast is not None
        if report.decline is not None:  # the decline rule's answer
            self.decisions[f"decline: {report.decline.kind}"] += 1
        self.next_check = sim.now + report.next_in


class PackingTuner(ProjectTuner):
    """The tuner with the daemon's default settings (no thresholds) beside GKE's
    ``optimize-utilization`` profile: the bin-packing peer's scheduler scoring and Cluster
    Autoscaler flags (:mod:`tuner.sim.strategies.binpacking`)."""

    name = "binpacking-tuner"
    scoring = BinPacking.scoring
    profile = staticmethod(BinPacking.profile)

    def __init__(self, scenario: Scenario, seed: int) -> None:
        super().__init__(scenario, seed, unlimited_settings(scenario, seed))


class KarpenterTuner(ProjectTuner):
    """The tuner with the daemon's default settings (no thresholds) beside Karpenter instead of
    the Cluster Autoscaler, as a Karpenter user runs it: emptied nodes are left cordoned for
    Karpenter's consolidation to delete, and a replace's new node comes from Karpenter
    provisioning for the placeholder pod (both ``autoscaler``, the defaults).

    ``node_removal="delete-node"`` is the other way a Karpenter user releases a node at once:
    the daemon deletes the drained Node object, and Karpenter's termination finalizer on it
    (karpenter.sh/docs/concepts/disruption, "Control Flow" and "Manual Methods") deletes its
    NodeClaim and the instance, then lets the Node go. In the simulation that is the instance
    gone at once (``drain_node``'s ``command``), not a bare ``delete-node`` after which the VM's
    kubelet registers the Node again: nothing re-registers a node Karpenter terminated."""

    name = "karpenter-tuner"

    def __init__(self, scenario: Scenario, seed: int, node_removal: str = "autoscaler") -> None:
        settings = unlimited_settings(scenario, seed)
        settings = replace(settings, execute=replace(settings.execute, node_removal=node_removal))
        super().__init__(scenario, seed, settings)
        self.karpenter = KarpenterStrategy()

    def removal(self) -> str:
        """``delete-node`` deletes a Karpenter node's NodeClaim and instance (its finalizer):
        the simulation's ``command``; ``autoscaler`` as it is."""
        mode = self.settings.execute.node_removal
        return "command" if mode == "delete-node" else mode

    def autoscaler(self, scenario: Scenario) -> Karpenter:
        """Karpenter over the scenario's pools (:class:`KarpenterStrategy`)."""
        return self.karpenter.autoscaler(scenario)
