"""The discrete-time simulation: load, HPAs, ReplicaSets, kube-scheduler, the Cluster
Autoscaler and one tuning strategy, advanced in fixed ticks, with metrics per tick.

:class:`Simulation` composes the parts: the clock (:mod:`tuner.sim.clock`), the controllers
(:mod:`tuner.sim.controllers`), window tracking (:mod:`tuner.sim.window_tracking`), metrics
recording (:mod:`tuner.sim.recorder`) and the executor's port (:mod:`tuner.sim.controls`). Each
tick (``tick`` seconds, default 5): the controllers run; the strategy may act; the tick is
observed and recorded; the clock moves on (``docs/architecture.md``, "One simulation tick, step
by step"). Everything random draws from one ``random.Random(seed)``, so a seed gives one exact
run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tuner.model.cluster import Cluster, Hpa
from tuner.model.conventions import POOL_LABEL_BY_SYSTEM
from tuner.plan.actions import Action
from tuner.settings import Execute
from tuner.sim.autoscaler import AutoscalerConfig
from tuner.sim.clock import Clock
from tuner.sim.controllers import Controllers
from tuner.sim.controls import ClusterControls
from tuner.sim.executor import SimulatedExecutor
from tuner.sim.karpenter_disruption import KarpenterConfig
from tuner.sim.load import Compressed, LoadPattern
from tuner.sim.metrics import ActionCounts, ActionResult
from tuner.sim.pools import NodeGroup
from tuner.sim.recorder import TickRecorder
from tuner.sim.scheduler import Scheduler
from tuner.sim.state import SimCluster
from tuner.sim.strategy import Strategy, autoscaler_of
from tuner.sim.turns import Turns
from tuner.sim.window_tracking import WindowSummary, WindowTracker
from tuner.sim.workloads import Service


@dataclass(frozen=True)
class Scenario:
    """What to simulate: workloads, their load, the node pools and the autoscaler's flags."""

    name: str
    title: str
    services: tuple[Service, ...]
    daemonsets: tuple[Service, ...]
    loads: dict[str, LoadPattern]
    """Load pattern per namespace; services in other namespaces see no load."""
    pools: tuple[NodeGroup, ...]
    duration: float
    autoscaler: AutoscalerConfig = field(default_factory=AutoscalerConfig)
    karpenter: KarpenterConfig = field(default_factory=KarpenterConfig)
    """Karpenter's NodePool disruption settings (a scenario file's ``karpenter``); its
    start-up delay is the autoscaler's."""
    system: str = "gke"
    """``gke`` or ``eks``: which provider's node-pool label the nodes carry."""
    warmup: float = 1800.0
    startup: float = 10.0
    """Seconds from binding until a pod is Ready (serves load, reports metrics)."""
    sources: tuple[str, ...] = ()
    seed: int | None = None
    """The scenario file's seed (``tuner simulate --seed`` overrides it)."""
    speedup: float = 1.0
    """How many times faster than its own clock the load plays (a scenario file's
    ``speedup``): the load's time axis, the duration and the warm-up are divided by it; the
    controllers' clocks are not (what a replay on a real control plane can do too)."""

    def compressed(self, speedup: float) -> Scenario:
        """The same scenario with its load played ``speedup`` times faster."""
        if speedup == 1:
            return self
        return replace(
            self,
            loads={ns: Compressed(pattern, speedup) for ns, pattern in self.loads.items()},
            duration=self.duration / speedup,
            warmup=self.warmup / speedup,
            speedup=self.speedup * speedup,
        )

    @property
    def currency(self) -> str:
        """Currency of the node prices."""
        return self.pools[0].node_type.currency

    def load(self, t: float) -> float:
        """Total load over every namespace at ``t``."""
        return sum(pattern(t) for pattern in self.loads.values())


