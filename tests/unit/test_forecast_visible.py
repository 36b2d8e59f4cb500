"""The forecast where people and tools see it: each cycle's report, the cycle log (text and
JSON fields), the daemon's metrics, ``tuner monitor``; and its settings."""

from __future__ import annotations

import json
import logging
import random
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from knowledge.memory import MemoryKnowledge
from testkit.builders import cluster, node, pod
from tuner.cycle import CycleReport, Outcome, Ports, TransitionResult, run_cycle
from tuner.cycle import CycleState as State
from tuner.daemon.cycle_log import log_cycle
from tuner.daemon.logs import JsonFormatter
from tuner.daemon.metrics import Metrics
from tuner.errors import InputError, ServiceError
from tuner.model.cluster import Cluster
from tuner.model.forecast import DAY_S, LoadSeries, forecast_load
from tuner.model.load import SCALAR, Load
from tuner.model.window_report import Verdict, WindowReport
from tuner.monitor.command import forecast_lines
from tuner.plan.actions import Action
from tuner.settings import ForecastSettings, Settings, Windows, settings_from_dict

STEP = 60.0


def two_days(end: float) -> LoadSeries:
    t = np.arange(end - 2 * DAY_S + STEP, end + 1, STEP)
    return LoadSeries.of(t[0], STEP, {SCALAR: 200 - 100 * np.cos(2 * np.pi * t / DAY_S)})


class Stable:
    def observe(self, start: float, end: float) -> WindowReport:
        return WindowReport(Verdict.STABLE, "nothing changed", Load.scalar(1.0), start, end, start)


class Still:
    def read(self) -> Cluster:
        return cluster([node("a")], [pod("w-1", "a")])

    def check(self, actions: list[Action]) -> TransitionResult:
        return TransitionResult((), True)

    def carry_out(self, actions: list[Action]) -> TransitionResult:
        return TransitionResult(tuple(actions), True)

    def reclaim_unremoved(self, now: float) -> tuple[str, ...]:
        return ()

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        return ()


class History:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.asked: list[float] = []

    def series(self, end: float) -> LoadSeries:
        self.asked.append(end)
        if self.fail is not None:
            raise self.fail
        return two_days(end)


def cycle(history: History | None, settings: Settings | None = None) -> CycleReport:
    settings = settings or Settings(windows=Windows(measure_s=600))
    ports = Ports(Stable(), Still(), MemoryKnowledge(), history=history)  # type: ignore[arg-type]
    report, _ = run_cycle(10 * DAY_S, State(), settings, ports, random.Random(0))
    return report


def test_each_cycle_reports_the_forecast_for_a_start_up_and_a_window() -> None:
    history = History()
    report = cycle(history, Settings(windows=Windows(measure_s=600), forecast=ForecastSettings()))
    assert history.asked == [10 * DAY_S]
    assert report.forecast is not None
    assert report.forecast.horizon_s == 120 + 600  # node_startup_s + measure_s
    assert report.forecast.at == 10 * DAY_S
    assert report.no_forecast is None


def test_a_cycle_without_a_history_port_or_with_the_forecast_off_has_none() -> None:
    assert cycle(None).forecast is None
    off = Settings(forecast=ForecastSettings(enabled=False))
    history = History()
    report = cycle(history, off)
    assert report.forecast is None and report.no_forecast is None
    assert history.asked == []


def test_a_history_that_cannot_be_read_says_why_and_the_cycle_goes_on() -> None:
    report = cycle(History(ServiceError("load history: Prometheus unreachable")))
    assert report.outcome is Outcome.STAYED
    assert report.forecast is None
    assert report.no_forecast == "load history: Prometheus unreachable"


def forecast_report() -> CycleReport:
    forecast = forecast_load(two_days(10 * DAY_S), 10 * DAY_S, 720)
    return CycleReport(Outcome.STAYED, 0, 600, "stay", 600, forecast=forecast)


def test_the_cycle_log_says_the_forecast(caplog: pytest.LogCaptureFixture) -> None:
    report = forecast_report()
    assert report.forecast is not None
    with caplog.at_level(logging.INFO):
        log_cycle(report, logging.getLogger("tuner.daemon"))
    (record,) = [r for r in caplog.records if r.getMessage().startswith("forecast:")]
    assert "peak over the next 720 s" in record.getMessage()
    assert "seasonal by day" in record.getMessage()
    fields = json.loads(JsonFormatter().format(record))
    assert fields["forecast_expected"] == report.forecast.peak.expected
    assert fields["forecast_upper"] == report.forecast.peak.upper
    assert fields["forecast_basis"] == "day"
    caplog.clear()
    with caplog.at_level(logging.INFO):
        log_cycle(
            CycleReport(Outcome.STAYED, 0, 600, "stay", 600, no_forecast="no load in the history"),
            logging.getLogger("tuner.daemon"),
        )
    assert "forecast unavailable: no load in the history" in caplog.text


def test_the_metrics_expose_the_forecast() -> None:
    metrics = Metrics(stale_after_s=3600)
    server = metrics.serve(0, "127.0.0.1")
    try:
        report = forecast_report()
        assert report.forecast is not None
        metrics.observe(report, 0.1)
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
    peak = report.forecast.peak
    for bound, value in (("expected", peak.expected), ("lower", peak.lower), ("upper", peak.upper)):
        assert f'tuner_load_forecast{{bound="{bound}"}} {value!r}' in text


def test_monitor_prints_the_forecast() -> None:
    report = forecast_report()
    lines = forecast_lines(report.forecast, None)
    assert lines[0].startswith("forecast: peak over the next 720 s: ")
    assert "at 95%" in lines[0]
    assert "seasonal by day" in lines[1]
    assert forecast_lines(None, "Prometheus unreachable") == [
        "forecast: unavailable: Prometheus unreachable"
    ]
    assert forecast_lines(None, None) == []


def test_forecast_settings(tmp_path: Path) -> None:
    default = settings_from_dict({})
    assert default.forecast.lookback_s == 14 * DAY_S
    assert default.forecast.horizon(default.windows) == 120 + 600
    chosen = settings_from_dict(
        {"forecast": {"step_s": 30, "horizon_s": 1800, "quantile": 0.9, "lookback_s": 86400}}
    )
    assert chosen.forecast.horizon(chosen.windows) == 1800
    assert chosen.forecast.quantile == 0.9
    slow = settings_from_dict({"forecast": {"node_startup_s": 300}, "windows": {"measure_s": 900}})
    assert slow.forecast.horizon(slow.windows) == 1200


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"horizon_s": 30}, "forecast.horizon_s: 30 is shorter than one step"),
        ({"quantile": 1}, "forecast.quantile: 1 is greater than or equal to the maximum of 1"),
        ({"lookback_s": 60}, "forecast.lookback_s: 60 is less than the minimum of 3600"),
        ({"horizon_s": 172800}, "forecast.horizon_s: 172800 is greater than the maximum"),
        ({"step": 60}, "forecast: unknown key 'step'"),
    ],
)
def test_bad_forecast_settings_name_the_field(section: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        settings_from_dict({"forecast": section})
