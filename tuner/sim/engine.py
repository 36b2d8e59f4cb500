"""The discrete-time simulation: load, HPAs, ReplicaSets, kube-scheduler, the Cluster
Autoscaler and one tuning strategy, advanced in fixed ticks, with metrics per tick.

Each tick (``tick`` seconds, default 5): nodes that became ready get their DaemonSet pods; the
HPAs sync (every 15 s); ReplicaSets create or delete pods to match; kube-scheduler binds pending
pods; the Cluster Autoscaler scans (every 10 s); the strategy may act; the tick's cost, pending
pods and CPU shortfall are recorded. Everything random draws from one ``random.Random(seed)``,
so a seed gives one exact run.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from tuner.model.cluster import Cluster, Hpa, Workload
from tuner.model.conventions import POOL_LABEL_BY_SYSTEM
from tuner.model.resources import Resources
from tuner.model.scheduling import Constraints
from tuner.plan.actions import Action, resolved
from tuner.settings import Execute
from tuner.sim.autoscaler import AutoscalerConfig, ClusterAutoscaler
from tuner.sim.executor import SimulatedExecutor
from tuner.sim.hpa import METRIC_DELAY, SYNC_PERIOD, USAGE_LAGS, HorizontalPodAutoscaler
from tuner.sim.load import Compressed, LoadPattern
from tuner.sim.metrics import ActionCounts, ActionResult, Series
from tuner.sim.pools import NodePool
from tuner.sim.replicaset import deletion_order
from tuner.sim.scheduler import LEAST_ALLOCATED, Scheduler
from tuner.sim.state import SimCluster, SimPod
from tuner.sim.workloads import Service

MAX_WINDOW = 4 * 3600.0
"""The longest window :meth:`Simulation.window` can report the load of."""
REREGISTER_DELAY = 60.0
"""Seconds until the kubelet of a node whose Node object was deleted registers it again (its VM
still runs: what the 2019 thesis saw on GKE after ``kubectl delete node``)."""


@dataclass(frozen=True)
class Scenario:
    """What to simulate: workloads, their load, the node pools and the autoscaler's flags."""

    name: str
    title: str
    services: tuple[Service, ...]
    daemonsets: tuple[Service, ...]
    loads: dict[str, LoadPattern]
    """Load pattern per namespace; services in other namespaces see no load."""
    pools: tuple[NodePool, ...]
    duration: float
    autoscaler: AutoscalerConfig = field(default_factory=AutoscalerConfig)
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


class Strategy(Protocol):
    """What runs next to the autoscalers: nothing, a peer, the 2019 tuner, or ours.

    Optional hooks, read once when the simulation starts: ``scoring`` (str), the scheduler's
    NodeResourcesFit strategy (``LeastAllocated`` when absent); ``profile(config)``, the Cluster
    Autoscaler's flags this strategy runs it with; ``autoscaler(scenario)``, an
    :class:`Autoscaler` that replaces the Cluster Autoscaler (Karpenter).
    """

    name: str

    def on_tick(self, sim: Simulation) -> None:
        """Called once per tick after the autoscalers; may call ``sim.apply``."""


