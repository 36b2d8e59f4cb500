"""How fast is the load forecast? 14 days of history at 1-minute steps (20,160 points).

Run: .venv/bin/python -m bench.forecast_speed [--repeat N]

Times :func:`tuner.model.forecast.forecast_load` (the pure function a cycle calls) on a noisy
load with daily and weekly seasons and a few gaps: as a scalar, and as a vector of 10
dimensions (each forecast, and their total). Prints the median and the spread of ``N`` runs
and the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from tuner.model.forecast import DAY_S, WEEK_S, LoadSeries, forecast_load
from tuner.model.load import SCALAR

STEP = 60.0
HORIZON = 720.0


def synthetic(days: float, dimensions: int, seed: int = 1) -> LoadSeries:
    """``days`` of a noisy daily and weekly load at 1-minute steps, 1 % of the steps missing."""
    rng = np.random.default_rng(seed)
    t = np.arange(STEP, days * DAY_S + STEP / 2, STEP)
    values = {}
    for d in range(dimensions):
        daily = 200 - 100 * np.cos(2 * np.pi * (t - 3600 * (3 + d)) / DAY_S)
        weekly = np.where((t % WEEK_S) >= 5 * DAY_S, 0.5, 1.0)
        load = daily * weekly * (1 + 0.05 * rng.standard_normal(len(t)))
        load[rng.random(len(t)) < 0.01] = np.nan
        values[SCALAR if dimensions == 1 else f'{{app="{d}"}}'] = np.maximum(load, 0.0)
    return LoadSeries.of(float(t[0]), STEP, values)


def timed(series: LoadSeries, repeat: int) -> list[float]:
    """Milliseconds per forecast, ``repeat`` times (after one warm-up call)."""
    forecast_load(series, series.end, HORIZON)
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        forecast_load(series, series.end, HORIZON)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    """Time the forecast and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    for days, dimensions in ((14, 1), (14, 10), (1, 1)):
        series = synthetic(days, dimensions)
        times = timed(series, args.repeat)
        what = "scalar" if dimensions == 1 else f"{dimensions} dimensions + total"
        print(
            f"{days:>2} days x {series.length:>6} points, {what:<22} median "
            f"{statistics.median(times):6.2f} ms  (min {min(times):.2f}, max {max(times):.2f}, "
            f"{args.repeat} runs)"
        )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
