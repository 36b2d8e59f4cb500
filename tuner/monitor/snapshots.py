"""Cluster snapshots over time: the fallback when kube-state-metrics series are absent.

The thesis judged stability by comparing the deployment at the window's start with the one at
its end. The Kubernetes API only tells the present, so the daemon keeps the snapshots it takes
each cycle in a :class:`SnapshotHistory` and the monitor asks it for "the cluster at time t".
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from typing import Protocol

from tuner.model.cluster import Cluster


class SnapshotSource(Protocol):
    """Where the monitor gets the cluster as it was at a given time."""

    def snapshot(self, at: float) -> Cluster | None:
        """The cluster at ``at`` (epoch seconds), or None when it is not known."""
        ...


class SnapshotHistory:
    """Snapshots read through ``read`` and remembered for ``keep_s`` seconds.

    ``snapshot(at)`` for a time within ``fresh_s`` of now reads the cluster now (and keeps it).
    For an earlier time it answers the newest kept snapshot taken at or before ``at``, if it is
    at most ``max_age_s`` older; a snapshot taken *before* ``at`` is the safe side: it can only
    make a window look less stable, never more.
    """

    def __init__(
        self,
        read: Callable[[], Cluster],
        *,
        max_age_s: float,
        keep_s: float,
        fresh_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._read = read
        self._max_age_s = max_age_s
        self._keep_s = keep_s
        self._fresh_s = fresh_s
        self._clock = clock
        self._times: list[float] = []
        self._clusters: list[Cluster] = []

    def take(self) -> Cluster:
        """Read the cluster now and keep the snapshot."""
        cluster = self._read()
        self.add(self._clock(), cluster)
        return cluster

    def add(self, at: float, cluster: Cluster) -> None:
        """Keep a snapshot taken at ``at`` (e.g. one the daemon read anyway)."""
        index = bisect.bisect_right(self._times, at)
        self._times.insert(index, at)
        self._clusters.insert(index, cluster)
        horizon = self._clock() - self._keep_s
        # Drop snapshots older than the horizon, but keep the newest one before it.
        drop = max(0, bisect.bisect_left(self._times, horizon) - 1)
        del self._times[:drop], self._clusters[:drop]

    def snapshot(self, at: float) -> Cluster | None:
        """The cluster at ``at``: read now when ``at`` is now, else the kept one before it."""
        if at >= self._clock() - self._fresh_s:
            return self.take()
        index = bisect.bisect_right(self._times, at) - 1
        if index < 0 or at - self._times[index] > self._max_age_s:
            return None
        return self._clusters[index]
