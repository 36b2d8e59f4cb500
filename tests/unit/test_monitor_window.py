"""Windows, their evaluation steps, the sliding-window schedule and the snapshot history."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testkit.builders import cluster, node
from tuner.model.cluster import Cluster
from tuner.model.window_report import Verdict, WindowReport
from tuner.monitor.observe import next_window_end
from tuner.monitor.snapshots import SnapshotHistory
from tuner.monitor.window import MAX_STEPS, Window, promql_duration, steps_over
from tuner.settings import Windows


def test_the_window_ends_at_end_and_warm_up_extends_the_checked_span() -> None:
    window = Window(10_000.0 - 600, 10_000.0, 120)
    assert (window.start, window.end) == (9_400.0, 10_000.0)
    assert window.length_s == 600
    assert window.checked_start == 9_280.0
    assert promql_duration(window.length_s) == "600s"


@pytest.mark.parametrize(("start", "end", "warmup"), [(10.0, 10.0, 0.0), (10.0, 5.0, 0.0)])
def test_a_window_must_have_a_positive_length(start: float, end: float, warmup: float) -> None:
    with pytest.raises(ValueError, match="must end after it starts"):
        Window(start, end, warmup)


@given(
    end=st.floats(1.6e9, 2.0e9),
    length=st.floats(0.5, 86_400.0),
    warmup=st.floats(0.0, 3_600.0),
)
def test_steps_cover_the_checked_span_and_end_at_the_window_end(
    end: float, length: float, warmup: float
) -> None:
    window = Window(end - length, end, warmup)
    steps = steps_over(window)
    times = steps.times
    assert 2 <= steps.count <= MAX_STEPS + 1
    assert times[0] <= window.checked_start + 0.001
    assert times[0] >= window.checked_start - steps.step_s
    assert times[-1] == pytest.approx(window.end, abs=0.001)
    assert steps.step_s >= 1.0 or steps.count == 2
    assert [steps.index(t) for t in times] == list(range(steps.count))
    assert steps.index(times[1] + steps.step_s / 2) is None


@pytest.mark.parametrize(
    ("verdict", "after"), [(Verdict.STABLE, 600), (Verdict.UNSTABLE, 60), (Verdict.UNKNOWN, 60)]
)
def test_next_window_slides_by_the_retry_window_after_an_unusable_one(
    verdict: Verdict, after: float
) -> None:
    report = WindowReport(verdict, "why", None, 9_400.0, 10_000.0, 9_400.0)
    assert next_window_end(report, Windows(measure_s=600, retry_s=60)) == 10_000.0 + after


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_snapshot_history_answers_the_newest_snapshot_at_or_before_a_time() -> None:
    clock = Clock(1_000.0)
    reads: list[Cluster] = [cluster([node(f"n{i}")], []) for i in range(4)]
    feed = iter(reads)
    history = SnapshotHistory(lambda: next(feed), max_age_s=60, keep_s=700, clock=clock)

    assert history.snapshot(1_000.0) is reads[0]  # "now": read the cluster
    clock.now = 1_050.0
    history.take()
    clock.now = 1_100.0

    assert history.snapshot(1_049.0) is reads[0]  # taken before 1049, less than 60 s before
    assert history.snapshot(1_050.0) is reads[1]
    assert history.snapshot(999.0) is None  # nothing that early
    assert history.snapshot(1_100.0) is reads[2]  # now again: a fresh read
    clock.now = 1_200.0
    assert history.snapshot(1_150.0) is reads[2]
    assert history.snapshot(1_161.0) is None  # the newest before it is too old to stand for it


def test_snapshot_history_forgets_what_no_window_can_need() -> None:
    clock = Clock(0.0)
    history = SnapshotHistory(
        lambda: cluster([node("n")], []), max_age_s=100, keep_s=100, clock=clock
    )
    for t in range(0, 1_000, 10):
        clock.now = float(t)
        history.take()
    assert history.snapshot(885.0) is not None
    assert history.snapshot(880.0) is not None  # newest one before the horizon is kept
    assert history.snapshot(870.0) is None
