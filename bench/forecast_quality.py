"""How wrong is the load forecast? Per scenario, at the horizon the tuner would use.

Run: .venv/bin/python -m bench.forecast_quality [--every S] [--json FILE] [names...]

For every shipped scenario (``tuner simulate --scenario all``) and the extra scenarios below,
:func:`tuner.sim.forecast_error.forecast_error`: every ``--every`` seconds of the run, the
forecast from what the tuner's load source holds then (the simulation's past and the trace's
days before the run; never the future), against the peak load the run then served over the
horizon (the scenario's node start-up plus the window). Prints MAPE, how often the real peak
was above the band's upper edge and under its lower edge, the mean band width, and which
basis the forecasts rested on.

The model's constants were chosen on the shipped scenarios and ``bikeshare-d14`` (TUNING).
HELD_OUT are traces' days no choice looked at: a check of the model, not a fit.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from tuner.sim.engine import Scenario
from tuner.sim.forecast_error import ForecastError, forecast_error
from tuner.sim.scenario_file import build
from tuner.sim.scenarios import SCENARIOS, scenario


def _single(name: str, trace: str, first_day: int, hours: float, peak: float) -> dict[str, Any]:
    """php-apache on one trace from ``first_day``: its days before are the history."""
    return {
        "name": name,
        "title": f"php-apache on {trace} from day {first_day}",
        "hours": hours,
        "pools": [{"name": "pool", "node_type": "e2-standard-4", "max": 30, "initial": 2}],
        "applications": [
            {"app": "php-apache", "trace": trace, "first_day": first_day, "peak": peak}
        ],
    }


TUNING: dict[str, dict[str, Any]] = {
    "bikeshare-d14": _single("bikeshare-d14", "capital-bikeshare", 14, 168, 60),
}
"""Beside the shipped scenarios, what the model's constants were chosen on: two weeks of
history before a week of the Capital Bikeshare trace (the weekly season)."""
HELD_OUT: dict[str, dict[str, Any]] = {
    "azure-d20": _single("azure-d20", "azure_v2", 20, 72, 37),
    "google-d21": _single("google-d21", "google2019", 21, 72, 37),
    "bikeshare-d21": _single("bikeshare-d21", "capital-bikeshare", 21, 96, 60),
}
"""Days of the traces no tuning choice looked at, each with 14 or more days of history."""


def scenarios(names: list[str]) -> list[tuple[str, Scenario]]:
    """(group, scenario) for the names, or every shipped, tuning and held-out one."""
    extra = {**TUNING, **HELD_OUT}
    chosen = names or [*SCENARIOS, *TUNING, *HELD_OUT]
    out = []
    for name in chosen:
        group = "held out" if name in HELD_OUT else "tuning" if name in TUNING else "shipped"
        out.append((group, build(extra[name]) if name in extra else scenario(name)))
    return out


def row(group: str, error: ForecastError, hours: float) -> str:
    bases = ", ".join(f"{k} {v}" for k, v in sorted(error.bases.items()))
    return (
        f"| {error.scenario} | {group} | {hours:g} | {error.history_s / 3600:.1f} | "
        f"{error.horizon_s:.0f} | {error.forecasts} | {error.mape:.1%} | {error.above:.1%} | "
        f"{error.below:.1%} | {error.width:.0%} | {bases} |"
    )


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="scenarios (default: all, tuning, held out)")
    parser.add_argument("--every", type=float, default=300.0, help="seconds between forecasts")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}\n")
    print(
        "| scenario | set | hours | history at start (h) | horizon (s) | forecasts | MAPE | "
        "above band | under band | band width | basis |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    figures = []
    for group, sc in scenarios(args.names):
        error = forecast_error(sc, every_s=args.every)
        print(row(group, error, sc.duration / 3600), flush=True)
        figures.append({"set": group, **error.to_json()})
    print(f"\n{time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
