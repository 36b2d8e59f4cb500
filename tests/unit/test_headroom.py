"""The decision weighs the forecast (analyse.headroom): a removal leaves room for the pods the
HPAs would run at the upper edge of the forecast's peak, in total and pod by pod; the thresholds
apply without a forecast; the previous deployment is looked up for the load expected next."""

from __future__ import annotations

import random
from dataclasses import replace
from fractions import Fraction

from testkit.builders import cluster, node, pod
from tuner.analyse.decision import Analysis, analyse
from tuner.analyse.headroom import FIT_LIMIT, imminent_steps
from tuner.analyse.options import Choice, Refusal
from tuner.model.cluster import Cluster, Hpa, Workload
from tuner.model.constraints import Constraints, LabelSelector, SpreadConstraint
from tuner.model.demand import expected_load, next_step, next_steps
from tuner.model.forecast import Band, Basis, Forecast
from tuner.model.load import Load
from tuner.model.snapshot import Snapshot
from tuner.settings import Analyse, Pricing, Settings, Thresholds

WEB = Workload("default", "Deployment", "web")


def forecast(last: float, upper: float, expected: float | None = None) -> Forecast:
    """A forecast whose peak's upper edge is ``upper`` against ``last`` now."""
    middle = upper if expected is None else expected
    band = Band(middle, min(middle, upper), upper)
    return Forecast(0.0, 720.0, 60.0, 0.95, band, Basis.DAY, 100, 1e6, (), last)


def settings(**analyse: object) -> Settings:
    return Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), max_parallel_removals=2, **analyse),  # type: ignore[arg-type]
    )


def decide(c: Cluster, s: Settings, f: Forecast | None) -> Analysis:
    return analyse(c, s, (), random.Random(0), forecast=f)


def with_hpa(c: Cluster, low: int = 1, high: int = 100) -> Cluster:
    return replace(c, hpas=(Hpa("default", "web", WEB, low, high),))


def four_web_pods_on_three_nodes() -> Cluster:
    """Three 5-core nodes, four 1-core pods of an HPA-scaled web: two nodes can go today (the
    one left holds the four and the HPA's next step, a fifth)."""
    pods = [pod("web-1", "a", "1"), pod("web-2", "a", "1"), pod("web-3", "b", "1")]
    pods.append(pod("web-4", "c", "1"))
    c = cluster([node("a", "5", "16Gi"), node("b", "5", "16Gi"), node("c", "5", "16Gi")], pods)
    return with_hpa(c)


def removal(analysis: Analysis) -> tuple[str, ...]:
    chosen = analysis.chosen
    return chosen.change.remove_nodes if chosen is not None else ()


def test_without_a_forecast_two_nodes_go_with_a_rising_one_only_what_its_peak_leaves() -> None:
    c = four_web_pods_on_three_nodes()
    assert len(removal(decide(c, settings(), None))) == 2
    # 1.5 x the load now: the HPA runs 6 pods, 6 cores: two nodes must stay
    rising = decide(c, settings(), forecast(100.0, 150.0))
    assert rising.decision is Choice.REMOVE_NODES and len(removal(rising)) == 1
    # 3 x: 12 pods, 12 cores: all three must stay, and the refusal says why
    steep = decide(c, settings(), forecast(100.0, 300.0))
    assert steep.decision is Choice.STAY
    refused = steep.proposals[0]
    assert refused.refusal is Refusal.FORECAST
    assert "the forecast peak 300 (expected 300, now 100) needs it" in refused.reason
    assert "the forecast peak 300" in steep.reason


def test_a_falling_forecast_asks_no_more_than_the_pods_there_are() -> None:
    c = four_web_pods_on_three_nodes()
    assert len(removal(decide(c, settings(), forecast(100.0, 60.0)))) == 2


