"""What a cycle says in the logs: window, verdict, load, the scope judged and why the window is or
is not actionable, the load forecast for the next horizon, each option's cost, the decision,
each action and its verification. With JSON logs the same facts are fields of the records."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from tuner.cycle import CycleReport, Outcome
from tuner.model.onboarding import Placement
from tuner.monitor.window import clock_time
from tuner.plan.actions import Add, Migrate, action_json
from tuner.plan.reserve import per_pool, pools_text
from tuner.report.options import SHOWN
from tuner.report.text import describe

UNCONTROLLED = "placement not controlled: not onboarded, the scheduler chose the node"


def _cost(value: float) -> str | None:
    return None if math.isinf(value) else f"{value:.4f}"


def log_cycle(report: CycleReport, log: logging.Logger, *, once: bool = False) -> None:
    """Log one cycle: a line per fact, each carrying the cycle's outcome as a field (``once``:
    the only cycle, so no word of the next)."""
    base = {"outcome": report.outcome.value, "window_start": report.start, "window_end": report.end}
    window = f"{clock_time(report.start)} to {clock_time(report.end)}"
    if report.window is not None:
        seen = report.window
        load = "unknown" if seen.load is None else f"{seen.load.total:.6g}"
        total = None if report.load is None else report.load.total
        log.info(
            "window %s: %s, load %s: %s",
            window,
            seen.verdict.value,
            load,
            seen.reason,
            extra={**base, "verdict": seen.verdict.value, "load": total},
        )
        if seen.load_warning:
            log.warning("window %s: %s", window, seen.load_warning, extra=base)
        actionable = "actionable" if seen.actionable else "not actionable"
        if seen.actionable and not seen.whole_stable:
            actionable += " (not recorded: the whole cluster was not stable)"
        log.info(
            "window %s: %s",
            actionable,
            seen.judgement,
            extra={
                **base,
                "scope": seen.scope.value,
                "actionable": seen.actionable,
                "whole_stable": seen.whole_stable,
                **seen.unsettled.to_json(),
            },
        )
    if report.unobserved:
        log.warning(
            "nodes the window did not observe (joined after it), kept out of the plan and "
            "the deployment not recorded: %s",
            ", ".join(sorted(report.unobserved)),
            extra={**base, "unobserved": sorted(report.unobserved)},
        )
    _log_forecast(report, log, base)
    _log_reserve(report, log, base)
    plan = report.plan
    if plan is not None:
        a = plan.analysis
        currency = plan.currency
        options = "".join(
            f", {SHOWN[p.option].label} {_cost(p.cost_after) or SHOWN[p.option].absent}"
            for p in a.proposals
        )
        log.info(
            "options (%s/h): current %s%s; decision %s: %s",
            currency,
            _cost(a.cost_current),
            options,
            a.decision.value,
            a.reason,
            extra={
                **base,
                "decision": a.decision.value,
                "cost_current": a.cost_current,
                **{SHOWN[p.option].field: _cost(p.cost_after) for p in a.proposals},
                "cost_after": a.cost_after,
            },
        )
        if report.recorded:
            load = "unknown" if report.load is None else f"{report.load.total:.6g}"
            log.info("recorded as %s (load %s)", report.recorded, load, extra=base)
        _log_actions(report, log, base)
    if once:
        log.info("cycle %s: %s", report.outcome.value, report.reason, extra=base)
        return
    log.info(
        "cycle %s; next in %.0f s: %s",
        report.outcome.value,
        report.next_in,
        report.reason,
        extra={**base, "next_in": report.next_in},
    )


def _log_forecast(report: CycleReport, log: logging.Logger, base: Mapping[str, object]) -> None:
    forecast = report.forecast
    if forecast is None:
        if report.no_forecast is not None:
            log.info("forecast unavailable: %s", report.no_forecast, extra=base)
        return
    peak = forecast.peak
    log.info(
        "forecast: %s",
        forecast,
        extra={
            **base,
            "forecast_expected": peak.expected,
            "forecast_lower": peak.lower,
            "forecast_upper": peak.upper,
            "forecast_horizon_s": forecast.horizon_s,
            "forecast_basis": forecast.basis.value,
            "forecast_errors": forecast.errors,
        },
    )


def _log_reserve(report: CycleReport, log: logging.Logger, base: Mapping[str, object]) -> None:
    reserve, held = report.reserve, report.reserved
    if reserve is None:
        return
    line = f"reserve: {pools_text(reserve)} until {clock_time(reserve.until)}: {reserve.reason}"
    fields: dict[str, object] = {"reserve_nodes": per_pool(reserve), "reserve_until": reserve.until}
    if held is not None:
        line += (
            f"; placeholders created {len(held.created)}, removed {len(held.removed)}, "
            f"standing {held.standing}"
        )
        fields |= {
            "placeholders_created": list(held.created),
            "placeholders_removed": list(held.removed),
            "placeholders_standing": held.standing,
        }
        if held.failed is not None:
            line += f"; stopped: {held.failed}"
            fields["reserve_failed"] = held.failed
    level = logging.WARNING if held is not None and held.failed else logging.INFO
    log.log(level, "%s", line, extra={**base, **fields})


def _log_actions(report: CycleReport, log: logging.Logger, base: Mapping[str, object]) -> None:
    assert report.plan is not None
    actions = report.plan.actions
    result = report.result
    if result is None:
        return
    done = len(result.done)
    for number, action in enumerate(actions, 1):
        placement = {}
        if report.outcome is Outcome.PLANNED:
            status = "planned (dry run: not carried out)"
        elif number <= done:
            status = "verified"
            if action in result.eviction_only:
                status += f" ({UNCONTROLLED})"
                placement = {"placement": Placement.EVICTION_ONLY.value}
            landed = next((n for a, n in result.landed_elsewhere if a == action), None)
            if landed is not None and isinstance(action, Migrate | Add):
                status += (
                    f" (landed elsewhere: on {landed}, not its destination {action.target}: "
                    "the scheduler's other scores outweighed the label)"
                )
                placement = {"landed": landed}
        elif number == done + 1 and not result.completed:
            status = f"failed: {result.reason}"
        else:
            status = "not started"
        log.info(
            "action %d/%d %s: %s",
            number,
            len(actions),
            describe(action),
            status,
            extra={
                **base,
                "action": action_json(action),
                "status": status.split(":")[0].split(" (")[0],
                **placement,
            },
        )
