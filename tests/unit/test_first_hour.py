"""A fresh daemon's first hour: when it can first judge a window and remove a node, and what a
single cycle lacks (``tuner run --once``)."""

from __future__ import annotations

import random

from testkit.builders import cluster, node, pod
from tuner.analyse.decision import analyse
from tuner.analyse.removal import CandidateTimers
from tuner.cycle import CycleReport, Outcome
from tuner.daemon.first_hour import first_hour, once_lacks, startup_lines
from tuner.model.load import Load
from tuner.model.window_report import KSM, SNAPSHOTS, Verdict, WindowReport
from tuner.monitor.window import clock_time
from tuner.report.build import build_report
from tuner.settings import Analyse, Pricing, Settings, Windows

NOW = 1_700_000_000.0


def defaults(warmup_s: float = 300.0) -> Settings:
    """The shipped deploy/ and chart windows: 600 s, retried every 60 s, 300 s warm-up."""
    return Settings(windows=Windows(measure_s=600, retry_s=60, warmup_s=warmup_s))


def test_without_kube_state_metrics_the_first_verdict_waits_a_window_and_its_warm_up() -> None:
    hour = first_hour(defaults(), NOW, None)
    assert hour.verdict_at == NOW + 900
    assert hour.removal_at == NOW + 900 + 600  # candidate_delay_s 600: one more window
    assert "API snapshots" in hour.history
    verdict, removal = startup_lines(defaults(), NOW, hour)
    assert verdict.startswith(f"first verdict possible at {clock_time(NOW + 900)} (in 900 s)")
    assert "a window of 600 s and its warm-up of 300 s" in verdict
    assert removal.startswith(
        f"first node removal possible at {clock_time(NOW + 1500)} at the earliest (in 1500 s)"
    )
    assert "analyse.candidate_delay_s 600 s" in removal


def test_kube_state_metrics_history_lets_the_first_cycle_judge() -> None:
    settings = defaults()
    assert first_hour(settings, NOW, NOW - 3600).verdict_at == NOW
    # Series for the last 500 s only: the window and warm-up fill at the next retry after 400 s.
    partial = first_hour(settings, NOW, NOW - 500)
    assert partial.verdict_at == NOW + 420
    assert "kube-state-metrics series in Prometheus since" in partial.history


def test_the_candidate_delay_is_counted_in_whole_windows() -> None:
    settings = Settings(
        windows=Windows(measure_s=600, retry_s=60), analyse=Analyse(candidate_delay_s=900)
    )
    hour = first_hour(settings, NOW, NOW - 3600)
    assert hour.removal_at == NOW + 1200
    no_delay = Settings(analyse=Analyse(candidate_delay_s=0))
    assert first_hour(no_delay, NOW, NOW - 3600).removal_at == NOW


def _report(outcome: Outcome, window: WindowReport, *, timers: bool) -> CycleReport:
    settings = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset()),
    )
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    start = CandidateTimers() if timers else None
    analysis = analyse(c, settings, [], random.Random(0), start, NOW)
    plan = build_report(c, settings, analysis)
    return CycleReport(
        outcome, NOW - 600, NOW, analysis.reason, 600, window, Load.scalar(1.0), plan
    )


def test_a_single_cycle_names_the_candidate_delay_it_started() -> None:
    window = WindowReport(Verdict.STABLE, "nothing changed", Load.scalar(1.0), NOW - 600, NOW, 0)
    report = _report(Outcome.STAYED, window, timers=True)
    assert "no candidate has passed its candidate delay yet" in report.reason
    lacks = once_lacks(report, Settings())
    assert lacks is not None
    assert lacks.startswith("2 node(s) passed the removal check (a, b)")
    assert "analyse.candidate_delay_s 600 s" in lacks
    assert "tuner plan --live" in lacks


def test_a_single_cycle_without_kube_state_metrics_says_so() -> None:
    window = WindowReport(Verdict.UNKNOWN, "no snapshot", None, NOW - 600, NOW, 0, source=SNAPSHOTS)
    report = CycleReport(Outcome.UNKNOWN, NOW - 600, NOW, "no snapshot", 60, window)
    lacks = once_lacks(report, defaults())
    assert lacks is not None
    assert "kube-state-metrics" in lacks and "900 s" in lacks
    failed = WindowReport(Verdict.UNKNOWN, "query failed", None, NOW - 600, NOW, 0, source=KSM)
    assert once_lacks(replace_window(report, failed), defaults()) is None


def replace_window(report: CycleReport, window: WindowReport) -> CycleReport:
    return CycleReport(report.outcome, report.start, report.end, report.reason, 60, window)
