"""Metrics recording: each tick after the warm-up, the load, the billed nodes and their price,
pending pods, workloads short of CPU, the requests to pack (and the pods of each service whose
rules the lower bound counts, and the nodes that hold the pinned pods of the first tick) and the
evictions, into a :class:`~tuner.sim.metrics.TickSeries`."""

from __future__ import annotations

from tuner.sim.bound import Held, held, pinned, ruled
from tuner.sim.clock import Clock
from tuner.sim.controllers import Controllers
from tuner.sim.metrics import TickSeries
from tuner.sim.state import SimCluster


class TickRecorder:
    """Appends one tick's measurements to :attr:`series`."""

    def __init__(self, clock: Clock, state: SimCluster, controllers: Controllers) -> None:
        self.clock = clock
        self.state = state
        self.controllers = controllers
        self.series = TickSeries()
        self.ruled = ruled(controllers.scenario.services)
        self.pinned = pinned(controllers.scenario.services)
        self.pools = tuple(p.name for p in controllers.scenario.pools)
        self._pinned: tuple[int, ...] | None = None
        """Uids of the pinned pods bound at the first tick (pods are never re-bound: a moved pod
        is a new one)."""
        self._held: tuple[Held, ...] = ()
        self._evictions = 0

    def record(self, load: float) -> None:
        """Measure the tick (evictions are counted during the warm-up too, not recorded)."""
        state, now = self.state, self.clock.now
        evicted = state.evictions - self._evictions
        self._evictions = state.evictions
        if now < 0:
            return
        short = self.controllers.short()
        totals = state.totals
        s = self.series
        s.time.append(now)
        s.load.append(load)
        s.cost.append(sum(n.type.price for n in state.nodes.values()))
        s.nodes.append(len(state.nodes))
        s.pending.append(totals.pending)
        s.short.append(short)
        s.cpu.append(totals.cpu)
        s.memory.append(totals.memory)
        s.pods.append(totals.pods)
        s.ruled.append(tuple(state.count(service) for service in self.ruled))
        s.evictions.append(evicted)
        self._record_pinned()

    def _record_pinned(self) -> None:
        state, s = self.state, self.series
        if self._pinned is None:
            start = sorted(
                (pod.uid, pod.name, pod.node)
                for service in self.pinned
                for pod in state.pods_of(service)
                if pod.node is not None
            )
            self._pinned = tuple(uid for uid, _, _ in start)
            s.pinned_start = tuple((name, node) for _, name, node in start)
        kept = [state.pods[uid] for uid in self._pinned if uid in state.pods]
        lost = len(self._pinned) - len(kept)
        if not s.pinned or lost != s.pinned_lost:  # what they hold changes only when one goes
            self._held = held(
                self.pools,
                ((state.nodes[p.node].pool, p.node, p.service) for p in kept if p.node is not None),
            )
        s.pinned.append(self._held)
        s.pinned_lost = lost
