"""The simulator's HPA against hand-computed cases (HPA controller formula and behavior)."""

from __future__ import annotations

from tuner.sim.engine import Scenario, Simulation
from tuner.sim.hpa import METRIC_DELAY, HorizontalPodAutoscaler, recommend
from tuner.sim.load import Phase, Phases
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.workloads import HpaSpec, Service

PHP = HpaSpec(1, 50, 0.8)


def test_within_the_tolerance_nothing_changes() -> None:
    # 4 pods of 200m using 680m: 680 / 800 = 85 % against 80 % -> ratio 1.0625, within 10 %
    assert recommend(PHP, current=4, ready=4, missing=0, usage=680, request=200) == 4


def test_scale_up_is_ceil_of_ratio_times_pods() -> None:
    # 1000 / 800 / 0.8 = 1.5625; ceil(1.5625 * 4) = ceil(6.25) = 7
    assert recommend(PHP, current=4, ready=4, missing=0, usage=1000, request=200) == 7


def test_scale_down_is_ceil_of_ratio_times_pods() -> None:
    # 200 / 800 / 0.8 = 0.3125; ceil(0.3125 * 4) = ceil(1.25) = 2
    assert recommend(PHP, current=4, ready=4, missing=0, usage=200, request=200) == 2


def test_missing_pods_count_as_idle_when_scaling_up() -> None:
    # ready 4 say 1.5625; with the missing pod at 0: 1000 / 1000 / 0.8 = 1.25; ceil(6.25) = 7
    assert recommend(PHP, current=5, ready=4, missing=1, usage=1000, request=200) == 7


def test_missing_pods_that_flip_the_direction_stop_the_scale_up() -> None:
    # ready 2: 400 / 400 / 0.8 = 1.25 up; with 3 idle missing: 400 / 1000 / 0.8 = 0.5 -> keep
    assert recommend(PHP, current=5, ready=2, missing=3, usage=400, request=200) == 5


def test_scale_down_waits_for_the_stabilization_window() -> None:
    hpa = HorizontalPodAutoscaler(PHP)
    assert hpa.desired(0, current=4, ready=4, missing=0, usage=680, request=200) == 4
    for t in range(15, 301, 15):
        # the raw recommendation is 2, but a 4 is still inside the last 300 s
        assert hpa.desired(t, current=4, ready=4, missing=0, usage=200, request=200) == 4
    assert hpa.desired(315, current=4, ready=4, missing=0, usage=200, request=200) == 2


def test_scale_up_is_limited_to_double_or_four_pods_per_period() -> None:
    hpa = HorizontalPodAutoscaler(PHP)
    # raw ceil(4000 / 400 / 0.8 * 2) = 25; limit max(2 * 2, 2 + 4) = 6
    assert hpa.desired(0, current=2, ready=2, missing=0, usage=4000, request=200) == 6
    # limit max(2 * 6, 6 + 4) = 12
    assert hpa.desired(15, current=6, ready=6, missing=0, usage=4000, request=200) == 12


def test_bounds_clamp_the_result() -> None:
    hpa = HorizontalPodAutoscaler(HpaSpec(2, 3, 0.5))
    assert hpa.desired(0, current=3, ready=3, missing=0, usage=3000, request=100) == 3
    low = HorizontalPodAutoscaler(HpaSpec(2, 3, 0.5))
    assert low.desired(0, current=2, ready=2, missing=0, usage=1, request=100) == 2


def test_missing_pods_count_as_using_their_request_when_scaling_down() -> None:
    # ready 4: 200 / 800 / 0.8 = 0.3125 down; with 2 missing at 200m each:
    # (200 + 400) / 1200 / 0.8 = 0.625; ceil(0.625 * 6) = 4 (not ceil(0.3125 * 4) = 2)
    assert recommend(PHP, current=6, ready=4, missing=2, usage=200, request=200) == 4


def test_missing_pods_that_bring_the_ratio_into_the_tolerance_keep_the_count() -> None:
    # ready 2: 280 / 400 / 0.8 = 0.875 down; with 2 missing: 680 / 800 / 0.8 = 1.0625
    assert recommend(PHP, current=4, ready=2, missing=2, usage=280, request=200) == 4


def test_unready_pods_are_left_out_when_scaling_down() -> None:
    # kube-controller-manager's groupPods: a Pending pod is unready, not missing. Ready 4:
    # 200 / 800 / 0.8 = 0.3125 down; the 2 pending pods do not count: ceil(0.3125 * 4) = 2
    # (as missing pods at their request they would make it 4)
    assert recommend(PHP, current=6, ready=4, missing=0, usage=200, request=200, unready=2) == 2


