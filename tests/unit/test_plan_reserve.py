"""The room held ahead of a forecast rise, decided purely (tuner.plan.reserve)."""

from __future__ import annotations

from dataclasses import replace

from testkit.builders import cluster, node, pod
from tuner.model.cluster import Cluster, Hpa, Pod, Workload
from tuner.model.constraints import Constraints
from tuner.model.forecast import Band, Basis, Forecast
from tuner.model.pools import discover
from tuner.model.quantity import GIB
from tuner.model.resources import Resources
from tuner.plan.reserve import plan_reserve
from tuner.settings import Settings, settings_from_dict

WEB = Workload("default", "Deployment", "web")
SMALL = {"cloud.google.com/gke-nodepool": "small"}
LARGE = {"cloud.google.com/gke-nodepool": "large"}


def _forecast(last: float, upper: float, at: float = 1000.0) -> Forecast:
    band = Band(upper, upper, upper)
    return Forecast(at, 720.0, 60.0, 0.95, band, Basis.DAY, 100, 1e6, (), last)


def _cluster(web: int, *, extra: list[Pod] | None = None, web_pod: Pod | None = None) -> Cluster:
    """Two nodes of pool small (2 CPU) holding ``web`` pods of 500m and an empty-ish node of
    pool large (8 CPU) with one 7-CPU database pod; the HPA may take web to 40."""
    nodes = [
        node("s1", cpu="2", memory="8Gi", labels=SMALL, instance_type="e2-standard-2"),
        node("s2", cpu="2", memory="8Gi", labels=SMALL, instance_type="e2-standard-2"),
        node("l1", cpu="8", memory="32Gi", labels=LARGE, instance_type="e2-standard-8"),
    ]
    like = web_pod or pod("web-x", None, cpu="500m", memory="1Gi", workload="web")
    pods = [replace(like, name=f"web-{i}", node="s1" if i < 4 else "s2") for i in range(web)]
    pods.append(pod("db-0", "l1", cpu="7", memory="4Gi", workload="db"))
    pods += extra or []
    return replace(cluster(nodes, pods), hpas=(Hpa("default", "web", WEB, 1, 40),))


def _settings(**forecast: object) -> Settings:
    return settings_from_dict({"forecast": {"reserve_max_nodes": 3, **forecast}})


def test_a_rise_that_fits_in_the_nodes_there_are_reserves_nothing() -> None:
    c = _cluster(6)  # s1 full (4 x 500m), s2 holds 2: room for 2 more, l1 for 2 more
    reserve = plan_reserve(c, discover(c, _settings()), _forecast(100, 150), _settings(), 1000.0)
    assert reserve.nodes == ()  # 6 -> 9 web pods: 3 more, room for 4
    assert "all fit" in reserve.reason
    assert (reserve.made_at, reserve.until) == (1000.0, 1000.0 + 720.0)


def test_a_rise_that_does_not_fit_reserves_nodes_of_the_cheapest_pool_that_runs_the_pods() -> None:
    c = _cluster(6)
    reserve = plan_reserve(c, discover(c, _settings()), _forecast(100, 250), _settings(), 1000.0)
    # 6 -> 15 web pods: 9 more; 4 fit (2 on s2, 2 on l1); 5 x 500m need new nodes: the
    # cheapest pool is small (2 CPU: 4 pods each), so two of it, 2000m and 500m.
    assert [n.pool for n in reserve.nodes] == ["small", "small"]
    assert [n.requests for n in reserve.nodes] == [
        Resources(2000, 4 * GIB),
        Resources(500, GIB),
    ]
    assert "2 of small" in reserve.reason


def test_a_pod_no_small_node_runs_goes_to_the_pool_whose_template_runs_it() -> None:
    big = pod("web-x", None, cpu="3", memory="1Gi", workload="web")  # more than a small node
    c = _cluster(0, web_pod=big)
    c = replace(c, pods=(*c.pods, replace(big, name="web-0", node="l1")))
    reserve = plan_reserve(c, discover(c, _settings()), _forecast(100, 200), _settings(), 1000.0)
    # 1 -> 2 web pods of 3 CPU: l1 has 8 - 7 - 3 < 0 left, a small node is too small.
    assert [(n.pool, n.requests) for n in reserve.nodes] == [("large", Resources(3000, GIB))]


def test_the_reserve_is_capped_and_says_what_it_left_out() -> None:
    c = _cluster(6)
    capped = _settings(reserve_max_nodes=1)
    reserve = plan_reserve(c, discover(c, capped), _forecast(100, 250), capped, 1000.0)
    assert [(n.pool, n.requests) for n in reserve.nodes] == [("small", Resources(2000, 4 * GIB))]
    assert "1 pod(s) left out: forecast.reserve_max_nodes 1 reached" in reserve.reason
    off = _settings(reserve_max_nodes=0)
    assert plan_reserve(c, discover(c, off), _forecast(100, 250), off, 1000.0).nodes == ()


def test_a_pod_whose_constraints_no_pool_template_meets_is_left_out() -> None:
    gpu = pod(
        "web-x",
        None,
        cpu="500m",
        memory="1Gi",
        workload="web",
        constraints=Constraints(node_selector=(("accelerator", "gpu"),)),
    )
    c = _cluster(0, web_pod=gpu)  # the HPA's web pods run nowhere here: one is pending
    c = replace(c, pods=(*c.pods, replace(gpu, name="web-0", node=None)))
    reserve = plan_reserve(c, discover(c, _settings()), _forecast(100, 300), _settings(), 1000.0)
    assert reserve.nodes == ()
    assert "no pool that may grow has a node that would run default/Deployment/web" in (
        reserve.reason
    )


