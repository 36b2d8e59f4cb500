"""The load's history and its forecast against a real Prometheus that holds two weeks of a
synthetic load (backfilled with promtool, then scraped live): the look-back read in pieces,
gaps where Prometheus had nothing, only the new steps fetched afterwards, the forecast seasonal
by week, and ``tuner monitor`` printing it."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from testkit.prometheus_fixture import PrometheusHarness
from testkit.prometheus_history import METRIC, Sample, backfilled
from tuner.cli import main
from tuner.model.forecast import Basis, forecast_load
from tuner.monitor.history import MAX_POINTS, PrometheusHistory
from tuner.monitor.prometheus import InstantResult, PrometheusClient
from tuner.monitor.series import Series
from tuner.settings import Settings, settings_from_dict

pytestmark = pytest.mark.prometheus

STEP = 60.0
DAY = 86400.0
WEEK = 7 * DAY
GAP_S = 3600.0
APPS = ("a", "b")


def load(app: str, t: float) -> float:
    """App ``a``: a daily swing, a third of it at weekends; app ``b``: a steady 10."""
    if app == "b":
        return 10.0
    swing = 200 - 100 * math.cos(2 * math.pi * (t - 3 * 3600) / DAY)
    return swing / 3 if (t % WEEK) >= 5 * DAY else swing


@pytest.fixture(scope="module")
def history_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Any, float, float]]:
    """Prometheus with 14 days of the load up to the last whole step (an hour missing three
    days ago), then the exporter serving it live; the gap's start and the backfill's end."""
    end = math.floor(time.time() / STEP) * STEP
    gap = end - 3 * DAY
    times = np.arange(end - 14 * DAY, end + 1, STEP)
    samples: list[Sample] = [
        ({"app": app}, float(t), load(app, t))
        for t in times
        if not gap <= t < gap + GAP_S
        for app in APPS
    ]
    with backfilled(tmp_path_factory.mktemp("prometheus-history"), samples) as harness:
        now = time.time()
        for app in APPS:
            harness.exporter.set_gauge(METRIC, {"app": app}, load(app, now))
        harness.wait_for_scrapes(2)
        yield harness, gap, end


class Counted:
    """The real client, its range queries counted."""

    def __init__(self, client: PrometheusClient) -> None:
        self.client = client
        self.ranges: list[tuple[float, float]] = []

    def instant(self, query: str, at: float) -> InstantResult:
        return self.client.instant(query, at)

    def range(self, query: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        self.ranges.append((start, end))
        return self.client.range(query, start, end, step)


def settings(url: str, **forecast: float) -> Settings:
    return settings_from_dict(
        {
            "prometheus": {"url": url},
            "load": {"query": f"sum by (app) ({METRIC})"},
            "forecast": forecast,
        }
    )


def test_two_weeks_are_read_in_pieces_with_their_gap_and_forecast_by_the_week(
    history_server: tuple[PrometheusHarness, float, float],
) -> None:
    harness, gap, end = history_server
    s = settings(harness.url)
    with PrometheusClient(s.prometheus) as client:
        counted = Counted(client)
        history = PrometheusHistory(counted, s)
        now = time.time()
        series = history.series(now)
    assert series.length == 14 * DAY / STEP
    assert len(counted.ranges) == math.ceil(series.length / MAX_POINTS)  # 11,000 is the limit
    assert set(series.values) == {'{app="a"}', '{app="b"}'}
    a = series.values['{app="a"}']
    t = series.start + STEP * np.arange(series.length)
    # A gauge stays visible 5 minutes after its last sample (Prometheus' lookback delta).
    stale = (t >= gap) & (t < gap + 300)
    assert (a[stale] == load("a", gap - STEP)).all()
    in_gap = (t >= gap + 300) & (t < gap + GAP_S)
    assert np.isnan(a[in_gap]).all()
    served = ~stale & ~in_gap & (t <= end)  # backfilled (then the exporter's constant)
    want = np.array([load("a", x) for x in t[served]])
    known = ~np.isnan(a[served])
    assert known.all()  # every backfilled step of the two pieces but the gap
    np.testing.assert_allclose(a[served][known], want[known], rtol=1e-6)

    forecast = forecast_load(series, now, s.forecast.horizon(s.windows))
    assert forecast.basis is Basis.WEEK
    assert forecast.history_s > 13.9 * DAY
    peak = max(load("a", now + STEP * k) for k in range(1, 13)) + 10
    assert forecast.peak.expected == pytest.approx(peak, rel=0.03)
    # An exactly weekly series: its past forecasts were exact, so the band is narrow.
    assert forecast.peak.lower <= forecast.peak.expected <= forecast.peak.upper
    assert forecast.peak.upper - forecast.peak.lower < 0.01 * peak
    assert forecast.dimensions['{app="b"}'].expected == pytest.approx(10.0)


def test_after_the_first_read_only_the_new_steps_are_fetched(
    history_server: tuple[PrometheusHarness, float, float],
) -> None:
    harness, *_ = history_server
    s = settings(harness.url, step_s=1, lookback_s=3600)
    with PrometheusClient(s.prometheus) as client:
        counted = Counted(client)
        history = PrometheusHistory(counted, s)
        first = history.series(time.time())
        assert first.length == 3600
        counted.ranges.clear()
        harness.exporter.set_gauge(METRIC, {"app": "a"}, 1234.0)
        harness.wait_for_scrapes(2)
        later = history.series(time.time())
    ((start, end),) = counted.ranges
    assert start == first.end - 1  # the last step again (a late scrape), then the new ones
    assert end == later.end
    assert later.length == 3600  # the oldest dropped
    assert later.values['{app="a"}'][-1] == 1234.0
    assert history.fetched_points == 3600 + (end - start + 1)


def test_monitor_prints_the_forecast(
    history_server: tuple[PrometheusHarness, float, float],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    harness, *_ = history_server
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps({"prometheus": {"url": harness.url}, "load": {"query": f"sum({METRIC})"}})
    )
    main(["monitor", "--settings", str(path), "--format", "json"])
    document = json.loads(capsys.readouterr().out)
    forecast = document["forecast"]
    assert forecast["basis"] == "week"
    assert forecast["horizon_s"] == 720
    assert forecast["peak"]["lower"] <= forecast["peak"]["expected"] <= forecast["peak"]["upper"]
    main(["monitor", "--settings", str(path)])
    text = capsys.readouterr().out
    assert "forecast: peak over the next 720 s: " in text
    assert "seasonal by week and day" in text
