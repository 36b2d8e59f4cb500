"""What a forecast load asks of the cluster: the pods the HPAs would run at the forecast's peak.

Where an HPA's status gives its current utilisation (:attr:`~tuner.model.cluster.Hpa.usage_ratio`,
its metric over its target), the HPA's own formula from where it stands: at ``measured`` times
the last known load (the load that utilisation was measured at) it asks
``ceil(Ready pods × ratio × measured)``, as many as now within its tolerance
(:data:`HPA_TOLERANCE`) — so an HPA idling at its minimum well below its target adds nothing
at a rise that leaves it below. The ratio already counts the pods the HPA keeps from a higher
load of its stabilisation window (they lower it), so this one is scaled from the last load, not
from :func:`sized_for`'s. Where the utilisation is not known, as if the HPA sat at its target:
its replicas follow the load, at ``scale`` times the load they were sized for it runs
``ceil(scale × replicas)`` pods (the replicas there are now, pending ones included), as many
as now while the scale is within the tolerance. Either within the HPA's minimum and maximum.
Pods no HPA scales stay as they are. The scale is a band edge of the
forecast's peak over the load the replicas now were sized for (:func:`sized_for`: the highest
of the last five minutes, as an HPA scales down only to the highest recommendation of its
stabilisation window; the last known load alone would count the pods the HPA keeps from a
higher load of those minutes twice, once as pods now and again as the growth to the peak):
the upper edge is what the cluster must be able to hold until a node started now could serve;
each added pod asks what one of its workload's pods asks now.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from types import MappingProxyType

from tuner.model.change import templates
from tuner.model.cluster import Cluster, Hpa, Pod, Workload
from tuner.model.constraints import Constraints
from tuner.model.forecast import Band, Forecast
from tuner.model.load import Load
from tuner.model.resources import Resources
from tuner.settings import Settings

SCALE_CAP = 4.0
"""The scale is at most this factor either way (a last known load near zero)."""
HPA_TOLERANCE = 0.1
"""An HPA leaves its replicas as they are while its metric is within this share of its target
(kube-controller-manager's ``--horizontal-pod-autoscaler-tolerance``, default 0.1): a load
within it of the load now adds no pod."""
_STEP_UP = 1 + Fraction(str(HPA_TOLERANCE))
"""One plus the tolerance, exactly (the decimal, not its binary float): :func:`next_step`."""
DOWNSCALE_STABILIZATION_S = 300.0
"""An HPA scales down to the highest of its recommendations over this span
(``behavior.scaleDown.stabilizationWindowSeconds``, default 300)."""


def within_tolerance(ratio: float) -> bool:
    """Whether an HPA leaves its replicas as they are at ``ratio`` of its target:
    ``Tolerances.isWithin`` (v1.33 ``replica_calculator.go``), ``1 - 0.1 <= ratio <= 1 + 0.1``
    in floating point, so that 55 % against a 50 % target (1.1) is within it."""
    return 1.0 - HPA_TOLERANCE <= ratio <= 1.0 + HPA_TOLERANCE


@dataclass(frozen=True, slots=True)
class Replicas:
    """An HPA-scaled workload's pods now and at the forecast's band edge, and one pod's
    requests."""

    now: int
    then: int
    pod: Resources


@dataclass(frozen=True)
class Demand:
    """The pods the forecast's band edge asks for, against the pods there are."""

    scale: float
    """The band edge of the forecast's peak over the load the replicas now were sized for
    (1: no change)."""
    workloads: Mapping[Workload, Replicas]
    """Every HPA-scaled workload with at least one pod."""
    requests: Resources
    """The requests of every pod then: the HPA-scaled ones at their replicas then, the others
    as now (pending pods included)."""

    @property
    def added(self) -> Mapping[Workload, int]:
        """The pods each workload adds by then (those that grow)."""
        return MappingProxyType(
            {w: r.then - r.now for w, r in sorted(self.workloads.items()) if r.then > r.now}
        )

    @property
    def extra(self) -> Resources:
        """The requests of the pods added by then."""
        return Resources.total([_times(self.workloads[w].pod, n) for w, n in self.added.items()])


def sized_for(forecast: Forecast) -> float:
    """The load the replicas running now were sized for: the highest known total over the
    HPA's downscale stabilisation window up to the forecast's time (an HPA scales down only to
    the highest of its recommendations there, so its replicas follow the highest load of that
    span, not the last), at least the last known load."""
    steps = max(1, math.ceil(DOWNSCALE_STABILIZATION_S / forecast.step_s - 1e-9))
    return max((forecast.last, *forecast.recent[-steps:]))


def band_scale(forecast: Forecast, edge: float) -> float:
    """``edge`` of the forecast's peak over the load the replicas now were sized for
    (:func:`sized_for`): the factor the HPA-scaled replicas grow by at that load."""
    return _scale(edge, sized_for(forecast))


def _scale(load: float, reference: float) -> float:
    """``load`` over ``reference`` within :data:`SCALE_CAP` (1 when either is 0 or unknown)."""
    if reference <= 0 or not math.isfinite(load):
        return 1.0
    return min(max(load / reference, 1 / SCALE_CAP), SCALE_CAP)


def lead_band(forecast: Forecast, lead_s: float) -> Band:
    """The peak expected over ``(at, at + lead_s]`` only (the highest of the forecast's path
    there), with the band of the whole horizon's peak as a share of it: a rise due later is not
    in it (a later forecast, or a reserve held for it, provides for that one)."""
    peak = forecast.peak
    steps = max(1, math.ceil(lead_s / forecast.step_s - 1e-9))
    expected = min(max(forecast.path[:steps], default=peak.expected), peak.expected)
    if peak.expected <= 0:
        return peak
    share = expected / peak.expected
    return Band(expected, peak.lower * share, peak.upper * share)


def decided_by(forecast: Forecast | None, settings: Settings) -> Forecast | None:
    """The forecast a release decides by (the headroom a removal leaves, the decline rule's
    agreement): with provisioning ahead on (``forecast.reserve_max_nodes``) and a forecast that
    has proven it calls rises (:attr:`~tuner.model.forecast.Forecast.proven`, as the reserve
    asks), its peak over a node's start-up plus a retry only (:func:`lead_band`), since a rise
    due later is the reserve's to provision when it is that near
    (:func:`~tuner.plan.reserve.plan_reserve` holds room for the expected load over that lead);
    else the forecast as it is (a reserve that will not act is not counted on)."""
    if forecast is None or settings.forecast.reserve_max_nodes <= 0 or not forecast.proven:
        return forecast
    return replace(forecast, peak=lead_band(forecast, settings.forecast.lead(settings.windows)))


def demand_at(
    cluster: Cluster, scale: float, measured: float | None = None, *, cautious: bool = False
) -> Demand:
    """The pods the cluster runs at a load ``scale`` times the one the replicas now were sized
    for and ``measured`` times the last known load (where the HPAs measured their metrics;
    ``scale`` when not given): each HPA as :func:`_wanted` asks (``cautious``: the more of its
    two estimates)."""
    counts, ready = cluster.pods_per_workload, cluster.ready_per_workload
    pods = cluster.workload_requests
    workloads: dict[Workload, Replicas] = {}
    growth = scale if measured is None else measured
    for hpa in cluster.hpas:
        now = counts.get(hpa.target, 0)
        if now == 0:
            continue
        wanted = _wanted(hpa, now, ready.get(hpa.target, 0), scale, growth, cautious)
        then = min(max(wanted, hpa.min_replicas), hpa.max_replicas)
        workloads[hpa.target] = Replicas(now, max(then, 1), pods[hpa.target])
    total = cluster.total_requests
    for r in workloads.values():
        total = total + _times(r.pod, r.then - r.now)  # integers: grown less shrunk, exactly
    return Demand(scale, MappingProxyType(dict(sorted(workloads.items()))), total)


def _wanted(hpa: Hpa, now: int, ready: int, scale: float, measured: float, cautious: bool) -> int:
    """The replicas ``hpa`` asks for (before its bounds), running ``now`` pods (``ready`` of
    them Ready), at ``scale`` times the load they were sized for and ``measured`` times the
    load its metric was measured at. With its usage ratio known, its own formula from where it
    stands: ``ceil(ready × ratio × measured)``, as many as now within the tolerance, and never
    fewer than now on a rise nor more on a fall (its pods not Ready count as using nothing, or
    are left out); else as if it sat at its target: ``ceil(now × scale)``. ``cautious``: the
    more of the two where the ratio is known (the status is one sync old and the utilisation
    of an HPA below its target can climb faster than the load: room kept for a removal errs on
    the side of more pods)."""
    at_target = now if within_tolerance(scale) else math.ceil(now * scale - 1e-9)
    if hpa.usage_ratio is None or ready == 0:
        return at_target
    ratio = hpa.usage_ratio * measured
    if within_tolerance(ratio):
        formula = now
    else:
        wanted = math.ceil(ready * ratio - 1e-9)
        formula = max(wanted, now) if ratio > 1 else min(wanted, now)
    return max(formula, at_target) if cautious else formula


def next_step(replicas: int, most: int) -> int:
    """The pods an HPA running ``replicas`` adds at its smallest step up (its metric just past
    the tolerance: ``ceil(replicas × (1 + tolerance))`` with the ratio just above it), within
    its maximum ``most``; at least one pod below the maximum."""
    above = replicas * _STEP_UP.numerator // _STEP_UP.denominator + 1  # the floor, in integers
    return max(min(above, most) - replicas, 0)


def counted_alike(rules: Constraints) -> bool:
    """Whether pods placed by ``rules`` fit by their requests alone on the nodes their rules
    admit: no rule that counts other pods, ports, volumes or extended resources."""
    return not (
        rules.anti_affinity
        or rules.affinity
        or rules.spread
        or rules.host_ports
        or rules.volumes
        or rules.extended
    )


def next_steps(cluster: Cluster) -> tuple[tuple[Pod, int], ...]:
    """For every HPA-scaled workload below its maximum, one of its pods and the pods its next
    step up adds (:func:`next_step`), less the steps that fit whenever another does: of the
    workloads placed by the same rules that fit by their requests alone
    (:func:`counted_alike`), a step is left out when another asks at least as much CPU and
    memory for at least as many pods."""
    counts = cluster.pods_per_workload
    first = templates(cluster)
    steps: dict[object, tuple[Pod, int]] = {}
    for hpa in cluster.hpas:
        one = first.get(hpa.target)
        added = next_step(counts.get(hpa.target, 0), hpa.max_replicas)
        if one is None or added == 0:
            continue
        alike = counted_alike(one.constraints)
        labels = None if alike else (one.namespace, tuple(sorted(one.labels.items())))
        steps.setdefault((one.requests, one.constraints, labels, added), (one, added))
    return tuple(s for s in steps.values() if not _dominated(s, steps.values()))


def _dominated(step: tuple[Pod, int], steps: Iterable[tuple[Pod, int]]) -> bool:
    pod, count = step
    if not counted_alike(pod.constraints):
        return False
    ask = pod.requests
    return any(
        other.constraints == pod.constraints
        and other.requests.cpu >= ask.cpu
        and other.requests.memory >= ask.memory
        and n >= count
        and (other.requests, n) != (ask, count)
        for other, n in steps
    )


def _times(pod: Resources, count: int) -> Resources:
    return Resources(pod.cpu * count, pod.memory * count)


def forecast_demand(cluster: Cluster, forecast: Forecast, placeholder: str) -> tuple[Demand, Band]:
    """The demand at the upper edge of the forecast's peak, and the band it came from: what a
    removal must leave room for, so each HPA asks the more of its two estimates (``cautious``,
    :func:`demand_for`). Pods labelled ``placeholder`` (the reserve's, which hold room for this
    very demand) are no demand."""
    real = tuple(p for p in cluster.pods if placeholder not in p.labels)
    if len(real) < len(cluster.pods):
        cluster = replace(cluster, pods=real)
    return demand_for(cluster, forecast, forecast.peak.upper, cautious=True), forecast.peak


def demand_for(
    cluster: Cluster, forecast: Forecast, edge: float, *, cautious: bool = False
) -> Demand:
    """The demand at ``edge`` of the forecast's peak: scaled from the load the replicas now
    were sized for (:func:`band_scale`) where an HPA's metric is not known, from the last known
    load where it is (the metric was measured at that load, and its ratio to the target already
    counts the pods kept from a higher one); ``cautious``: the more of the two there."""
    scale, measured = band_scale(forecast, edge), _scale(edge, forecast.last)
    return demand_at(cluster, scale, measured, cautious=cautious)


def expected_load(load: Load, forecast: Forecast | None) -> Load:
    """The load expected next, which the cheapest previous deployment is looked up for:
    ``load`` (the window's) with every dimension scaled by the forecast's expected peak over its
    last known load; ``load`` itself without a forecast."""
    if forecast is None:
        return load
    scale = _scale(forecast.peak.expected, forecast.last)
    return Load(MappingProxyType({key: value * scale for key, value in load.values.items()}))