def test_a_pool_at_its_maximum_is_not_grown() -> None:
    c = _cluster(6)
    full = settings_from_dict(
        {"pools": {"small": {"max": 2}}, "forecast": {"reserve_max_nodes": 3}}
    )
    reserve = plan_reserve(c, discover(c, full), _forecast(100, 250), full, 1000.0)
    assert {n.pool for n in reserve.nodes} == {"large"}  # small may not grow: the dearer pool
    assert [n.requests for n in reserve.nodes] == [Resources(2500, 5 * GIB)]


def test_pending_pods_take_the_room_first() -> None:
    pending = [pod(f"batch-{i}", None, cpu="500m", memory="1Gi") for i in range(4)]
    c = _cluster(6, extra=pending)  # the 4 pending pods take the room of 4 web pods
    reserve = plan_reserve(c, discover(c, _settings()), _forecast(100, 150), _settings(), 1000.0)
    assert [(n.pool, n.requests) for n in reserve.nodes] == [("small", Resources(1500, 3 * GIB))]


def test_a_node_a_placeholder_brought_counts_as_reserved_so_the_same_forecast_asks_again() -> None:
    c = _cluster(6)
    s = _settings()
    first = plan_reserve(c, discover(c, s), _forecast(100, 250), s, 1000.0)
    held = pod(
        "tuner-placeholder-1",
        "s3",
        cpu="500m",
        memory="1Gi",
        workload="tuner-placeholder-1",
        kind="",
        labels={"tuner.dev/placeholder": "tuner-placeholder-1"},
    )
    joined = node("s3", cpu="2", memory="8Gi", labels=SMALL, instance_type="e2-standard-2")
    # The node it brought: its free room beside the placeholder is not the forecast's either.
    c = replace(c, nodes=(*c.nodes, joined), pods=(*c.pods, held))
    again = plan_reserve(c, discover(c, s), _forecast(100, 250), s, 1000.0)
    assert again.nodes == first.nodes
    pending = replace(held, node=None)  # a pending placeholder holds nothing yet
    c = replace(c, nodes=c.nodes[:-1], pods=(*c.pods[:-1], pending))
    assert plan_reserve(c, discover(c, s), _forecast(100, 250), s, 1000.0).nodes == first.nodes


def test_a_forecast_that_foresees_nothing_reserves_nothing() -> None:
    c = _cluster(6)
    s = _settings()
    level = replace(_forecast(100, 250), basis=Basis.LEVEL)  # under a day of history
    reserve = plan_reserve(c, discover(c, s), level, s, 1000.0)
    assert reserve.nodes == () and "nothing foreseen (the recent level only" in reserve.reason
    unmeasured = replace(_forecast(100, 250), errors=10)  # a band widened, not measured
    assert plan_reserve(c, discover(c, s), unmeasured, s, 1000.0).nodes == ()


def test_no_forecast_or_no_rise_reserves_nothing() -> None:
    c = _cluster(6)
    s = _settings()
    none = plan_reserve(c, discover(c, s), None, s, 1000.0)
    assert none.nodes == () and none.until == 1000.0
    fall = plan_reserve(c, discover(c, s), _forecast(100, 80), s, 1000.0)
    assert fall.nodes == () and "no sure rise" in fall.reason


def _path_forecast(last: float, path: tuple[float, ...], upper: float) -> Forecast:
    """A forecast made at 1000 s with the expected load ``path`` minute by minute."""
    band = Band(max(path), max(path), upper)
    return Forecast(1000.0, 720.0, 60.0, 0.95, band, Basis.DAY, 100, 1e6, path, last)


def test_a_rise_due_after_a_start_up_and_a_retry_reserves_nothing_yet() -> None:
    c, s = _cluster(6), _settings()
    late = _path_forecast(100, (100, 100, 100, 250, 250), 300)  # due at 4 min; the lead is 3

    reserve = plan_reserve(c, discover(c, s), late, s, 1000.0)

    assert reserve.nodes == ()
    assert "expected over the next 180 s" in reserve.reason
    assert "no sure rise" in reserve.reason  # the lead's expected load is the load now
    due = _path_forecast(100, (100, 100, 250, 250, 250), 300)  # due at 3 min
    assert len(plan_reserve(c, discover(c, s), due, s, 1000.0).nodes) == 2


def test_the_reserve_asks_for_the_expected_load_not_the_upper_band_which_only_caps_it() -> None:
    c, s = _cluster(6), _settings()
    expected = _path_forecast(100, (150, 150, 150), 400)  # 9 pods, room for 10: fits

    assert plan_reserve(c, discover(c, s), expected, s, 1000.0).nodes == ()
    capped = _path_forecast(100, (400, 400, 400), 150)  # the band says at most 150
    assert plan_reserve(c, discover(c, s), capped, s, 1000.0).nodes == ()


def test_only_a_rise_that_holds_at_the_lower_edge_of_the_band_reserves() -> None:
    """A false alarm pays a node for nothing: a rise is reserved for only when the band's lower
    edge over the lead is above the load now (by the measured errors, the load then fails to
    rise at most 1 - quantile of the time)."""
    c, s = _cluster(6), _settings()
    sure = _path_forecast(100, (250, 250, 250), 300)  # its band: 250 to 300
    assert len(plan_reserve(c, discover(c, s), sure, s, 1000.0).nodes) == 2
    unsure = replace(sure, peak=Band(250, 90, 300))  # the lower edge under the load now
    reserve = plan_reserve(c, discover(c, s), unsure, s, 1000.0)
    assert reserve.nodes == () and "no sure rise" in reserve.reason