def test_the_added_pods_must_fit_one_by_one_not_only_in_total() -> None:
    # after c's small pod moved to b, a keeps 2 cores free and b 1.1: 3.1 in total, enough for
    # the two 1.5-core web pods the peak adds (and for the one of the HPA's next step), but the
    # second fits in no single node
    pods = [
        pod("web-1", "a", "1500m"),
        pod("db-1", "a", "500m", workload="db"),
        pod("web-2", "b", "1500m"),
        pod("db-2", "b", "1300m", workload="db"),
        pod("x-1", "c", "100m", workload="x"),
    ]
    c = with_hpa(cluster([node("a", "4", "16Gi"), node("b", "4", "16Gi"), node("c")], pods))
    assert removal(decide(c, settings(), None)) == ("c",)
    refused = decide(c, settings(), forecast(100.0, 200.0))
    assert refused.decision is Choice.STAY
    assert refused.proposals[0].refusal is Refusal.FORECAST
    assert "a new pod of default/Deployment/web fits nowhere" in refused.proposals[0].reason


def test_the_forecast_replaces_the_thresholds_which_apply_without_one() -> None:
    c = four_web_pods_on_three_nodes()
    strict = Thresholds(cpu=Fraction(3, 10))  # 4 of 10 cores is 40 %: no node may go
    flat = forecast(100.0, 100.0)
    without = decide(c, settings(thresholds=strict), None)
    assert without.decision is Choice.STAY
    assert without.proposals[0].refusal is Refusal.NO_CANDIDATE
    assert len(removal(decide(c, settings(thresholds=strict), flat))) == 2
    by_thresholds = decide(c, settings(thresholds=strict, headroom="thresholds"), flat)
    assert by_thresholds.decision is Choice.STAY
    steep = forecast(100.0, 250.0)
    assert len(removal(decide(c, settings(thresholds=strict, headroom="none"), steep))) == 2


def test_the_previous_deployment_is_looked_up_for_the_load_expected_next() -> None:
    load = Load.vector({"a": 40.0, "b": 60.0})
    assert expected_load(load, None) is load
    rising = expected_load(load, forecast(100.0, 180.0, expected=150.0))
    assert rising == Load.vector({"a": 60.0, "b": 90.0})


def test_a_forecast_on_the_recent_level_only_or_too_few_errors_leaves_the_room_to_thresholds() -> (
    None
):
    c = four_web_pods_on_three_nodes()
    level = replace(forecast(100.0, 250.0), basis=Basis.LEVEL)
    assert len(removal(decide(c, settings(), level))) == 2
    unmeasured = replace(forecast(100.0, 250.0), errors=59)
    assert len(removal(decide(c, settings(), unmeasured))) == 2
    strict = Thresholds(cpu=Fraction(3, 10))
    assert decide(c, settings(thresholds=strict), level).decision is Choice.STAY


def test_an_hpas_next_step_is_the_fewest_pods_past_its_tolerance_within_its_maximum() -> None:
    # the HPA scales up once its metric is more than 10 % above target: ceil(n x ratio) with the
    # ratio just above 1.1
    assert [next_step(n, 100) for n in (1, 2, 9, 10, 20)] == [1, 1, 1, 2, 3]
    assert next_step(20, 21) == 1
    assert next_step(20, 20) == 0


def slivers() -> Cluster:
    """Three 2-core nodes; a and b each keep 150m free, c holds one 100m pod of no HPA: when c
    goes, 200m stay free in total, but no node has the 200m of web's next pod."""
    pods = [
        pod("fill-1", "a", "1650m", workload="fill"),
        pod("web-1", "a", "200m"),
        pod("fill-2", "b", "1650m", workload="fill"),
        pod("web-2", "b", "200m"),
        pod("x-1", "c", "100m", workload="x"),
    ]
    return cluster([node("a", "2", "16Gi"), node("b", "2", "16Gi"), node("c", "2", "16Gi")], pods)


def test_a_removal_that_leaves_no_node_room_for_an_hpas_next_pod_is_refused() -> None:
    c = with_hpa(slivers())
    refused = decide(c, settings(), None)
    assert refused.decision is Choice.STAY
    assert refused.proposals[0].refusal is Refusal.NEXT_STEP
    assert "1 more pod(s) of default/Deployment/web would fit on no node left" in refused.reason
    # with the forecast's headroom too: the next step is checked whatever the forecast says
    assert decide(c, settings(), forecast(100.0, 100.0)).proposals[0].refusal is Refusal.NEXT_STEP
    # no HPA, an HPA at its maximum, or headroom "none": c goes
    assert removal(decide(slivers(), settings(), None)) == ("c",)
    assert removal(decide(with_hpa(slivers(), high=2), settings(), None)) == ("c",)
    assert removal(decide(c, settings(headroom="none"), None)) == ("c",)


