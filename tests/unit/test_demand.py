"""The pods a forecast load asks for (tuner.model.demand)."""

from __future__ import annotations

import math
from dataclasses import replace

from testkit.builders import cluster, node, pod
from tuner.model.cluster import Cluster, Hpa, Workload
from tuner.model.conventions import Keys
from tuner.model.demand import (
    SCALE_CAP,
    band_scale,
    decided_by,
    demand_at,
    demand_for,
    expected_load,
    forecast_demand,
    lead_band,
    sized_for,
)
from tuner.model.forecast import Band, Basis, Forecast
from tuner.model.load import Load
from tuner.model.resources import Resources
from tuner.settings import Settings

WEB = Workload("default", "Deployment", "web")


def _cluster(replicas: int, hpa: Hpa | None) -> Cluster:
    pods = [
        pod(f"web-{i}", "n1", cpu="500m", memory="1Gi", workload="web") for i in range(replicas)
    ]
    pods.append(pod("db-0", "n1", cpu="1", memory="2Gi", workload="db"))
    return replace(cluster([node("n1", cpu="8", memory="32Gi")], pods), hpas=(hpa,) if hpa else ())


def _forecast(last: float, upper: float) -> Forecast:
    return Forecast(
        0.0, 720.0, 60.0, 0.95, Band(upper, upper, upper), Basis.DAY, 100, 1e6, (), last
    )


def test_hpa_replicas_follow_the_load_within_the_hpas_bounds() -> None:
    c = _cluster(4, Hpa("default", "web", WEB, 2, 7))
    rise = demand_at(c, 1.5)
    assert rise.workloads[WEB].now == 4 and rise.workloads[WEB].then == 6
    assert rise.added == {WEB: 2}
    assert rise.extra == Resources(1000, 2 * 1024**3)
    assert rise.requests == Resources(1000 + 6 * 500, 2 * 1024**3 + 6 * 1024**3)
    assert demand_at(c, 3.0).workloads[WEB].then == 7  # the HPA's maximum
    fall = demand_at(c, 0.25)
    assert fall.workloads[WEB].then == 2 and fall.added == {}  # the HPA's minimum
    assert fall.requests == Resources(1000 + 2 * 500, 2 * 1024**3 + 2 * 1024**3)


def test_pods_no_hpa_scales_stay_as_they_are() -> None:
    c = _cluster(4, None)
    d = demand_at(c, 2.0)
    assert d.workloads == {} and d.added == {}
    assert d.requests == Resources(1000 + 4 * 500, 2 * 1024**3 + 4 * 1024**3)


def test_the_scale_is_the_band_edge_over_the_last_known_load_capped() -> None:
    assert band_scale(_forecast(100.0, 150.0), 150.0) == 1.5
    assert band_scale(_forecast(100.0, 1e9), 1e9) == SCALE_CAP
    assert band_scale(_forecast(100.0, 0.0), 0.0) == 1 / SCALE_CAP
    assert band_scale(_forecast(0.0, 10.0), 10.0) == 1.0
    assert band_scale(_forecast(100.0, math.nan), math.nan) == 1.0


def test_within_the_hpas_tolerance_the_replicas_stay_as_they_are() -> None:
    c = _cluster(5, Hpa("default", "web", WEB, 1, 20))
    assert demand_at(c, 1.08).workloads[WEB].then == 5  # 10 % tolerance: no scale-up
    assert demand_at(c, 0.92).workloads[WEB].then == 5
    assert demand_at(c, 1.15).workloads[WEB].then == 6
    assert demand_at(c, 0.85).workloads[WEB].then == 5  # ceil(4.25)
    # the tolerance's edges are inside it, as kube-controller-manager's isWithin (1.1 - 1 is
    # a little more than 0.1 in floating point)
    assert demand_at(c, band_scale(_forecast(100.0, 110.0), 110.0)).workloads[WEB].then == 5
    assert demand_at(c, 0.9).workloads[WEB].then == 5


def test_the_reserves_placeholders_are_no_demand() -> None:
    keys = Keys()
    c = _cluster(4, Hpa("default", "web", WEB, 2, 7))
    held = pod("tuner-placeholder-1", "n1", cpu="3", memory="4Gi", workload="placeholder")
    held = replace(held, labels={keys.placeholder: "tuner-placeholder-1"}, owner_kind="")
    with_placeholder = replace(c, pods=(*c.pods, held))
    demand, band = forecast_demand(with_placeholder, _forecast(100.0, 150.0), keys.placeholder)
    assert band.upper == 150.0
    assert demand == demand_at(c, 1.5)


def test_the_peak_within_a_lead_is_the_highest_of_the_path_there_with_the_bands_share() -> None:
    peak = Band(200.0, 150.0, 260.0)
    f = Forecast(0.0, 720.0, 60.0, 0.95, peak, Basis.DAY, 100, 1e5, (100.0, 120.0, 200.0), 90.0)
    assert lead_band(f, 120.0) == Band(120.0, 90.0, 156.0)
    assert lead_band(f, 150.0) == peak  # three steps: the rise is within
    assert lead_band(f, 1.0) == Band(100.0, 75.0, 130.0)
    assert lead_band(replace(f, path=()), 120.0) == peak  # no path: the horizon's peak