class Autoscaler(Protocol):
    """What adds and removes nodes each tick: the Cluster Autoscaler or a replacement."""

    def step(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> list[SimPod]:
        """Act if due; returns the pods it evicted (now pending)."""


def autoscaler_of(
    scenario: Scenario, strategy: Strategy | None, rng: random.Random, pool_label: str
) -> Autoscaler:
    """The strategy's autoscaler: its replacement, else the Cluster Autoscaler with the
    strategy's profile of flags, else with the scenario's."""
    replacement = getattr(strategy, "autoscaler", None)
    if replacement is not None:
        built: Autoscaler = replacement(scenario)
        return built
    profile = getattr(strategy, "profile", None)
    config = scenario.autoscaler if profile is None else profile(scenario.autoscaler)
    return ClusterAutoscaler(config, scenario.pools, scenario.daemonsets, rng, pool_label)


@dataclass(frozen=True, slots=True)
class Window:
    """The last ``end - start`` seconds: whether they were stable and the mean load served."""

    start: float
    end: float
    stable: bool
    load: float
    pending: int = 0
    """Pods pending now."""
    changed: float = -math.inf
    """When the node set, the per-workload pod counts or the pending count last changed."""
    nodes: frozenset[str] = frozenset()
    """Nodes that joined, left, were cordoned or had pods start or stop on them since the
    checked start."""
    workloads: frozenset[Workload] = frozenset()
    """Workloads whose pod count changed or that had pending or unready pods since then."""
    blockers: tuple[str, ...] = ()
    """Cluster-wide: pods pending, nodes joining or leaving (but those the tuner left to the
    autoscaler) since then."""


class Simulation:
    """One run of a scenario with one strategy. Drive it with :meth:`advance`."""

    def __init__(
        self, scenario: Scenario, seed: int, strategy: Strategy | None = None, tick: float = 5.0
    ) -> None:
        self.scenario = scenario
        self.strategy = strategy
        self.tick = tick
        self.rng = random.Random(seed)
        self.now = -scenario.warmup
        self.cluster_state = SimCluster()
        self.scheduler = Scheduler(self.rng, getattr(strategy, "scoring", LEAST_ALLOCATED))
        self.pool_label = POOL_LABEL_BY_SYSTEM.get(scenario.system, "")
        self.autoscaler = autoscaler_of(scenario, strategy, self.rng, self.pool_label)
        self.replicas: dict[Service, int] = {s: s.replicas for s in scenario.services}
        self.hpas = {
            s: HorizontalPodAutoscaler(s.hpa) for s in scenario.services if s.hpa is not None
        }
        self.hpa_values = tuple(
            Hpa(s.namespace, s.name, s.workload, s.hpa.min_replicas, s.hpa.max_replicas)
            for s in scenario.services
            if s.hpa is not None
        )
        self.by_workload = {s.workload: s for s in scenario.services}
        self.series = Series()
        self.actions = ActionCounts()
        self._next_hpa = self.now
        self.with_daemons: set[str] = set()
        self.reregister: list[tuple[float, str]] = []
        """(time, node) of Node objects that register again (their VM kept running)."""
        self.executor = SimulatedExecutor(self)
        self._signature: tuple[object, ...] = ()
        self._stable_since = self.now
        self._node_changed: dict[str, float] = {}
        """Node -> when it last changed (joined, left, cordoned, a pod started or stopped)."""
        self._workload_changed: dict[Workload, float] = {}
        """Workload -> until when it counts as changed (a bound pod: until it is ready)."""
        self._pending_at = -math.inf
        """When a pod was last pending."""
        self._nodes_moved_at = -math.inf
        """When a node last joined or left, but one the tuner left to the autoscaler."""
        self._registered: frozenset[str] = frozenset()
        self.handed_over: set[str] = set()
        """Nodes the tuner's executor left to the autoscaler (their going blocks nothing)."""
        self._loads: deque[tuple[float, float]] = deque()
        for pool in scenario.pools:
            for _ in range(pool.initial_nodes):
                self.cluster_state.add_node(
                    pool.node_type, self.now, 0.0, pool.name, self.pool_label, pool.zone
                )
        self._evictions = 0
        self._placeholders = 0
        self._loads_now: tuple[float, dict[str, float]] = (math.nan, {})
        self._counts: tuple[int, tuple[int, ...]] = (-1, ())
        """Pods per service, as of a state version."""
        self.reconcile()
        self._start_daemons()

    # -- the driving interface ----------------------------------------------------------------

    def cluster(self) -> Cluster:
        """The cluster now, as the tuner's monitor would read it."""
        return self.cluster_state.view(self.now, self.hpa_values)

    def advance(self, seconds: float) -> None:
        """Run ``seconds`` of simulated time."""
        end = self.now + seconds
        while self.now < end - 1e-9:
            self._step()

    def window(self, seconds: float, warmup: float = 0.0) -> Window:
        """Whether the last ``seconds`` and the ``warmup`` before them were stable (same nodes
        and per-workload pod counts, no pending pods), what changed over them, and the mean load
        over the last ``seconds``."""
        start = self.now - seconds
        since = start - warmup
        pending = self.cluster_state.totals.pending
        stable = self._stable_since <= since + 1e-9 and not pending
        served = [load for t, load in self._loads if t >= start - 1e-9]
        load = sum(served) / len(served) if served else 0.0
        blockers = []
        if pending or self._pending_at >= since - 1e-9:
            blockers.append("pods pending")
        if self._nodes_moved_at >= since - 1e-9:
            blockers.append("a node joined or left")
        return Window(
            start,
            self.now,
            stable,
            load,
            pending,
            self._stable_since - self.tick,
            frozenset(n for n, t in self._node_changed.items() if t >= since - 1e-9),
            frozenset(w for w, t in self._workload_changed.items() if t >= since - 1e-9),
            tuple(blockers),
        )

    def apply(
        self,
        actions: Sequence[Action],
        node_removal: str = "autoscaler",
        provision_timeout_s: float = Execute.provision_timeout_s,
    ) -> tuple[ActionResult, ...]:
        """Carry out actions through the simulated executor, in order, verifying each; the
        first failed verification stops the rest (they are not returned). A provision binds
        its provisional node name; later actions name the node it obtained.

        ``node_removal``: ``autoscaler`` cordons and leaves the empty node to the Cluster
        Autoscaler; ``command`` deletes the VM now; ``delete-node`` deletes the Node object
        only (its VM keeps running and registers again); see :mod:`tuner.sim.executor`.
        A provision waits at most ``provision_timeout_s`` of simulated time for its node.
        """
        results: list[ActionResult] = []
        bindings: dict[str, str] = {}
        for action in actions:
            live = resolved(action, bindings)
            result = self.executor.execute(live, node_removal, provision_timeout_s, bindings)
            results.append(result)
            if not result.verified:
                break
        self.actions.count(results)
        return tuple(results)

    def take_back(self, name: str) -> None:
        """Uncordon a node left to the autoscaler (the tuner takes it back); the scheduler then
        binds pending pods to it."""
        state = self.cluster_state
        state.nodes[name].unschedulable = False
        self.handed_over.discard(name)
        state.touched_nodes.add(name)
        state.changed()
        self.scheduler.schedule(state, self.now)

    def evict(self, pod: SimPod) -> None:
        """Evict a pod (any actor: the Cluster Autoscaler's drain, the tuner's executor, a
        descheduler, Karpenter): it is deleted, its ReplicaSet re-creates it, and it counts
        in the evictions per hour."""
        self.cluster_state.evict(pod)

    # -- what the simulated executor may do (its port: tuner.sim.executor.Controls) ----------

    def pod_on(self, name: str, node: str | None) -> SimPod | None:
        """The pod called ``name`` if it runs on ``node``."""
        uid = self.cluster_state.by_name.get(name)
        if uid is None:
            return None
        pod = self.cluster_state.pods[uid]
        return pod if pod.node == node and node is not None else None

    def service_of(self, workload: Workload) -> Service | None:
        """The simulated workload, or None."""
        return self.by_workload.get(workload)

    def node_ready(self, name: str) -> bool:
        """True when the node exists, is registered and is ready."""
        node = self.cluster_state.nodes.get(name)
        return node is not None and node.ready(self.now)

    def label_node(self, name: str, key: str, value: str | None) -> None:
        """Set a node label (remove it with None)."""
        labels = self.cluster_state.nodes[name].labels
        if value is None:
            del labels[key]
        else:
            labels[key] = value
        self.cluster_state.changed()

    def scale(self, service: Service, delta: int) -> None:
        """Change the workload's replicas (never below 0); its ReplicaSet follows."""
        self.replicas[service] = max(self.replicas[service] + delta, 0)

    def delete_pod(self, pod: SimPod) -> None:
        """Delete a pod (after a scale-down that chose it)."""
        self.cluster_state.delete_pod(pod)

    def start_replica(self, service: Service) -> str | None:
        """The ReplicaSet creates one pod and kube-scheduler binds it now: the node it landed
        on, or None (pending)."""
        state = self.cluster_state
        pod = state.create_pod(service, self.now)
        chosen = self.scheduler.choose(state, pod, self.now)
        if chosen is None:
            return None
        state.bind(pod, chosen, self.now)
        return chosen.name

    def node_names(self) -> tuple[str, ...]:
        """Every node that exists, booting ones included."""
        return tuple(sorted(self.cluster_state.nodes))

    def create_placeholder(self, requests: Resources, constraints: Constraints) -> SimPod:
        """Create a bare pending pod with these requests and constraints (the placeholder a
        provision makes the Cluster Autoscaler add a node for)."""
        self._placeholders += 1
        service = Service(
            f"placeholder-{self._placeholders}", requests.cpu, requests.memory, kind="Pod"
        )
        return self.cluster_state.create_pod(service, self.now, constraints)

    def pass_time(self, done: Callable[[], bool], timeout: float) -> bool:
        """Let simulated time pass, tick by tick, with every controller but the strategy
        running (it is the one waiting), until ``done()`` or ``timeout`` seconds; whether
        ``done()`` came true."""
        deadline = self.now + timeout
        while not done():
            if self.now >= deadline - 1e-9:
                return False
            self._observe()
            self.now += self.tick
            self._controllers()
        return True

    def drain_node(self, name: str, node_removal: str) -> None:
        """Cordon the node and evict its pods but DaemonSet pods; then ``autoscaler`` leaves the
        empty node to the Cluster Autoscaler, ``command`` deletes the VM now, ``delete-node``
        deletes the Node object only (the VM keeps running and registers again after
        :data:`REREGISTER_DELAY`). The controllers and the scheduler then catch up."""
        state = self.cluster_state
        node = state.nodes[name]
        node.unschedulable = True
        state.touched_nodes.add(name)
        if node_removal == "autoscaler":
            self.handed_over.add(name)
        state.changed()
        for pod in state.pods_on(node):
            if not pod.daemon:
                self.evict(pod)  # its ReplicaSet re-creates it elsewhere
        if node_removal == "command":
            state.delete_node(name)
            self.with_daemons.discard(name)
        elif node_removal == "delete-node":
            for pod in state.pods_on(node):
                state.delete_pod(pod)
            node.registered = False
            node.unschedulable = False
            self.with_daemons.discard(name)
            self.reregister.append((self.now + REREGISTER_DELAY, name))
        self.reconcile()
        self.scheduler.schedule(state, self.now)

    # -- one tick ------------------------------------------------------------------------------

    def _step(self) -> None:
        self._controllers()
        if self.strategy is not None and self.now >= 0:
            self.strategy.on_tick(self)  # may pass time itself (a provision waiting)
        self._observe()
        self.now += self.tick

    def _controllers(self) -> None:
        """What runs each tick besides the strategy: re-registering nodes, DaemonSets, HPAs,
        ReplicaSets, kube-scheduler, the autoscaler."""
        now = self.now
        state = self.cluster_state
        for when, name in list(self.reregister):
            if when <= now and name in state.nodes:
                state.nodes[name].registered = True
                state.changed()
        self.reregister = [(w, n) for w, n in self.reregister if w > now]
        self._start_daemons()
        if now >= self._next_hpa - 1e-9:
            self._sync_hpas()
            self._next_hpa = now + SYNC_PERIOD
        self.reconcile()
        self.scheduler.schedule(state, now)
        evicted = self.autoscaler.step(state, state.pending(), now)
        if evicted:
            self.reconcile()
            self.scheduler.schedule(state, now)

    def _start_daemons(self) -> None:
        state = self.cluster_state
        for node in list(state.nodes.values()):
            if node.name in self.with_daemons or not node.ready(self.now):
                continue
            self.with_daemons.add(node.name)
            for service in self.scenario.daemonsets:
                pod = state.create_pod(service, self.now)
                state.bind(pod, node, self.now)

    def _ready(self, pod: SimPod) -> bool:
        return pod.node is not None and self.now >= pod.bound_at + self.scenario.startup

    def _namespace_loads(self) -> dict[str, float]:
        """Each namespace's load now (computed once per tick)."""
        if self._loads_now[0] != self.now:
            loads = {ns: pattern(self.now) for ns, pattern in self.scenario.loads.items()}
            self._loads_now = (self.now, loads)
        return self._loads_now[1]

    def _demand(self, service: Service) -> float:
        load = self._namespace_loads().get(service.namespace)
        return service.demand(load) if load is not None else service.fixed_cpu

    def _ready_counts(self, after: float = 0.0) -> dict[Service, int]:
        """Ready pods per service: bound pods less those bound within the startup time (and
        ``after`` more seconds: :data:`~tuner.sim.hpa.METRIC_DELAY` for the pods the HPA has
        a metric of). The state's recent bindings are pruned here; a pod deleted or rebound
        since is skipped."""
        state = self.cluster_state
        recent = state.recent_binds
        startup = self.scenario.startup
        while recent and self.now >= recent[0][0] + startup + METRIC_DELAY:
            recent.popleft()
        ready = dict(state.bound)
        for bound_at, pod in recent:
            if (
                self.now < bound_at + startup + after
                and pod.node is not None
                and pod.bound_at == bound_at
                and pod.uid in state.pods
            ):
                ready[pod.service] -= 1
        return ready

    def _measured_usage(self, service: Service) -> float:
        """The service's CPU usage as the HPA reads it: metrics-server's latest sample, the
        demand averaged over :data:`~tuner.sim.hpa.USAGE_LAGS` before now."""
        pattern = self.scenario.loads.get(service.namespace)
        if pattern is None:
            return service.fixed_cpu
        return sum(service.demand(pattern(self.now - lag)) for lag in USAGE_LAGS) / len(USAGE_LAGS)

    def _sync_hpas(self) -> None:
        counts = self._ready_counts(METRIC_DELAY)
        for service, hpa in self.hpas.items():
            measured = counts.get(service, 0)
            count = self.cluster_state.count(service)
            self.replicas[service] = hpa.desired(
                self.now,
                self.replicas[service],
                measured,
                count - measured,
                self._measured_usage(service) if measured else 0.0,
                service.cpu,
            )

    def reconcile(self) -> None:
        """ReplicaSet controllers: create or delete pods to match the desired replicas."""
        state = self.cluster_state
        by_service = state.by_service
        for service, want in self.replicas.items():
            have = len(by_service.get(service, ()))
            if have == want:
                continue
            for _ in range(want - have):
                state.create_pod(service, self.now)
            if have > want:
                for pod in self._deletion_order(state.pods_of(service))[: have - want]:
                    state.delete_pod(pod)

    def _deletion_order(self, pods: list[SimPod]) -> list[SimPod]:
        """The ReplicaSet's scale-down ranking (:func:`tuner.sim.replicaset.deletion_order`)."""
        startup = self.scenario.startup
        return deletion_order(
            pods, self.now, lambda p: p.bound_at + startup if self._ready(p) else None
        )

    def _collect_changes(self, registered: frozenset[str], pending: int) -> None:
        """Stamp the nodes and workloads that changed this tick, and the cluster-wide events."""
        state, now = self.cluster_state, self.now
        if registered != self._registered:
            moved = registered ^ self._registered
            state.touched_nodes |= moved
            if moved - self.handed_over:
                self._nodes_moved_at = now
            self.handed_over &= registered
            self._registered = registered
            for name in [n for n, t in self._node_changed.items() if now - t > MAX_WINDOW]:
                del self._node_changed[name]
        if pending:
            self._pending_at = now
        for name in state.touched_nodes:
            self._node_changed[name] = now
        for service in state.touched_services:
            self._workload_changed[service.workload] = max(
                self._workload_changed.get(service.workload, now), now
            )
        for service in state.bound_services:
            self._workload_changed[service.workload] = now + self.scenario.startup
        state.touched_nodes.clear()
        state.touched_services.clear()
        state.bound_services.clear()

    def _observe(self) -> None:
        state = self.cluster_state
        now = self.now
        load = sum(self._namespace_loads().values())
        totals = state.totals
        pending, cpu, memory, pods = totals.pending, totals.cpu, totals.memory, totals.pods
        registered = tuple(sorted(n.name for n in state.nodes.values() if n.ready(now)))
        if self._counts[0] != state.version:
            by_service = state.by_service
            counts = tuple(len(by_service.get(s, ())) for s in self.scenario.services)
            self._counts = (state.version, counts)
        counts = self._counts[1]
        signature = (registered, counts, pending)
        if signature != self._signature:
            self._signature = signature
            self._stable_since = now + self.tick
        self._collect_changes(frozenset(registered), pending)
        self._loads.append((now, load))
        while self._loads and self._loads[0][0] < now - MAX_WINDOW:
            self._loads.popleft()
        evicted = state.evictions - self._evictions
        self._evictions = state.evictions
        if now < 0:
            return
        short = 0
        ready = self._ready_counts()
        for service in self.hpas:
            if self._demand(service) > ready.get(service, 0) * service.cpu:
                short += 1
        s = self.series
        s.time.append(now)
        s.load.append(load)
        s.cost.append(sum(n.type.price for n in state.nodes.values()))
        s.nodes.append(len(state.nodes))
        s.pending.append(pending)
        s.short.append(short)
        s.cpu.append(cpu)
        s.memory.append(memory)
        s.pods.append(pods)
        s.evictions.append(evicted)