def two_steps_with_room_for_one(ratio: float | None) -> Cluster:
    """web and api, each one 200m pod, their HPAs at ``ratio`` of their target: without c, b
    keeps 250m free, room for either next pod, not for both."""
    pods = [
        pod("fill-1", "a", "1800m", workload="fill"),
        pod("web-1", "a", "200m"),
        pod("fill-2", "b", "1450m", workload="fill"),
        pod("api-1", "b", "200m", workload="api"),
        pod("x-1", "c", "100m", workload="x"),
    ]
    c = cluster([node("a", "2", "16Gi"), node("b", "2", "16Gi"), node("c", "2", "16Gi")], pods)
    api = Workload("default", "Deployment", "api")
    hpas = (Hpa("default", "web", WEB, 1, 100, ratio), Hpa("default", "api", api, 1, 100, ratio))
    return replace(c, hpas=hpas)


def test_each_workloads_next_step_must_fit_on_its_own_not_all_at_once() -> None:
    # a second HPA-scaled workload whose next pod asks 200m too (their HPAs' utilisation not
    # known): b keeps 250m free after c's pod moved there, room for either next pod
    assert removal(decide(two_steps_with_room_for_one(None), settings(), None)) == ("c",)


def test_the_next_steps_of_the_hpas_at_their_target_must_fit_all_together() -> None:
    # both HPAs at or above their target: one small rise adds a pod of each, and only one fits
    for ratio in (1.0, 1.08):
        refused = decide(two_steps_with_room_for_one(ratio), settings(), None)
        assert refused.decision is Choice.STAY
        assert refused.proposals[0].refusal is Refusal.NEXT_STEP
        assert "the next steps of the 2 HPA(s) at or above their target" in refused.reason
        with_forecast = decide(two_steps_with_room_for_one(ratio), settings(), forecast(1.0, 1.0))
        assert with_forecast.proposals[0].refusal is Refusal.NEXT_STEP
    # below their target, or not measured: each step on its own fits, c goes
    for below in (0.99, 0.5, None):
        assert removal(decide(two_steps_with_room_for_one(below), settings(), None)) == ("c",)
    # headroom "none" checks no step
    none = settings(headroom="none")
    assert removal(decide(two_steps_with_room_for_one(1.0), none, None)) == ("c",)


def test_the_imminent_steps_are_the_highest_ratios_first_within_the_fit_limit() -> None:
    c = two_steps_with_room_for_one(None)
    api = Workload("default", "Deployment", "api")
    ratios = replace(
        c, hpas=(Hpa("default", "web", WEB, 1, 100, 1.02), Hpa("default", "api", api, 1, 100, 1.05))
    )
    assert [(p.workload, n) for p, n in imminent_steps(ratios)] == [(api, 1), (WEB, 1)]
    # 3,000 pods step up by 301: the first FIT_LIMIT of them are placed
    many = [pod(f"web-{i}", "a", "1m") for i in range(3000)]
    crowd = replace(
        cluster([node("a", "64", "64Gi")], many), hpas=(Hpa("default", "web", WEB, 1, 5000, 1.0),)
    )
    assert next_step(3000, 5000) > FIT_LIMIT
    assert [n for _, n in imminent_steps(crowd)] == [FIT_LIMIT]


