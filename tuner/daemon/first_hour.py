"""A fresh daemon's first hour: when it can first judge a window and first remove a node, and
what a single cycle (``tuner run --once``) lacks to do what ``tuner plan`` does.

A window is judged over itself and the warm-up before it (``windows.measure_s`` +
``windows.warmup_s``), from kube-state-metrics series in Prometheus or, without them, from API
snapshots the daemon takes from its start on; cycles before that are retried every
``windows.retry_s``. A node is removed only after it stayed a removal candidate for
``analyse.candidate_delay_s`` over windows the tuner may act on, a window apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuner.cycle import CycleReport, Outcome
from tuner.model.window_report import SNAPSHOTS
from tuner.monitor.window import clock_time
from tuner.settings import Settings


@dataclass(frozen=True)
class FirstHour:
    """The earliest times, and why."""

    verdict_at: float
    """The first cycle whose window can be judged."""
    removal_at: float
    """The first cycle that may remove a node (stable windows assumed)."""
    history: str
    """What the first verdict waits for."""


def first_hour(settings: Settings, now: float, series_from: float | None) -> FirstHour:
    """The first hour of a daemon started at ``now``; ``series_from`` is the first
    kube-state-metrics sample Prometheus holds over the span a window needs (None: absent, so
    windows are judged from the daemon's own API snapshots)."""
    windows = settings.windows
    span = windows.measure_s + windows.warmup_s
    if series_from is None:
        ready, history = now + span, "API snapshots taken from now on (no kube-state-metrics)"
    else:
        ready = max(now, series_from + span)
        history = f"kube-state-metrics series in Prometheus since {clock_time(series_from)}"
    retries = math.ceil(max(0.0, ready - now) / windows.retry_s - 1e-9)
    verdict_at = now + retries * windows.retry_s
    delay = settings.analyse.candidate_delay_s
    removal_at = verdict_at + math.ceil(delay / windows.measure_s - 1e-9) * windows.measure_s
    return FirstHour(verdict_at, removal_at, history)


def startup_lines(settings: Settings, now: float, hour: FirstHour) -> tuple[str, str]:
    """What the daemon logs on start: when its first verdict and first removal can come."""
    windows, delay = settings.windows, settings.analyse.candidate_delay_s
    verdict = (
        f"first verdict possible at {clock_time(hour.verdict_at)} "
        f"(in {hour.verdict_at - now:.0f} s): a window of {windows.measure_s:g} s and its "
        f"warm-up of {windows.warmup_s:g} s judged from {hour.history}"
    )
    removal = (
        f"first node removal possible at {clock_time(hour.removal_at)} at the earliest "
        f"(in {hour.removal_at - now:.0f} s): a node must stay a removal candidate for "
        f"analyse.candidate_delay_s {delay:g} s over windows the tuner may act on"
    )
    return verdict, removal


def once_lacks(report: CycleReport, settings: Settings) -> str | None:
    """What a single cycle lacked to act, when a running daemon would get it; None otherwise."""
    window = report.window
    if report.outcome is Outcome.UNKNOWN and window is not None and window.source == SNAPSHOTS:
        span = settings.windows.measure_s + settings.windows.warmup_s
        return (
            "a single cycle has no API snapshot from before it started, and Prometheus holds no "
            "kube-state-metrics series to judge the window by: scrape kube-state-metrics (check "
            f"with `tuner monitor`), or run the daemon, whose first verdict comes {span:g} s "
            "(windows.measure_s + windows.warmup_s) after it starts"
        )
    plan = report.plan
    if report.outcome is not Outcome.STAYED or plan is None or plan.analysis.timers is None:
        return None
    delay = settings.analyse.candidate_delay_s
    waiting = sorted(
        node for node, since in plan.analysis.timers.since if report.end - since < delay
    )
    if not waiting:
        return None
    return (
        f"{len(waiting)} node(s) passed the removal check ({', '.join(waiting[:5])}"
        f"{', ...' if len(waiting) > 5 else ''}) but a single cycle starts their candidate "
        f"delay now: they must stay candidates for analyse.candidate_delay_s {delay:g} s, "
        "which only a running daemon sees; `tuner plan --live` plans as if the delay had passed"
    )
