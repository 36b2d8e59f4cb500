"""Window tracking: what the simulation remembers each tick to say whether the last seconds were
stable (same ready nodes, same pods per workload, no pending pod), what changed over them (nodes,
workloads, cluster-wide blockers) and the mean load served."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from itertools import takewhile
from typing import TYPE_CHECKING

from tuner.model.cluster import Workload
from tuner.sim.clock import Clock
from tuner.sim.state import SimCluster

if TYPE_CHECKING:
    from tuner.sim.engine import Scenario

MAX_WINDOW = 4 * 3600.0
"""The longest window :meth:`WindowTracker.window` can report the load of."""


@dataclass(frozen=True, slots=True)
class WindowSummary:
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
    shrinking: frozenset[Workload] = frozenset()
    """Of the workloads, those that only lost pods (none bound since then)."""
    emptied: frozenset[str] = frozenset()
    """Of the nodes, those that only had pods stop on them (none bound, not joined)."""
    only_leaving: bool = False
    """The blockers are only nodes leaving."""
    observed: frozenset[str] = frozenset()
    """The ready nodes seen since the checked start, up to the last tick observed (a node
    ready since is not among them)."""


class WindowTracker:
    """Stamps, each tick, when the cluster, each node and each workload last changed."""

    def __init__(self, scenario: Scenario, clock: Clock, state: SimCluster) -> None:
        self.scenario = scenario
        self.clock = clock
        self.state = state
        self._signature: tuple[object, ...] = ()
        self._stable_since = clock.now
        self._node_changed: dict[str, float] = {}
        """Node -> when it last changed (joined, left, cordoned, a pod started or stopped)."""
        self._workload_changed: dict[Workload, float] = {}
        """Workload -> until when it counts as changed (a bound pod: until it is ready)."""
        self._pending_at = -math.inf
        """When a pod was last pending."""
        self._nodes_moved_at = -math.inf
        """When a node last joined or left, but one the tuner left to the autoscaler."""
        self._joined_at = -math.inf
        """When a node last joined."""
        self._grew: dict[Workload, float] = {}
        """Workload -> until when a pod bound to it counts (until it is ready)."""
        self._gained: dict[str, float] = {}
        """Node -> when it last joined or had a pod bound to it."""
        self._seen_at = -math.inf
        """The last tick observed."""
        self._registered: frozenset[str] = frozenset()
        self.handed_over: set[str] = set()
        """Nodes the tuner's executor left to the autoscaler (their going blocks nothing)."""
        self._loads: deque[tuple[float, float]] = deque()
        self._counts: tuple[int, tuple[int, ...]] = (-1, ())
        """Pods per service, as of a state version."""

    def observe(self, load: float) -> None:
        """Record this tick: the cluster's signature, what changed, the load served."""
        state, now = self.state, self.clock.now
        pending = state.totals.pending
        registered = tuple(sorted(n.name for n in state.nodes.values() if n.ready(now)))
        if self._counts[0] != state.version:
            by_service = state.by_service
            counts = tuple(len(by_service.get(s, ())) for s in self.scenario.services)
            self._counts = (state.version, counts)
        signature = (registered, self._counts[1], pending)
        if signature != self._signature:
            self._signature = signature
            self._stable_since = now + self.clock.tick
        self._collect_changes(frozenset(registered), pending)
        self._loads.append((now, load))
        while self._loads and self._loads[0][0] < now - MAX_WINDOW:
            self._loads.popleft()

    def _collect_changes(self, registered: frozenset[str], pending: int) -> None:
        """Stamp the nodes and workloads that changed this tick, and the cluster-wide events."""
        state, now = self.state, self.clock.now
        if registered != self._registered:
            moved = registered ^ self._registered
            state.touched_nodes |= moved
            if moved - self.handed_over:
                self._nodes_moved_at = now
            for name in registered - self._registered:
                self._joined_at = self._gained[name] = now
            self.handed_over &= registered
            self._registered = registered
            for name in [n for n, t in self._node_changed.items() if now - t > MAX_WINDOW]:
                del self._node_changed[name]
                self._gained.pop(name, None)
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
            self._grew[service.workload] = now + self.scenario.startup
        for bound_at, pod in reversed(state.recent_binds):
            if bound_at <= self._seen_at:
                break
            if pod.node is not None:
                self._gained[pod.node] = now
        self._seen_at = now
        state.touched_nodes.clear()
        state.touched_services.clear()
        state.bound_services.clear()

    def window(self, seconds: float, warmup: float = 0.0) -> WindowSummary:
        """Whether the last ``seconds`` and the ``warmup`` before them were stable (same nodes
        and per-workload pod counts, no pending pods), what changed over them, and the mean load
        over the last ``seconds``."""
        now = self.clock.now
        start = now - seconds
        since = start - warmup
        pending = self.state.totals.pending
        stable = self._stable_since <= since + 1e-9 and not pending
        # The loads are in time order: the window's are the last ones, summed oldest first.
        served = list(takewhile(lambda tick: tick[0] >= start - 1e-9, reversed(self._loads)))
        load = sum(load for _, load in reversed(served)) / len(served) if served else 0.0
        blockers = []
        if pending or self._pending_at >= since - 1e-9:
            blockers.append("pods pending")
        if self._nodes_moved_at >= since - 1e-9:
            blockers.append("a node joined or left")
        nodes = frozenset(n for n, t in self._node_changed.items() if t >= since - 1e-9)
        workloads = frozenset(w for w, t in self._workload_changed.items() if t >= since - 1e-9)
        return WindowSummary(
            start,
            now,
            stable,
            load,
            pending,
            self._stable_since - self.clock.tick,
            nodes,
            workloads,
            tuple(blockers),
            frozenset(w for w in workloads if self._grew.get(w, -math.inf) < since - 1e-9),
            frozenset(n for n in nodes if self._gained.get(n, -math.inf) < since - 1e-9),
            blockers == ["a node joined or left"] and self._joined_at < since - 1e-9,
            self._registered | nodes,
        )