def test_of_the_steps_placed_alike_only_those_no_bigger_step_covers_are_checked() -> None:
    pods = [pod("web-1", "a", "200m"), pod("api-1", "a", "100m", workload="api")]
    pods += [pod(f"big-{i}", "a", "300m", workload="big") for i in range(10)]
    api = Workload("default", "Deployment", "api")
    big = Workload("default", "Deployment", "big")
    c = replace(
        cluster([node("a", "8", "16Gi")], pods),
        hpas=(
            Hpa("default", "web", WEB, 1, 100),
            Hpa("default", "api", api, 1, 100),
            Hpa("default", "big", big, 1, 100),
        ),
    )
    # big's step (2 pods of 300m) covers web's and api's (1 pod of 200m, of 100m)
    assert [(p.workload, n) for p, n in next_steps(c)] == [(big, 2)]
    # two 2-core nodes with 450m and 250m free hold two more 200m pods, one 300m pod
    snap = Snapshot(
        cluster(
            [node("x", "2", "16Gi"), node("y", "2", "16Gi")],
            [pod("f-1", "x", "1550m", workload="f"), pod("f-2", "y", "1750m", workload="f")],
        )
    )
    both = snap.mask_of(["x", "y"])
    assert snap.count_fitting(pod("web-9", None, "200m"), both) == 3
    assert snap.count_fitting(pod("big-9", None, "300m", workload="big"), both) == 1
    assert snap.count_fitting(pod("web-9", None, "200m"), snap.mask_of(["y"])) == 1


def test_with_provisioning_ahead_a_removal_leaves_room_only_for_the_rise_before_a_node_starts() -> (
    None
):
    """A rise due after a node's start-up plus a retry is the reserve's to provision (it holds
    placeholders that far ahead): with reserving on, the removal at the trough leaves room for
    the peak over that lead only; with it off, for the whole horizon's."""
    c = four_web_pods_on_three_nodes()
    late_rise = replace(
        forecast(100.0, 330.0, 300.0),
        path=(100.0, 100.0, 100.0, 100.0, 300.0, 300.0),
        calls=5,
        confirmed=5,  # proven: the reserve would act on it
    )
    off = settings()
    assert decide(c, off, late_rise).decision is Choice.STAY  # 3 x the load over the horizon
    on = replace(off, forecast=replace(off.forecast, reserve_max_nodes=3))
    assert on.forecast.lead(on.windows) <= 180.0  # the rise at the 5th minute is after it
    assert len(removal(decide(c, on, late_rise))) == 2  # 1.1 x: the four and a fifth fit
    early_rise = replace(late_rise, path=(100.0, 300.0, 300.0, 300.0, 300.0, 300.0))
    assert decide(c, on, early_rise).decision is Choice.STAY
    unproven = replace(late_rise, confirmed=4)  # no reserve would act: nothing counts on it
    assert decide(c, on, unproven).decision is Choice.STAY


def test_a_spread_workloads_next_step_is_placed_pod_by_pod_under_its_rule() -> None:
    # web spreads over zones (maxSkew 1, DoNotSchedule), five pods in each; its next step adds
    # two. Without c, zone b has no room for a web pod: the first new pod goes to zone a
    # (6 against 5), the second would make the skew 2 there. Counted by requests alone, zone
    # a's room holds both.
    spread = SpreadConstraint(1, "zone", LabelSelector((("app", "web"),)))
    rules = Constraints(spread=(spread,))
    webs = [
        pod(f"web-{i}", "a1" if i < 5 else "b1", "200m", labels={"app": "web"}, constraints=rules)
        for i in range(10)
    ]
    nodes = [
        node("a1", "4", "16Gi", labels={"zone": "a"}),
        node("b1", "2", "16Gi", labels={"zone": "b"}),
        node("c1", "2", "16Gi", labels={"zone": "b"}),
    ]
    db = pod("db-0", "b1", "900m", workload="db", kind="StatefulSet")  # never moved: b1 stays
    pods = [*webs, db, pod("x-1", "c1", "100m")]
    refused = decide(with_hpa(cluster(nodes, pods)), settings(), None)
    assert refused.decision is Choice.STAY
    assert refused.proposals[0].refusal is Refusal.NEXT_STEP
    assert "2 more pod(s) of default/Deployment/web would fit on no node left" in refused.reason
    # with room for one web pod left in zone b, the step fits: c goes
    smaller = pod("db-0", "b1", "600m", workload="db", kind="StatefulSet")
    roomier = [*webs, smaller, pod("x-1", "c1", "100m")]
    assert removal(decide(with_hpa(cluster(nodes, roomier)), settings(), None)) == ("c1",)
