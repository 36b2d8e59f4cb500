"""The room held ahead of a forecast rise, decided purely (tuner.plan.reserve)."""

from __future__ import annotations

from dataclasses import replace

from testkit.builders import cluster, node, pod
from tuner.model.cluster import Cluster, Hpa, Pod, Workload
from tuner.model.constraints import Constraints
from tuner.model.forecast import MIN_CONFIRMED, Band, Basis, Forecast
from tuner.model.pools import discover
from tuner.model.quantity import GIB
from tuner.model.reserve import Placeholder
from tuner.model.resources import Resources
from tuner.plan.reserve import awaits_its_node, plan_reserve, releases
from tuner.settings import Settings, settings_from_dict

WEB = Workload("default", "Deployment", "web")
PROVEN = {"calls": 2 * MIN_CONFIRMED, "confirmed": MIN_CONFIRMED}
"""A forecast that has called rises the load confirmed (enough to be acted on)."""
SMALL = {"cloud.google.com/gke-nodepool": "small"}
LARGE = {"cloud.google.com/gke-nodepool": "large"}


def _forecast(last: float, upper: float, at: float = 1000.0) -> Forecast:
    band = Band(upper, upper, upper)
    return Forecast(at, 720.0, 60.0, 0.95, band, Basis.DAY, 100, 1e6, (), last, **PROVEN)


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


def test_a_pool_markedly_cheaper_per_pod_held_is_opened_instead_of_the_cheapest_node() -> None:
    # A small node at 0.085 an hour for 2 CPU, a large one at 0.268 for 8: the large node holds
    # a 500m pod for a fifth less (0.0168 against 0.0213), so the rise's pods go there.
    c = _cluster(6)
    prices = {"e2-standard-2": 0.085, "e2-standard-8": 0.268}
    settings = settings_from_dict(
        {"forecast": {"reserve_max_nodes": 3}, "pricing": {"node_types": prices}}
    )
    reserve = plan_reserve(c, discover(c, settings), _forecast(100, 250), settings, 1000.0)
    assert [n.pool for n in reserve.nodes] == ["large"]
    assert reserve.nodes[0].requests == Resources(2500, 5 * GIB)
    # At 0.075 for the small node the large one holds a pod for only a tenth less: the smaller
    # node, whose false alarm costs less, is opened.
    prices["e2-standard-2"] = 0.075
    settings = settings_from_dict(
        {"forecast": {"reserve_max_nodes": 3}, "pricing": {"node_types": prices}}
    )
    reserve = plan_reserve(c, discover(c, settings), _forecast(100, 250), settings, 1000.0)
    assert [n.pool for n in reserve.nodes] == ["small", "small"]


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


def test_a_forecast_whose_rise_calls_are_not_proven_reserves_nothing() -> None:
    c, s = _cluster(6), _settings()
    unproven = replace(_forecast(100, 250), calls=20, confirmed=MIN_CONFIRMED - 1)
    reserve = plan_reserve(c, discover(c, s), unproven, s, 1000.0)
    assert reserve.nodes == ()
    assert f"{MIN_CONFIRMED - 1} of its 20 past rise calls confirmed" in reserve.reason
    proven = replace(unproven, confirmed=MIN_CONFIRMED)
    assert len(plan_reserve(c, discover(c, s), proven, s, 1000.0).nodes) == 2


def _measured(c: Cluster, ratio: float) -> Cluster:
    """``c`` with web's HPA measuring ``ratio`` of its target at the load now."""
    return replace(c, hpas=(replace(c.hpas[0], usage_ratio=ratio),))


def test_the_reserve_holds_room_for_the_pods_the_rise_adds_not_for_the_hpas_step_now() -> None:
    c, s = _measured(_cluster(6), 1.5), _settings()  # at the load now the HPA asks 9 pods
    reserve = plan_reserve(c, discover(c, s), _forecast(100, 120), s, 1000.0)
    # at 120 it asks ceil(6 x 1.5 x 1.2) = 11: the rise adds 2 beyond the 9, and room for 4
    assert reserve.nodes == () and "2 pods added, all fit" in reserve.reason