def test_a_release_decides_by_the_peak_within_the_lead_only_when_the_reserve_would_act() -> None:
    peak = Band(200.0, 150.0, 260.0)
    path = (100.0, 100.0, 100.0, 200.0)
    f = Forecast(0.0, 720.0, 60.0, 0.95, peak, Basis.DAY, 100, 1e5, path, 90, calls=9, confirmed=5)
    off = Settings()
    assert decided_by(f, off) is f and decided_by(None, off) is None
    on = replace(off, forecast=replace(off.forecast, reserve_max_nodes=1))
    near = decided_by(f, on)
    assert near is not None and near.peak == Band(100.0, 75.0, 130.0)  # 3 minutes ahead
    assert replace(near, peak=peak) == f
    # a forecast whose rise calls are not proven gets no reserve: the release keeps the rise's room
    unproven = replace(f, confirmed=4)
    assert decided_by(unproven, on) is unproven


def test_the_replicas_were_sized_for_the_highest_load_of_the_hpas_stabilisation_window() -> None:
    # loads of the last minutes, oldest first; the HPA keeps the replicas of the highest of the
    # last five (300 s at a 60 s step) however far the load fell since
    recent = (300.0, 120.0, 160.0, 140.0, 110.0, 100.0)
    f = replace(_forecast(100.0, 150.0), recent=recent)
    assert sized_for(f) == 160.0  # 300 is six minutes old: past the window
    assert band_scale(f, 200.0) == 1.25  # not 2.0: the pods for 160 are there already
    assert sized_for(_forecast(100.0, 150.0)) == 100.0  # no recent load known: the last


def test_a_peak_under_the_load_the_replicas_serve_adds_no_pod() -> None:
    c = _cluster(4, Hpa("default", "web", WEB, 1, 10))
    f = replace(_forecast(100.0, 120.0), recent=(130.0, 100.0))
    demand, _ = forecast_demand(c, f, Keys("tuner.io").placeholder)
    assert demand.workloads[WEB].then == 4 and not demand.added  # 120 / 130 is in tolerance


def test_the_lookup_load_is_scaled_by_the_expected_peak_over_the_last_load() -> None:
    f = replace(_forecast(100.0, 150.0), peak=Band(150.0, 120.0, 180.0), recent=(300.0, 100.0))
    assert expected_load(Load.scalar(10.0), f) == Load.scalar(15.0)


def test_an_hpa_well_below_its_target_adds_no_pod_at_a_rise_that_leaves_it_below() -> None:
    idle = _cluster(4, Hpa("default", "web", WEB, 4, 10, usage_ratio=0.3))
    assert demand_at(idle, 1.18).added == {}  # 0.3 x 1.18 of its target: it stays at its minimum
    assert demand_at(idle, 3.0).workloads[WEB].then == 4  # 0.9: within the tolerance
    assert demand_at(idle, 4.0).workloads[WEB].then == 5  # ceil(4 x 1.2)
    unknown = _cluster(4, Hpa("default", "web", WEB, 4, 10))
    assert demand_at(unknown, 1.18).added == {WEB: 1}  # as if it sat at its target


def test_an_hpa_above_its_target_asks_for_its_own_formula_from_where_it_stands() -> None:
    hot = _cluster(4, Hpa("default", "web", WEB, 1, 20, usage_ratio=1.5))
    assert demand_at(hot, 1.0).workloads[WEB].then == 6  # already short of 2 pods
    assert demand_at(hot, 2.0).workloads[WEB].then == 12  # ceil(4 x 1.5 x 2)
    assert demand_at(hot, 0.5).workloads[WEB].then == 3  # 0.75 of its target: ceil(4 x 0.75)
    cold = _cluster(4, Hpa("default", "web", WEB, 1, 20, usage_ratio=0.5))
    assert demand_at(cold, 1.0).workloads[WEB].then == 2  # the pods its stabilisation keeps
    assert demand_at(cold, 1.5).workloads[WEB].then == 3


def test_the_hpas_ratio_counts_only_its_pods_running_and_ready() -> None:
    c = _cluster(4, Hpa("default", "web", WEB, 1, 20, usage_ratio=2.0))
    new = pod("web-new", None, cpu="500m", memory="1Gi", workload="web")
    assert demand_at(c, 1.0).workloads[WEB].then == 8
    with_pending = demand_at(replace(c, pods=(*c.pods, new)), 1.0).workloads[WEB]
    assert (with_pending.now, with_pending.then) == (5, 8)  # the pending one measured nothing


def test_a_known_metric_scales_from_the_last_load_not_the_one_the_pods_were_sized_for() -> None:
    f = replace(_forecast(100.0, 150.0), recent=(200.0, 100.0), step_s=60.0)
    assert sized_for(f) == 200.0
    known = _cluster(4, Hpa("default", "web", WEB, 1, 20, usage_ratio=1.0))
    demand, _ = forecast_demand(known, f, "placeholder")
    assert demand.workloads[WEB].then == 6  # ceil(4 x 1.0 x 150 / 100): measured at 100
    unknown = _cluster(4, Hpa("default", "web", WEB, 1, 20))
    demand, _ = forecast_demand(unknown, f, "placeholder")
    assert demand.workloads[WEB].then == 3  # ceil(4 x 150 / 200): sized for 200


def test_the_room_a_removal_keeps_is_the_more_of_the_two_estimates() -> None:
    f = replace(_forecast(100.0, 150.0), recent=(100.0,), step_s=60.0)
    idle = _cluster(4, Hpa("default", "web", WEB, 4, 10, usage_ratio=0.3))
    assert not demand_for(idle, f, 150.0).added  # the reserve's: 0.45 of its target, no pod
    demand, _ = forecast_demand(idle, f, "placeholder")
    assert demand.workloads[WEB].then == 6  # the headroom's: as if at its target, ceil(4 x 1.5)
    hot = _cluster(4, Hpa("default", "web", WEB, 1, 20, usage_ratio=1.5))
    demand, _ = forecast_demand(hot, f, "placeholder")
    assert demand.workloads[WEB].then == 9  # its own formula is the more: ceil(4 x 1.5 x 1.5)
