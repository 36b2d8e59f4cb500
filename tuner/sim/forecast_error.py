"""How wrong the load forecast is on a scenario, at the horizon the tuner would use.

Every ``every_s`` of the run, the forecast is made from what the tuner's load source holds
then (:class:`~tuner.sim.history.SimLoadHistory`, which refuses the future) and compared with
the peak load the simulation then served over the horizon: the mean absolute percentage error
of the expected peak (MAPE), and how often the real peak was above the band's upper edge (the
share that matters for removing a node) or under its lower edge. The load a scenario serves
does not depend on the strategy, so this needs no simulation of the cluster.

The horizon is the scenario's node start-up (the Cluster Autoscaler model's provisioning
delay, Karpenter's too) plus the tuner's window; the evaluation holds each tuner's row to the
forecast its own settings make (:func:`forecast_key`, :func:`keyed_error`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuner.model.forecast import DEFAULT_QUANTILE, forecast_load
from tuner.settings import Settings
from tuner.sim.engine import Scenario
from tuner.sim.history import SimLoadHistory, step_means

WINDOW_S = 600.0
"""The tuner's window in the simulator (``tuner.sim.strategies.tuner``)."""


@dataclass(frozen=True)
class ForecastError:
    """The forecast's error over one scenario."""

    scenario: str
    horizon_s: float
    forecasts: int
    mape: float
    """Mean of |real peak - expected peak| / real peak."""
    above: float
    """Share of forecasts whose real peak was above the upper edge."""
    below: float
    """Share of forecasts whose real peak was under the lower edge."""
    width: float
    """Mean band width (upper - lower) relative to the expected peak."""
    history_s: float
    """History the first forecast had (before the run, and the warm-up)."""
    bases: dict[str, int]
    """Forecasts per basis (week, day, level)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "horizon_s": self.horizon_s,
            "forecasts": self.forecasts,
            "mape": round(self.mape, 4),
            "above_band": round(self.above, 4),
            "below_band": round(self.below, 4),
            "band_width": round(self.width, 4),
            "history_h": round(self.history_s / 3600, 2),
            "bases": self.bases,
        }


ForecastKey = tuple[float, float, float, float]
"""What a forecast's error on a scenario depends on besides the scenario: the step, the
look-back, the horizon and the band's quantile."""


def forecast_key(settings: Settings) -> ForecastKey | None:
    """The forecast a tuner with these settings makes each cycle (None: it makes none)."""
    options = settings.forecast
    if not options.enabled:
        return None
    horizon = options.horizon(settings.windows)
    return options.step_s, options.lookback_s, horizon, options.quantile


def keyed_error(scenario: Scenario, key: ForecastKey) -> ForecastError:
    """:func:`forecast_error` of the forecast ``key`` describes."""
    step, lookback, horizon, quantile = key
    return forecast_error(
        scenario, step_s=step, lookback_s=lookback, horizon_s=horizon, quantile=quantile
    )


def tuner_horizon(scenario: Scenario) -> float:
    """The node start-up plus the window."""
    return scenario.autoscaler.provisioning_delay + WINDOW_S


def forecast_error(
    scenario: Scenario,
    *,
    every_s: float = 600.0,
    step_s: float = 60.0,
    lookback_s: float = 14 * 86400.0,
    horizon_s: float | None = None,
    quantile: float = DEFAULT_QUANTILE,
) -> ForecastError:
    """The forecast's error on ``scenario`` from every ``every_s`` of its run."""
    horizon = tuner_horizon(scenario) if horizon_s is None else horizon_s
    now = [0.0]
    history = SimLoadHistory(scenario, lambda: now[0], step_s, lookback_s)
    ahead = math.ceil(horizon / step_s - 1e-9)
    errors: list[float] = []
    above = below = 0
    widths: list[float] = []
    bases: Counter[str] = Counter()
    first_history = math.nan
    for at in np.arange(every_s, scenario.duration - horizon + 1e-9, every_s):
        now[0] = float(at)
        forecast = forecast_load(history.series(now[0]), now[0], horizon, quantile)
        if math.isnan(first_history):
            first_history = forecast.history_s
        real = float(step_means(scenario, at + step_s * np.arange(1, ahead + 1), step_s).max())
        peak = forecast.peak
        if real > 0:
            errors.append(abs(real - peak.expected) / real)
        above += real > peak.upper
        below += real < peak.lower
        widths.append((peak.upper - peak.lower) / peak.expected if peak.expected > 0 else 0.0)
        bases[forecast.basis.value] += 1
    count = len(widths)
    return ForecastError(
        scenario=scenario.name,
        horizon_s=horizon,
        forecasts=count,
        mape=float(np.mean(errors)) if errors else math.nan,
        above=above / count if count else math.nan,
        below=below / count if count else math.nan,
        width=float(np.mean(widths)) if widths else math.nan,
        history_s=first_history,
        bases=dict(bases),
    )