def test_unready_pods_count_as_idle_when_scaling_up() -> None:
    # ready 4 say 1.5625 up; the pending pod at 0: 1000 / 1000 / 0.8 = 1.25; ceil(6.25) = 7
    assert recommend(PHP, current=5, ready=4, missing=0, usage=1000, request=200, unready=1) == 7


FRONTEND = HpaSpec(1, 10, 0.5)
"""A shop's front end: 100m pods at a 50 % target."""


def test_a_ratio_of_exactly_the_tolerance_is_within_it() -> None:
    # 165m on 3 pods of 100m: 55 % against 50 % is 1.1; v1.33's isWithin (1 - 0.1 <= r <= 1 + 0.1)
    # keeps 3 where |1.1 - 1| (0.10000000000000009 in floating point) > 0.1 would ask 4
    assert recommend(FRONTEND, current=3, ready=3, missing=0, usage=165, request=100) == 3


def test_the_utilisation_is_a_truncated_whole_percentage() -> None:
    # 333m on 3 pods of 200m: int32(33300 / 600) = 55 %, 1.1: within (55.5 % would be 1.11: 4)
    assert recommend(FRONTEND, current=3, ready=3, missing=0, usage=333, request=200) == 3


def test_each_pods_sample_is_rounded_up_to_a_whole_millicore() -> None:
    # 442m on 10 pods: 44.2m each, MilliValue() 45m, 45 %: 0.9, within (44.2 % would be 9 pods)
    assert recommend(FRONTEND, current=10, ready=10, missing=0, usage=442, request=100) == 10


SHOP = Service(
    "api", 100, 2**27, replicas=2, hpa=HpaSpec(1, 20, 0.5), cpu_per_load=10.0, namespace="shop"
)
"""50m a pod at the target: load 10 asks 2 pods, 30 asks 6, 36 asks 8."""


def stepped() -> Scenario:
    """Load 10, then 30 from t = -20 (the sync at 0 is the first to see it, whole: 6 pods), then 36
    from t = -5 (what the sync at 15 sees)."""
    return Scenario(
        name="stepped",
        title="stepped",
        services=(SHOP,),
        daemonsets=(),
        loads={"shop": Phases(300, (Phase(280, 10), Phase(15, 30), Phase(3600, 36)))},
        pools=(NodeGroup("pool", NODE_TYPES["e2-standard-4"], 2, 2, 2),),
        duration=120,
        warmup=300,
    )


def replicas_after_sync(sim: Simulation, t: float) -> int:
    """The HPA's replicas once the controllers ran at ``t`` (a sync every 15 s from -300)."""
    sim.advance(t + 5 - sim.now)
    return sim.replicas[SHOP]


def test_pods_ready_without_a_sample_share_the_load_the_hpa_does_not_see() -> None:
    sim = Simulation(stepped(), 1)
    assert replicas_after_sync(sim, -15) == 2
    assert replicas_after_sync(sim, 0) == 6  # 300m / 2 pods = 3x the target
    # At 15 the four new pods are Ready (at 10) and serve their share of 360m, but have no
    # sample yet: the two measured pods use 60m each, 1.2x the target; the four missing ones
    # count as idle, 0.4x, which flips the direction: 6 stays (had the two measured pods
    # carried all 360m, 3.6x, with the missing ones idle 1.2x: ceil(1.2 x 6) = 8)
    assert replicas_after_sync(sim, 15) == 6


def test_a_new_pod_has_no_usable_sample_for_the_metric_delay_after_it_is_ready() -> None:
    sim = Simulation(stepped(), 1)
    assert replicas_after_sync(sim, 0) == 6
    assert METRIC_DELAY == 25.0
    # Ready at 10, first usable sample at 35: the sync at 30 still holds, the one at 45 sees
    # all six pods at 60m, 1.2x the target, and asks 8
    assert replicas_after_sync(sim, 30) == 6
    assert replicas_after_sync(sim, 45) == 8


def test_the_hpas_status_holds_the_utilisation_of_its_last_sync() -> None:
    hpa = HorizontalPodAutoscaler(PHP)
    assert hpa.usage_ratio is None  # not measured yet
    hpa.desired(0, current=4, ready=4, missing=0, usage=680, request=200)
    assert (hpa.utilization, hpa.usage_ratio) == (85, 85 / 80)


def test_the_tuner_reads_each_hpas_status_as_of_its_last_sync() -> None:
    sim = Simulation(stepped(), 1)
    replicas_after_sync(sim, -15)
    (hpa,) = sim.cluster().hpas
    assert (hpa.min_replicas, hpa.max_replicas, hpa.usage_ratio) == (1, 20, 1.0)  # 100m / 2
    replicas_after_sync(sim, 0)
    (hpa,) = sim.cluster().hpas
    assert hpa.usage_ratio == 3.0  # the load of 30 on the 2 pods measured, not the 6 asked for
