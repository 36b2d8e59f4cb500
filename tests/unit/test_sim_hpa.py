"""The simulator's HPA against hand-computed cases (HPA controller formula and behavior)."""

from __future__ import annotations

from tuner.sim.hpa import HorizontalPodAutoscaler, recommend
from tuner.sim.workloads import HpaSpec

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