class Simulation:
    """One run of a scenario with one strategy. Drive it with :meth:`advance`."""

    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        strategy: Strategy | None = None,
        tick: float = 5.0,
        strategy_from: float = 0.0,
    ) -> None:
        self.scenario = scenario
        self.strategy = strategy
        self.strategy_from = strategy_from
        """When the strategy starts taking its turns: 0, the warm-up's end, where the
        evaluation starts measuring; a replay's daemon starts with the warm-up (``-warmup``)."""
        self.tick = tick
        self.rng = random.Random(seed)
        self.clock = Clock(-scenario.warmup, tick)
        self.cluster_state = SimCluster()
        scoring = strategy.scoring if strategy is not None else Strategy.scoring
        self.scheduler = Scheduler(self.rng, scoring)
        self.pool_label = POOL_LABEL_BY_SYSTEM.get(scenario.system, "")
        self.autoscaler = autoscaler_of(scenario, strategy, self.rng, self.pool_label)
        self.controllers = Controllers(
            scenario, self.clock, self.cluster_state, self.scheduler, self.autoscaler
        )
        self.replicas = self.controllers.replicas
        """Desired replicas per workload (the controllers')."""
        self.tracker = WindowTracker(scenario, self.clock, self.cluster_state)
        self.handed_over = self.tracker.handed_over
        """Nodes the tuner's executor left to the autoscaler (the tracker's)."""
        self.recorder = TickRecorder(self.clock, self.cluster_state, self.controllers)
        self.series = self.recorder.series
        self.watchers: list[Callable[[], None]] = []
        """Called after each tick past the warm-up is recorded, with the tick's state (the room
        ledger's, :mod:`tuner.sim.room_ledger`)."""
        self.actions = ActionCounts()
        self.turns = Turns(self._strategy_turn)
        self.controls = ClusterControls(
            self.clock, self.controllers, self.tracker, self.turns, self._wait
        )
        self.executor = SimulatedExecutor(self.controls)
        for pool in scenario.pools:
            for _ in range(pool.initial_nodes):
                self.cluster_state.add_node(
                    pool.node_type, self.now, 0.0, pool.name, self.pool_label, pool.zone
                )
        self.controllers.reconcile()
        self.controllers.start_daemons()

    @property
    def now(self) -> float:
        """Simulated seconds since the warm-up ended (negative during it)."""
        return self.clock.now

    # -- the driving interface ----------------------------------------------------------------

    def cluster(self) -> Cluster:
        """The cluster now, as the tuner's monitor would read it."""
        return self.cluster_state.view(self.now, self._hpa_values())

    def _hpa_values(self) -> tuple[Hpa, ...]:
        """Every HPA as the API holds it: its spec, and its status's utilisation of its last
        sync (a reading of the past, never of the load to come)."""
        return tuple(
            Hpa(
                s.namespace,
                s.name,
                s.workload,
                hpa.spec.min_replicas,
                hpa.spec.max_replicas,
                hpa.usage_ratio,
            )
            for s, hpa in self.controllers.hpas.items()
        )

    def advance(self, seconds: float) -> None:
        """Run ``seconds`` of simulated time, and on while the strategy's turn waits (for a
        provision's node)."""
        end = self.now + seconds
        while self.now < end - 1e-9 or self.turns.waiting is not None:
            self._step()

    def window(self, seconds: float, warmup: float = 0.0) -> WindowSummary:
        """Whether the last ``seconds`` and the ``warmup`` before them were stable, what changed
        over them, and the mean load over the last ``seconds`` (:class:`WindowTracker`)."""
        return self.tracker.window(seconds, warmup)

    def apply(
        self,
        actions: Sequence[Action],
        node_removal: str = "autoscaler",
        provision_timeout_s: float = Execute.provision_timeout_s,
        *,
        on_target_only: bool = False,
        max_moves_at_once: int = Execute.max_moves_at_once,
        surge_lone_pods: bool = Execute.surge_lone_pods,
    ) -> tuple[ActionResult, ...]:
        """Carry out actions through the simulated executor, in order, verifying each, a wave of
        migrations at once (at most ``max_moves_at_once``, :mod:`tuner.plan.waves`), a
        one-replica Deployment's pod by a surge move with ``surge_lone_pods``; the first failed
        verification stops the rest (they are not returned). A provision binds its provisional
        node name; later actions name the node it obtained.

        ``node_removal``: ``autoscaler`` cordons and leaves the empty node to the Cluster
        Autoscaler; ``command`` deletes the VM now; ``delete-node`` deletes the Node object
        only (its VM keeps running and registers again); see :mod:`tuner.sim.executor`.
        A provision waits at most ``provision_timeout_s`` of simulated time for its node.
        The nodes the plan empties are cordoned before its first move, and a new pod is verified
        off its source and off them (``on_target_only``: on its target, nothing drained ahead,
        the 2019 tuner's executor).
        """
        results = self.executor.run(
            actions,
            node_removal,
            provision_timeout_s,
            on_target_only=on_target_only,
            max_moves_at_once=max_moves_at_once,
            surge_lone_pods=surge_lone_pods,
        )
        self.actions.count(results)
        return results

    # -- one tick ------------------------------------------------------------------------------

    def _step(self) -> None:
        self.controllers.run()
        if self.strategy is not None and self.now >= self.strategy_from - 1e-9:
            self.turns.take(self.now)  # on_tick, or the rest of a turn whose wait is over
        self._close_tick()

    def _strategy_turn(self) -> None:
        if self.strategy is not None:
            self.strategy.on_tick(self)

    def _close_tick(self) -> None:
        """Observe and record the tick, then move the clock on."""
        load = sum(self.controllers.namespace_loads().values())
        self.tracker.observe(load)
        self.recorder.record(load)
        if self.now >= 0:
            for watch in self.watchers:
                watch()
        self.clock.advance()

    def _wait(self) -> None:
        """One tick passing while a driver outside any tick waits (a provision applied between
        two :meth:`advance` calls): the tick is closed and the next one's controllers run."""
        self._close_tick()
        self.controllers.run()