def test_no_forecast_or_no_rise_reserves_nothing() -> None:
    c = _cluster(6)
    s = _settings()
    none = plan_reserve(c, discover(c, s), None, s, 1000.0)
    assert none.nodes == () and none.until == 1000.0
    fall = plan_reserve(c, discover(c, s), _forecast(100, 80), s, 1000.0)
    assert fall.nodes == () and "the rise adds no pod" in fall.reason


def _path_forecast(last: float, path: tuple[float, ...], upper: float) -> Forecast:
    """A forecast made at 1000 s with the expected load ``path`` minute by minute."""
    band = Band(max(path), max(path), upper)
    return Forecast(1000.0, 720.0, 60.0, 0.95, band, Basis.DAY, 100, 1e6, path, last, **PROVEN)


def test_a_rise_due_after_a_start_up_and_a_retry_reserves_nothing_yet() -> None:
    c, s = _cluster(6), _settings()
    late = _path_forecast(100, (100, 100, 100, 250, 250), 300)  # due at 4 min; the lead is 3

    reserve = plan_reserve(c, discover(c, s), late, s, 1000.0)

    assert reserve.nodes == ()
    assert "expected over the next 180 s" in reserve.reason
    assert "the rise adds no pod" in reserve.reason  # the lead's expected load is the load now
    due = _path_forecast(100, (100, 100, 250, 250, 250), 300)  # due at 3 min
    assert len(plan_reserve(c, discover(c, s), due, s, 1000.0).nodes) == 2


def test_the_reserve_asks_for_the_expected_load_not_the_upper_band_which_only_caps_it() -> None:
    c, s = _cluster(6), _settings()
    expected = _path_forecast(100, (150, 150, 150), 400)  # 9 pods, room for 10: fits

    assert plan_reserve(c, discover(c, s), expected, s, 1000.0).nodes == ()
    capped = _path_forecast(100, (400, 400, 400), 150)  # the band says at most 150
    assert plan_reserve(c, discover(c, s), capped, s, 1000.0).nodes == ()


def test_the_expected_rise_reserves_however_low_the_lower_edge_of_the_band() -> None:
    """The release decides by the band over the lead only while reserving
    (:func:`~tuner.model.demand.decided_by`), counting on the reserve for a rise due later: so
    the reserve holds room for the rise the forecast expects, not only for one its band's lower
    edge holds too (on a noisy load that edge is under the load now nearly always, and nothing
    was held while the release left no room for the rise)."""
    c, s = _cluster(6), _settings()
    sure = _path_forecast(100, (250, 250, 250), 300)  # its band: 250 to 300
    assert len(plan_reserve(c, discover(c, s), sure, s, 1000.0).nodes) == 2
    for lower in (90, 105, 150):  # under the load now; within the HPA's tolerance; fits
        unsure = replace(sure, peak=Band(250, lower, 300))
        reserve = plan_reserve(c, discover(c, s), unsure, s, 1000.0)
        assert reserve.nodes == plan_reserve(c, discover(c, s), sure, s, 1000.0).nodes


PLACEHOLDER = "tuner.dev/placeholder"


def _placeholder(name: str, on: str | None) -> Pod:
    labels = {PLACEHOLDER: name}
    return pod(name, on, cpu="500m", memory="1Gi", workload=name, kind="", labels=labels)


def _with_reserve_node(*on_it: Pod, nodes: int = 1) -> Cluster:
    """``_cluster(6)`` and ``nodes`` new nodes r1.. of pool small, each with a DaemonSet pod, a
    placeholder ph-<i> and ``on_it`` (on r1)."""
    c = _cluster(6)
    new = [
        node(f"r{i}", cpu="2", memory="8Gi", labels=SMALL, instance_type="e2-standard-2")
        for i in range(1, nodes + 1)
    ]
    added = [
        p
        for i in range(1, nodes + 1)
        for p in (
            pod(f"agent-r{i}", f"r{i}", workload="agent", kind="DaemonSet"),
            _placeholder(f"ph-{i}", f"r{i}"),
        )
    ]
    return replace(c, nodes=(*c.nodes, *new), pods=(*c.pods, *added, *on_it))


