"""The Horizontal Pod Autoscaler's replica calculation (autoscaling/v2, CPU utilization).

- usage ratio = (CPU usage of the pods with a metric / their requests) / target;
- pods without a metric yet (pending, or started too recently for metrics-server to have a rate:
  the controller's *missing* pods) count as using nothing when scaling up and as using their
  whole request (or the target, if above 100 %) when scaling down; if that flips the direction
  (or lands in the tolerance) nothing changes;
- within the tolerance (``|ratio - 1| <= 0.1``) nothing changes;
- desired = ceil(ratio * pods counted);
- scale-up is limited per 15 s period to max(+100 %, +4 pods); scale-down is stabilised over
  the last 300 s (the highest recommendation in the window wins) and limited to -100 %;
- the result is clamped to [minReplicas, maxReplicas].

The usage the controller reads is metrics-server's latest sample: each pod's CPU averaged over
metrics-server's resolution (15 s, ``--metric-resolution`` as kwokctl and the metrics-server
manifests set it), sampled on average half a resolution before the HPA's sync (the two are not
aligned), so it lags the load (:data:`USAGE_LAGS`); and a new pod has no metric for about one
resolution after it starts (:data:`METRIC_DELAY`). Both were found by replaying scenarios on the
real controller (docs/fidelity.md).

Defaults are those of the HPA controller (``pkg/controller/podautoscaler/replica_calculator.go``)
and of ``autoscaling/v2`` ``behavior``.
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
METRIC_RESOLUTION = 15.0
"""metrics-server's scrape period, over which a pod's CPU rate is averaged."""
USAGE_LAGS = (10.0, 15.0, 20.0)
"""Seconds before a sync at which the load is sampled (a 5 s tick apart) and averaged: the
window metrics-server's latest sample covers, one resolution ending half a resolution
before the sync."""
METRIC_DELAY = METRIC_RESOLUTION
"""Seconds after a pod is Ready before metrics-server has a rate for it (the HPA counts it as
missing until then)."""


def recommend(
    spec: HpaSpec, current: int, ready: int, missing: int, usage: float, request: int
) -> int:
    """The raw recommendation (before stabilisation, rate limits and bounds).

    ``current`` is the scale's replica count, ``ready`` the pods with a metric, ``missing`` the
    pods without one yet (pending, or starting), ``usage`` the ready pods' total CPU usage and
    ``request`` one pod's CPU request (millicores).
    """
    if ready == 0 or request <= 0:
        return current
    ratio = usage / (ready * request) / spec.target
    if missing == 0:
        return current if abs(ratio - 1.0) <= TOLERANCE else math.ceil(ratio * ready)
    if ratio > 1.0:
        pass  # scaling up: the missing pods use nothing
    elif ratio < 1.0:  # scaling down: they use their request (or the target, above 100 %)
        usage += missing * request * max(1.0, spec.target)
    counted = ready + missing
    adjusted = usage / (counted * request) / spec.target
    if abs(adjusted - 1.0) <= TOLERANCE or (ratio - 1.0) * (adjusted - 1.0) < 0:
        return current  # too small a change, or the missing pods flip the direction
    wanted = math.ceil(adjusted * counted)
    if (adjusted < 1.0 and wanted > current) or (adjusted > 1.0 and wanted < current):
        return current
    return wanted


@dataclass
class HorizontalPodAutoscaler:
    """One HPA's controller state: its recommendations over the stabilisation window."""

    spec: HpaSpec
    history: deque[tuple[float, int]] = field(default_factory=deque)

    def desired(
        self, now: float, current: int, ready: int, missing: int, usage: float, request: int
    ) -> int:
        """The replica count the HPA sets at ``now``."""
        raw = recommend(self.spec, current, ready, missing, usage, request)
        self.history.append((now, raw))
        while self.history and self.history[0][0] < now - DOWNSCALE_STABILIZATION:
            self.history.popleft()
        if raw < current:
            raw = min(current, max(r for _, r in self.history))
        elif raw > current:
            limit = max(current * (100 + SCALE_UP_PERCENT) // 100, current + SCALE_UP_PODS)
            raw = min(raw, limit)
        return min(max(raw, self.spec.min_replicas), self.spec.max_replicas)
