"""``tuner monitor``: the last window's load, stability verdict and reason, to tune the load
query before letting the tuner act, the load forecast for the next horizon and what the daemon's
forecasts led to (the reserve: from its ``tuner_reserve_*`` metrics, when Prometheus scrapes
it). Reads only."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner import arguments
from tuner.monitor.window import clock_time, date_time
from tuner.redact import printable, redact_url
from tuner.settings import load_settings

if TYPE_CHECKING:
    from tuner.model.forecast import Forecast
    from tuner.model.window_report import WindowReport
    from tuner.monitor.prometheus import Queries

RESERVE_QUERIES = {
    "nodes": "sum by (pool) (tuner_reserve_nodes)",
    "standing": "sum(tuner_reserve_placeholders)",
    "created": "sum(increase(tuner_reserve_placeholders_created_total[{window}]))",
    "removed": "sum(increase(tuner_reserve_placeholders_removed_total[{window}]))",
}
"""What ``tuner monitor`` asks Prometheus about the daemon's reserve (``{window}``: the
window, in seconds)."""


def run_monitor(settings_path: Path | None, window_s: float | None, output: str) -> int:
    """Observe the window ending now and print it; exit status 1 when the verdict is unknown."""
    # Imported here: the other subcommands need not load the HTTP client.
    from tuner.model.forecast import forecast_from
    from tuner.model.window_report import Verdict
    from tuner.monitor.history import PrometheusHistory
    from tuner.monitor.observe import observe_window
    from tuner.monitor.prometheus import PrometheusClient

    settings = load_settings(settings_path)
    if window_s is not None:
        settings = replace(settings, windows=replace(settings.windows, measure_s=window_s))
    now = time.time()
    with PrometheusClient(settings.prometheus) as prometheus:
        report = observe_window(settings, now, prometheus)
        forecast: Forecast | None = None
        why: str | None = "not tried: Prometheus failed the window's query"
        reserve: dict[str, Any] | str = why or ""
        if not report.failed_query:  # else the history's query would fail (or wait) the same way
            history = PrometheusHistory(prometheus, settings)
            forecast, why = forecast_from(settings, history.series, now)
            reserve = daemon_reserve(prometheus, now, settings.windows.measure_s)
    # Label values and errors come from Prometheus: no credentials, no control characters
    # (JSON escapes them itself).
    if output == "json":
        document = {**report.to_json(), "forecast": forecast and forecast.to_json()}
        if why is not None:
            document["forecast_unavailable"] = why
        if isinstance(reserve, str):
            document["reserve_unavailable"] = reserve
        else:
            document["reserve"] = reserve
        text = json.dumps(document, indent=2)
    else:
        lines = (*forecast_lines(forecast, why), *reserve_lines(reserve))
        text = "\n".join((render_text(report), *lines))
    print(redact_url(text))
    return 1 if report.verdict is Verdict.UNKNOWN else 0


def render_text(report: WindowReport) -> str:
    """The report for a person."""
    length = report.end - report.start
    warmup = report.start - report.checked_from
    window = f"{date_time(report.start)} to {clock_time(report.end)} ({length:g} s)"
    if warmup:
        window += (
            f", stability checked from {clock_time(report.checked_from)} (warm-up {warmup:g} s)"
        )
    lines = [f"window:   {window}"]
    if report.load is None:
        lines.append("load:     unknown")
    elif report.load.is_scalar:
        lines.append(f"load:     {report.load}")
    else:
        count = len(report.load.values)
        header = (
            f"{count} dimensions, total {report.load.total:.6g}" if count > 1 else "1 dimension"
        )
        lines.append(f"load:     {header}")
        width = max(len(k) for k in report.load.values)
        lines += [f"            {k:<{width}}  {v:.6g}" for k, v in report.load.values.items()]
    if report.load_warning:
        lines.append(f"warning:  {report.load_warning}")
    lines += [
        f"query:    {report.load_query}",
        f"verdict:  {report.verdict.value}",
        f"reason:   {report.reason}",
        f"scope:    {report.judgement}",
        f"act:      {_act(report)}",
    ]
    if report.failed_query:
        lines.append(f"failed:   {report.failed_query}")
    else:
        lines.append(f"judged:   from {report.source}")
    if len(report.findings) > 1:
        lines.append("findings:")
        lines += [f"  - {finding}" for finding in report.findings]
    return "\n".join(printable(line) for line in lines)


def forecast_lines(forecast: Forecast | None, why: str | None) -> list[str]:
    """The forecast for a person (nothing when it is off)."""
    if forecast is None:
        return [] if why is None else [printable(f"forecast: unavailable: {why}")]
    peak = forecast.peak
    lines = [
        f"forecast: peak over the next {forecast.horizon_s:g} s: {peak.expected:.6g} "
        f"(band {peak.lower:.6g} to {peak.upper:.6g} at {forecast.quantile:.0%})",
        f"          {forecast.confidence}",
    ]
    if forecast.dimensions:
        width = max(len(k) for k in forecast.dimensions)
        lines += [f"            {k:<{width}}  {b}" for k, b in forecast.dimensions.items()]
    return [printable(line) for line in lines]


def daemon_reserve(prometheus: Queries, now: float, window_s: float) -> dict[str, Any] | str:
    """What the daemon's last forecast asked to hold (nodes per pool), the placeholders standing
    and those created and removed over the last window; or why it is unknown."""
    from tuner.monitor.prometheus import QueryError

    found: dict[str, Any] = {"over_s": window_s}
    try:
        for key, query in RESERVE_QUERIES.items():
            result = prometheus.instant(query.format(window=f"{window_s:g}s"), now)
            if isinstance(result, float):
                raise QueryError(query, "answered a scalar")
            if key == "nodes":
                found[key] = {s.label("pool"): int(s.last) for s in result if s.last}
            elif result:
                found[key] = round(result[0].last)
    except QueryError as err:
        return f"Prometheus failed: {err}"
    if "standing" not in found:
        return "no tuner_reserve_placeholders in Prometheus: is the daemon scraped, and running?"
    return found


def reserve_lines(reserve: dict[str, Any] | str) -> list[str]:
    """The daemon's reserve for a person."""
    if isinstance(reserve, str):
        return [printable(f"reserve:  unknown: {reserve}")] if reserve else []
    nodes = ", ".join(f"{c} of {p}" for p, c in sorted(reserve["nodes"].items())) or "no node"
    return [
        printable(
            f"reserve:  {nodes} held ahead of the forecast; placeholders standing "
            f"{reserve['standing']}, created {reserve.get('created', 0)} and removed "
            f"{reserve.get('removed', 0)} over the last {reserve['over_s']:g} s"
        )
    ]


def _act(report: WindowReport) -> str:
    if not report.actionable:
        return "no: the tuner would not act on this window"
    if report.whole_stable:
        return "yes, and the deployment would be recorded under this load"
    return "yes, keeping what changed out of the plan; not recorded (the cluster changed)"


def add_monitor_parser(commands: Any) -> None:
    """Register ``monitor`` on the CLI's subparsers."""
    monitor = commands.add_parser(
        "monitor",
        help="the last window: load, stability verdict and why; the load forecast (reads only)",
    )
    monitor.add_argument("--settings", type=Path, help="settings.json (load query, Prometheus)")
    monitor.add_argument(
        "--window", type=arguments.seconds, help="window length in seconds (default: measure_s)"
    )
    monitor.add_argument("--format", choices=("text", "json"), default="text")
    monitor.set_defaults(run=lambda a: run_monitor(a.settings, a.window, a.format))
