"""The load history from Prometheus, over a fast in-memory double of the query API (the same
path against a real Prometheus: tests/integration/test_load_history.py): pieces, only the new
steps, gaps, dimensions, bounded memory, failures."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from tuner.errors import ServiceError
from tuner.model.load import SCALAR
from tuner.monitor.history import MAX_DIMENSIONS, MAX_POINTS, REFETCH, PrometheusHistory
from tuner.monitor.prometheus import InstantResult, QueryError
from tuner.monitor.series import Series, series
from tuner.settings import ForecastSettings, LoadSettings, Settings

STEP = 60.0


@dataclass
class RangeOnly:
    """Answers ``query_range`` with ``value(labels, t)`` for each label set; records calls."""

    labels: list[dict[str, str]] = field(default_factory=lambda: [{}])
    missing: set[float] = field(default_factory=set)
    """Times no series answers (a gap)."""
    calls: list[tuple[str, float, float, float]] = field(default_factory=list)
    down: bool = False

    def value(self, labels: dict[str, str], t: float) -> float:
        return t / STEP + 1000 * len(labels.get("app", ""))

    def instant(self, query: str, at: float) -> InstantResult:
        raise AssertionError("the history asks only range queries")

    def range(self, query: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        if self.down:
            raise QueryError(query, "Prometheus unreachable at http://prometheus: refused")
        self.calls.append((query, start, end, step))
        assert (end - start) / step + 1 <= MAX_POINTS
        times = [start + k * step for k in range(round((end - start) / step) + 1)]
        return tuple(
            series(labels, *((t, self.value(labels, t)) for t in times if t not in self.missing))
            for labels in self.labels
        )


def settings(lookback_s: float = 14 * 86400, query: str = "sum(rate(x[$window]))") -> Settings:
    return Settings(
        load=LoadSettings(query=query),
        forecast=ForecastSettings(lookback_s=lookback_s, step_s=STEP),
    )


def test_the_look_back_is_fetched_in_pieces_then_only_the_new_steps() -> None:
    prometheus = RangeOnly()
    history = PrometheusHistory(prometheus, settings())
    end = 1_000_000 * STEP
    first = history.series(end)
    assert first.length == 14 * 1440
    assert first.end == end
    assert len(prometheus.calls) == math.ceil(14 * 1440 / MAX_POINTS) == 3
    assert {call[0] for call in prometheus.calls} == {"sum(rate(x[60s]))"}  # $window: the step
    np.testing.assert_allclose(first.values[SCALAR][-3:], [999_998, 999_999, 1_000_000])
    prometheus.calls.clear()
    later = history.series(end + 5 * STEP)
    (call,) = prometheus.calls
    assert call[1] == end - (REFETCH - 1) * STEP  # the last steps again, then the new ones
    assert call[2] == end + 5 * STEP
    assert later.length == first.length  # the oldest steps dropped: bounded
    assert later.start == first.start + 5 * STEP
    np.testing.assert_allclose(later.values[SCALAR][-1], 1_000_005)
    assert history.fetched_points == 14 * 1440 + REFETCH + 5


def test_steps_without_an_answer_are_gaps() -> None:
    end = 500_000 * STEP
    prometheus = RangeOnly(missing={end - STEP, end - 10 * STEP})
    history = PrometheusHistory(prometheus, settings(lookback_s=3600))
    values = history.series(end).values[SCALAR]
    assert np.isnan(values[-2]) and np.isnan(values[-11])
    assert np.count_nonzero(np.isnan(values)) == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_unusable_values_are_gaps(bad: float) -> None:
    prometheus = RangeOnly()
    prometheus.value = lambda labels, t: bad if t == 100 * STEP else 1.0  # type: ignore[method-assign]
    values = PrometheusHistory(prometheus, settings(lookback_s=3600)).series(100 * STEP)
    assert np.isnan(values.values[SCALAR][-1])
    assert values.values[SCALAR][-2] == 1.0


def test_a_load_vector_keeps_its_dimensions_named_as_in_a_load() -> None:
    prometheus = RangeOnly(labels=[{"app": "a"}, {"app": "bb"}])
    load = PrometheusHistory(prometheus, settings(lookback_s=3600)).series(100 * STEP)
    assert set(load.values) == {'{app="a"}', '{app="bb"}'}
    assert load.values['{app="bb"}'][-1] == 100 + 2000


def test_more_dimensions_than_kept_are_kept_as_their_total() -> None:
    many = [{"app": f"a{i:03d}"} for i in range(MAX_DIMENSIONS + 1)]
    prometheus = RangeOnly(labels=many)
    prometheus.value = lambda labels, t: 1.0  # type: ignore[method-assign]
    history = PrometheusHistory(prometheus, settings(lookback_s=3600))
    load = history.series(100 * STEP)
    assert history.collapsed
    assert set(load.values) == {SCALAR}
    assert load.values[SCALAR][-1] == MAX_DIMENSIONS + 1
    later = history.series(101 * STEP)  # the steps fetched again are not counted twice
    np.testing.assert_allclose(later.values[SCALAR][-REFETCH - 1 :], MAX_DIMENSIONS + 1)


def test_a_failed_query_is_a_service_error_and_what_was_fetched_stays() -> None:
    prometheus = RangeOnly()
    history = PrometheusHistory(prometheus, settings(lookback_s=3600))
    before = history.series(100 * STEP)
    prometheus.down = True
    with pytest.raises(ServiceError, match="load history: Prometheus unreachable"):
        history.series(200 * STEP)
    prometheus.down = False
    prometheus.calls.clear()
    after = history.series(101 * STEP)
    assert len(prometheus.calls) == 1 and prometheus.calls[0][1] == (101 - REFETCH) * STEP
    np.testing.assert_allclose(after.values[SCALAR][:-1], before.values[SCALAR][1:])


def test_a_cycle_after_a_long_pause_fetches_the_whole_look_back_again() -> None:
    prometheus = RangeOnly()
    history = PrometheusHistory(prometheus, settings(lookback_s=3600))
    history.series(100 * STEP)
    prometheus.calls.clear()
    load = history.series(1000 * STEP)
    assert prometheus.calls[0][1] == (1000 - 59) * STEP  # the look-back, not the 900 steps between
    assert load.length == 60
