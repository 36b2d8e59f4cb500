"""The Horizontal Pod Autoscaler's replica calculation (autoscaling/v2, CPU utilization).

- usage ratio = (CPU usage of the ready pods / their requests) / target;
- within the tolerance (``|ratio - 1| <= 0.1``) nothing changes;
- scaling up with pods not ready yet: those count as using nothing, and if that flips the
  direction (or lands in the tolerance) nothing changes;
- desired = ceil(ratio * pods counted);
- scale-up is limited per 15 s period to max(+100 %, +4 pods); scale-down is stabilised over
  the last 300 s (the highest recommendation in the window wins) and limited to -100 %;
- the result is clamped to [minReplicas, maxReplicas].

Defaults are those of the HPA controller and of ``autoscaling/v2`` ``behavior``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from tuner.sim.workloads import HpaSpec

TOLERANCE = 0.1
SYNC_PERIOD = 15.0
DOWNSCALE_STABILIZATION = 300.0
SCALE_UP_PERCENT = 100
SCALE_UP_PODS = 4


def recommend(
    spec: HpaSpec, current: int, ready: int, unready: int, usage: float, request: int
) -> int:
    """The raw recommendation (before stabilisation, rate limits and bounds).

    ``current`` is the scale's replica count, ``ready`` the pods with a metric, ``unready`` the
    pods without one yet (pending or starting), ``usage`` the ready pods' total CPU usage and
    ``request`` one pod's CPU request (millicores).
    """
    if ready == 0 or request <= 0:
        return current
    ratio = usage / (ready * request) / spec.target
    counted = ready
    if unready > 0 and ratio > 1.0:
        counted = ready + unready
        ratio = usage / (counted * request) / spec.target
        if ratio <= 1.0:
            return current
    if abs(ratio - 1.0) <= TOLERANCE:
        return current
    return math.ceil(ratio * counted)


@dataclass
class HorizontalPodAutoscaler:
    """One HPA's controller state: its recommendations over the stabilisation window."""

    spec: HpaSpec
    history: deque[tuple[float, int]] = field(default_factory=deque)

    def desired(
        self, now: float, current: int, ready: int, unready: int, usage: float, request: int
    ) -> int:
        """The replica count the HPA sets at ``now``."""
        raw = recommend(self.spec, current, ready, unready, usage, request)
        self.history.append((now, raw))
        while self.history and self.history[0][0] < now - DOWNSCALE_STABILIZATION:
            self.history.popleft()
        if raw < current:
            raw = min(current, max(r for _, r in self.history))
        elif raw > current:
            limit = max(current * (100 + SCALE_UP_PERCENT) // 100, current + SCALE_UP_PODS)
            raw = min(raw, limit)
        return min(max(raw, self.spec.min_replicas), self.spec.max_replicas)