def _held(name: str, on: str | None) -> Placeholder:
    return Placeholder(name, "small", 2000.0, on)


def _releases(c: Cluster, *leaving: Placeholder, removal: str = "command") -> dict[str, str | None]:
    s = _settings()
    return releases(leaving, c, discover(c, s), s, removal)


def test_a_reserve_node_holding_only_daemonset_pods_and_its_placeholder_is_released() -> None:
    c = _with_reserve_node()
    assert _releases(c, _held("ph-1", "r1")) == {"r1": None}
    assert _releases(c, _held("ph-1", "r1"), removal="delete-node") == {"r1": None}
    assert _releases(c, _held("ph-1", "r1"), removal="autoscaler") == {}  # the CA's, as before
    assert _releases(c, _held("ph-1", None)) == {}  # pending: no node to release


def test_a_reserve_node_a_real_pod_or_another_placeholder_took_is_kept() -> None:
    taken = _with_reserve_node(pod("web-9", "r1", cpu="500m", memory="1Gi", workload="web"))
    assert _releases(taken, _held("ph-1", "r1")) == {"r1": "node r1 holds pod default/web-9"}
    other = _with_reserve_node(_placeholder("ph-9", "r1"))
    assert _releases(other, _held("ph-1", "r1")) == {"r1": "node r1 holds another placeholder"}
    both = (_held("ph-1", "r1"), _held("ph-9", "r1"))
    assert _releases(other, *both) == {"r1": None}  # both go: released once


def test_a_reserve_node_a_pending_pod_would_take_is_kept() -> None:
    fits = pod("batch-0", None, cpu="1", memory="1Gi")  # fits nowhere else: s1, s2 and l1 full
    c = _with_reserve_node(fits)
    c = replace(c, pods=(*c.pods, pod("web-8", "s2", cpu="1", memory="1Gi", workload="web")))
    verdict = _releases(c, _held("ph-1", "r1"))
    assert verdict == {"r1": "pending pod default/batch-0 fits on node r1"}
    too_big = _with_reserve_node(pod("batch-1", None, cpu="3", memory="1Gi"))
    assert _releases(too_big, _held("ph-1", "r1")) == {"r1": None}


def test_no_reserve_node_goes_below_its_pools_minimum_or_when_annotated_do_not_disrupt() -> None:
    c = _with_reserve_node(nodes=2)  # pool small: s1, s2, r1, r2
    s = settings_from_dict({"forecast": {"reserve_max_nodes": 3}, "pools": {"small": {"min": 3}}})
    pools = discover(c, s)
    leaving = (_held("ph-1", "r1"), _held("ph-2", "r2"))
    verdict = releases(leaving, c, pools, s, "command")
    assert verdict == {"r1": None, "r2": "pool small is at its minimum"}
    marked = replace(c.nodes[3], annotations={"karpenter.sh/do-not-disrupt": "true"})
    c = replace(c, nodes=(*c.nodes[:3], marked, *c.nodes[4:]))
    assert _releases(c, _held("ph-1", "r1"))["r1"] == (
        "node r1: annotated karpenter.sh/do-not-disrupt=true"
    )


def test_a_pending_placeholder_no_reserve_asks_for_awaits_its_node_for_a_start_up() -> None:
    s = _settings(node_startup_s=120)
    wait = 120 + s.windows.retry_s * 2
    pending = _held("ph-1", None)
    assert awaits_its_node(pending, 1000.0, 1000.0 + wait, s, "command")
    assert not awaits_its_node(pending, 1000.0, 1000.0 + wait + 1, s, "command")  # not coming
    assert not awaits_its_node(pending, 1000.0, 1000.0, s, "autoscaler")
    assert not awaits_its_node(pending, None, 1000.0, s, "command")  # not this keeper's
    assert not awaits_its_node(_held("ph-1", "r1"), 1000.0, 1000.0, s, "command")  # bound
