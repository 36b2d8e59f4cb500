"""The Horizontal Pod Autoscaler's replica calculation (autoscaling/v2, CPU utilization).

- usage ratio = (CPU usage of the pods with a usable metric / their requests) / target;
- pods without a usable metric are of two kinds (kube-controller-manager v1.33
  ``pkg/controller/podautoscaler/replica_calculator.go`` ``groupPods``): *unready* ones (Pending
  or starting) and *missing* ones (Ready, but without a usable sample yet: in this model, Ready
  for less than :data:`METRIC_DELAY`, which covers metrics-server's first rate and the
  controller's rule that a sample be taken a whole window after the pod became Ready). Scaling
  up, both count as using nothing; scaling down, missing pods count as using their whole
  request (or the target, if above 100 %) and unready ones are left out; if that flips the
  direction (or lands in the tolerance) nothing changes;
- the ratio is taken as the controller takes it (:func:`usage_ratio`): each pod's usage in
  whole millicores, rounded up, and the utilisation as a whole percentage, truncated;
- within the tolerance (``0.9 <= ratio <= 1.1``, ``Tolerances.isWithin``: a ratio of exactly
  1.1 is within it) nothing changes;
- desired = ceil(ratio * pods counted);
- scale-up is limited per 15 s period to max(+100 %, +4 pods); scale-down is stabilised over
  the last 300 s (the highest recommendation in the window wins) and limited to -100 %;
- the result is clamped to [minReplicas, maxReplicas].

The usage the controller reads is metrics-server's latest sample: each pod's CPU averaged over
metrics-server's resolution (15 s, ``--metric-resolution`` as kwokctl and the metrics-server
manifests set it), sampled on average half a resolution before the HPA's sync (the two are not
aligned), so it lags the load (:data:`USAGE_LAGS`). A new pod serves its share of the load from
when it is Ready, but the HPA has no usable sample of it for :data:`METRIC_DELAY` after that, so
the pods it does measure carry less than the whole load (the caller passes their share).

Defaults are those of the HPA controller (``pkg/controller/podautoscaler/replica_calculator.go``)
and of ``autoscaling/v2`` ``behavior``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from tuner.model.demand import within_tolerance
from tuner.sim.workloads import HpaSpec

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
FRESH_CONTAINER_MIN = 10.0
"""metrics-server v0.8.0 (``pkg/storage/pod.go`` ``freshContainerMinMetricsResolution``): a
container's first scrape gives it a rate (from its start time) only when it comes at least 10 s,
and less than one resolution, after the start; else its rate needs a second scrape."""
METRIC_DELAY = (
    (METRIC_RESOLUTION - FRESH_CONTAINER_MIN)
    / METRIC_RESOLUTION
    * (FRESH_CONTAINER_MIN + METRIC_RESOLUTION)
    / 2
    + FRESH_CONTAINER_MIN / METRIC_RESOLUTION * (METRIC_RESOLUTION + FRESH_CONTAINER_MIN / 2)
    + METRIC_RESOLUTION / 2
)
"""Seconds after a pod is Ready before the HPA has a usable sample of it (25 s): metrics-server's
first scrape comes uniformly within a resolution of the start; if it comes 10 s or more after it
(a third of the time, 12.5 s on average) it gives the first rate, else the next scrape does (20 s
on average), 17.5 s in all; that sample's timestamp is at least a window after the Ready
transition, as the HPA's ``cpu-initialization-period`` rule asks (``groupPods``), and the HPA
reads it on average half a resolution after the scrape (+7.5 s). Until then the HPA counts the
pod as missing."""


def samples(usage: float, pods: int) -> int:
    """The total of ``pods`` pods' samples sharing ``usage`` millicores evenly, as the HPA
    reads them: each pod's ``MilliValue()``, rounded up to a whole millicore
    (kube-controller-manager v1.33 ``pkg/controller/podautoscaler/metrics/client.go``)."""
    return pods * math.ceil(usage / pods - 1e-9) if pods and usage > 0 else 0


def usage_ratio(total: int, pods: int, request: int, target: float) -> float:
    """The HPA's usage ratio for ``pods`` pods of ``request`` millicores whose samples total
    ``total`` millicores: the utilisation as a whole percentage, truncated, over the target
    percentage (v1.33 ``metrics/utilization.go`` ``GetResourceUtilizationRatio``:
    ``int32(total * 100 / requests)``)."""
    return _percent(total, pods, request) / round(target * 100)


def _percent(total: int, pods: int, request: int) -> int:
    return total * 100 // (pods * request)


def recommend(
    spec: HpaSpec,
    current: int,
    ready: int,
    missing: int,
    usage: float,
    request: int,
    unready: int = 0,
) -> int:
    """The raw recommendation (before stabilisation, rate limits and bounds).

    ``current`` is the scale's replica count, ``ready`` the pods with a usable metric,
    ``missing`` the running pods without one yet, ``unready`` the pods not running yet
    (pending, or starting), ``usage`` the ready pods' total CPU usage and ``request`` one
    pod's CPU request (millicores).
    """
    if ready == 0 or request <= 0:
        return current
    total = samples(usage, ready)
    ratio = usage_ratio(total, ready, request, spec.target)
    up_with_unready = unready > 0 and ratio > 1.0
    if not up_with_unready and missing == 0:
        return current if within_tolerance(ratio) else math.ceil(ratio * ready)
    counted = ready
    if ratio > 1.0:  # scaling up: missing and unready pods use nothing
        counted += missing + unready
    elif ratio < 1.0:  # scaling down: missing pods use their request (or the target, if
        # above 100 %); unready ones are left out
        total += missing * (request * max(100, round(spec.target * 100)) // 100)
        counted += missing
    adjusted = usage_ratio(total, counted, request, spec.target)
    if within_tolerance(adjusted) or (ratio - 1.0) * (adjusted - 1.0) < 0:
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
    utilization: int | None = None
    """The average utilisation of its last sync (``status.currentMetrics``): of the pods with a
    usable metric, as :func:`usage_ratio` takes it; None before one was measured."""

    @property
    def usage_ratio(self) -> float | None:
        """Its status's utilisation over its target (None when not measured)."""
        if self.utilization is None:
            return None
        return self.utilization / round(self.spec.target * 100)

    def desired(
        self,
        now: float,
        current: int,
        ready: int,
        missing: int,
        usage: float,
        request: int,
        unready: int = 0,
    ) -> int:
        """The replica count the HPA sets at ``now`` (arguments as :func:`recommend`'s)."""
        raw = recommend(self.spec, current, ready, missing, usage, request, unready)
        if ready and request > 0:
            self.utilization = _percent(samples(usage, ready), ready, request)
        history = self.history
        history.append((now, raw))
        oldest = now - DOWNSCALE_STABILIZATION
        while history and history[0][0] < oldest:
            history.popleft()
        if raw < current:
            raw = min(current, max(r for _, r in history))
        elif raw > current:
            limit = max(current * (100 + SCALE_UP_PERCENT) // 100, current + SCALE_UP_PODS)
            raw = min(raw, limit)
        return min(max(raw, self.spec.min_replicas), self.spec.max_replicas)
