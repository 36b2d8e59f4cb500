"""The cluster's controllers in the simulation, run once per tick in this order: timed events
(Node objects registering again), the DaemonSet controller, the HPAs (every
:data:`~tuner.sim.hpa.SYNC_PERIOD`), the ReplicaSet controllers, kube-scheduler, then the
autoscaler (the Cluster Autoscaler or Karpenter), after which evicted pods are re-created and
scheduled again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.sim.clock import Clock
from tuner.sim.hpa import METRIC_DELAY, SYNC_PERIOD, USAGE_LAGS, HorizontalPodAutoscaler
from tuner.sim.replicaset import deletion_order
from tuner.sim.scheduler import Scheduler
from tuner.sim.state import SimCluster, SimPod
from tuner.sim.workloads import Service

if TYPE_CHECKING:
    from tuner.sim.engine import Scenario
    from tuner.sim.strategy import Autoscaler


class Controllers:
    """DaemonSets, HPAs, ReplicaSets, kube-scheduler and the autoscaler over one cluster."""

    def __init__(
        self,
        scenario: Scenario,
        clock: Clock,
        state: SimCluster,
        scheduler: Scheduler,
        autoscaler: Autoscaler,
    ) -> None:
        self.scenario = scenario
        self.clock = clock
        self.state = state
        self.scheduler = scheduler
        self.autoscaler = autoscaler
        self.replicas: dict[Service, int] = {s: s.replicas for s in scenario.services}
        """Desired replicas per workload (the HPAs' and the executor's scale)."""
        self.hpas = {
            s: HorizontalPodAutoscaler(s.hpa) for s in scenario.services if s.hpa is not None
        }
        self._next_hpa = clock.now
        self.with_daemons: set[str] = set()
        """Nodes whose DaemonSet pods were started."""
        self._loads_now: tuple[float, dict[str, float]] = (float("nan"), {})
        self._matched: tuple[int, dict[Service, int], dict[Service, int]] | None = None
        """The state's version, the desired replicas and the surges when every ReplicaSet last
        had its count: until one of them changes, reconciling has nothing to do."""

    def run(self) -> None:
        """One tick of every controller."""
        now = self.clock.now
        state = self.state
        self.clock.fire_due()
        self.start_daemons()
        if now >= self._next_hpa - 1e-9:
            self._sync_hpas()
            self._next_hpa = now + SYNC_PERIOD
        self.reconcile()
        self.scheduler.schedule(state, now)
        evicted = self.autoscaler.step(state, state.pending(), now)
        if evicted:
            self.reconcile()
            self.scheduler.schedule(state, now)

    def start_daemons(self) -> None:
        """The DaemonSet controller: each node that became ready gets its DaemonSet pods."""
        state, now = self.state, self.clock.now
        for node in list(state.nodes.values()):
            if node.name in self.with_daemons or not node.ready(now):
                continue
            self.with_daemons.add(node.name)
            for service in self.scenario.daemonsets:
                pod = state.create_pod(service, now)
                state.bind(pod, node, now)

    def reconcile(self) -> None:
        """ReplicaSet controllers: create or delete pods to match the desired replicas (a surge
        move's new pod is its new ReplicaSet's: neither counted nor deleted)."""
        state = self.state
        matched = self._matched
        if (
            matched is not None
            and matched[0] == state.version
            and matched[1] == self.replicas
            and matched[2] == state.surges
        ):
            return
        acted = False
        for service, want in self.replicas.items():
            have = state.replica_count(service)
            if have == want:
                continue
            acted = True
            for _ in range(want - have):
                state.create_pod(service, self.clock.now)
            if have > want:
                surge = state.surges.get(service)
                own = [p for p in state.pods_of(service) if p.uid != surge]
                for pod in self._deletion_order(own)[: have - want]:
                    state.delete_pod(pod)
        if not acted:
            self._matched = (state.version, dict(self.replicas), dict(state.surges))

    def _deletion_order(self, pods: list[SimPod]) -> list[SimPod]:
        """The ReplicaSet's scale-down ranking (:func:`tuner.sim.replicaset.deletion_order`)."""
        startup = self.scenario.startup
        return deletion_order(
            pods, self.clock.now, lambda p: p.bound_at + startup if self.ready(p) else None
        )

    def ready(self, pod: SimPod) -> bool:
        """The pod is bound and its start-up is over."""
        return pod.node is not None and self.clock.now >= pod.bound_at + self.scenario.startup

    # -- the load and what the HPAs measure ----------------------------------------------------

    def namespace_loads(self) -> dict[str, float]:
        """Each namespace's load now (computed once per tick)."""
        now = self.clock.now
        if self._loads_now[0] != now:
            loads = {ns: pattern(now) for ns, pattern in self.scenario.loads.items()}
            self._loads_now = (now, loads)
        return self._loads_now[1]

    def short(self) -> int:
        """Workloads with an HPA whose CPU demand now exceeds their Ready pods' requests."""
        loads = self.namespace_loads()
        ready = self.ready_counts()
        return sum(
            1
            for service in self.hpas
            if _demand(service, loads.get(service.namespace)) > ready.get(service, 0) * service.cpu
        )

    def ready_counts(self, after: float = 0.0) -> dict[Service, int]:
        """Ready pods per service: bound pods less those bound within the startup time (and
        ``after`` more seconds: :data:`~tuner.sim.hpa.METRIC_DELAY` for the pods the HPA has
        a metric of). The state's recent bindings are pruned here; a pod deleted or rebound
        since is skipped."""
        state, now = self.state, self.clock.now
        recent = state.recent_binds
        startup = self.scenario.startup
        while recent and now >= recent[0][0] + startup + METRIC_DELAY:
            recent.popleft()
        ready = dict(state.bound)
        for bound_at, pod in recent:
            if (
                now < bound_at + startup + after
                and pod.node is not None
                and pod.bound_at == bound_at
                and pod.uid in state.pods
            ):
                ready[pod.service] -= 1
        return ready

    def _lagged_loads(self) -> dict[str, tuple[float, ...]]:
        """Each namespace's load at :data:`~tuner.sim.hpa.USAGE_LAGS` before now (what
        metrics-server's latest sample averages)."""
        now = self.clock.now
        return {
            ns: tuple(pattern(now - lag) for lag in USAGE_LAGS)
            for ns, pattern in self.scenario.loads.items()
        }

    def _sync_hpas(self) -> None:
        """Every HPA's sync. The load is shared by the Ready pods (a Service routes to them),
        so the pods the HPA has a sample of carry only their share of it: a pod Ready for less
        than :data:`~tuner.sim.hpa.METRIC_DELAY` serves load the HPA does not see."""
        started = self.ready_counts()
        counts = self.ready_counts(METRIC_DELAY)
        lagged = self._lagged_loads()
        state, replicas, now = self.state, self.replicas, self.clock.now
        for service, hpa in self.hpas.items():
            measured = counts.get(service, 0)
            ready = started.get(service, 0)
            count = state.count(service)
            share = measured / ready if ready else 0.0
            replicas[service] = hpa.desired(
                now,
                replicas[service],
                measured,
                ready - measured,
                _measured_usage(service, lagged.get(service.namespace)) * share,
                service.cpu,
                unready=count - ready,
            )


def _demand(service: Service, load: float | None) -> float:
    """The service's CPU demand at its namespace's ``load`` (None: it sees none)."""
    return service.demand(load) if load is not None else service.fixed_cpu


def _measured_usage(service: Service, loads: tuple[float, ...] | None) -> float:
    """The service's CPU usage as the HPA reads it: metrics-server's latest sample, the demand
    averaged over its namespace's lagged ``loads`` (None: it sees none)."""
    if loads is None:
        return service.fixed_cpu
    return sum(map(service.demand, loads)) / len(USAGE_LAGS)
