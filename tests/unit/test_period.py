"""The load's own period: found where the load repeats (at least twice), not where it does not
(a trend, the day's swing in a few hours, noise); the forecast rests on it without a day of
history, or beside the day where it forecast better; it never reads past now."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt
import pytest

from tuner.model.forecast import DAY_S, MIN_ERRORS, Basis, LoadSeries, forecast_load
from tuner.model.load import SCALAR
from tuner.model.period import PERIOD_WINDOW_S, detect_period
from tuner.reserving import forecast_at, reserve_forecast
from tuner.settings import Settings

Vector = npt.NDArray[np.float64]
STEP = 60.0
HORIZON = 720.0


def bursts(t: Vector, period_s: float = 1800.0, high: float = 20.0, low: float = 4.0) -> Vector:
    """``low`` for half of each period, ``high`` for the other half, 3-minute ramps between."""
    phase = (t % period_s) / period_s
    rise = np.clip((phase - 0.4) / 0.1, 0, 1)
    fall = np.clip((phase - 0.9) / 0.1, 0, 1)
    return low + (high - low) * (rise - fall)


def noisy(values: Vector, share: float = 0.03, seed: int = 1) -> Vector:
    rng = np.random.default_rng(seed)
    noise: Vector = values * (1 + share * rng.standard_normal(len(values)))
    return noise


def detected(values: Vector, step: float = STEP) -> float | None:
    period = detect_period(values, step, len(values) - 1)
    return None if period is None else period.steps * step


@pytest.mark.parametrize("period_s", [900.0, 1800.0, 3600.0, 6000.0])
def test_a_load_that_repeats_twice_has_its_period(period_s: float) -> None:
    t = np.arange(0.0, 2.2 * period_s + 1800, STEP)
    assert detected(noisy(bursts(t, period_s))) == pytest.approx(period_s, abs=STEP)


def test_less_than_twice_is_not_a_period() -> None:
    # 1.5 cycles: the last cycle has no whole earlier one to be compared with.
    t = np.arange(0.0, 1.5 * 3600.0, STEP)
    assert detected(noisy(bursts(t, 3600.0))) is None
    longer = np.arange(0.0, 2.05 * 3600.0, STEP)
    assert detected(noisy(bursts(longer, 3600.0))) == pytest.approx(3600.0, abs=STEP)


def test_the_shortest_period_is_found_not_its_multiples() -> None:
    t = np.arange(0.0, 8 * 3600.0, STEP)
    assert detected(noisy(bursts(t, 1200.0))) == pytest.approx(1200.0, abs=STEP)


@pytest.mark.parametrize(
    "shape",
    [
        lambda t: 10 + t / 3600,  # a trend correlates with itself at every lag
        lambda t: 200 - 100 * np.cos(2 * np.pi * (t - 3 * 3600) / DAY_S),  # hours of a day
        lambda t: np.full(len(t), 7.0),  # flat
        lambda t: 10 + np.random.default_rng(3).standard_normal(len(t)),  # noise
    ],
    ids=["trend", "day", "flat", "noise"],
)
def test_no_period_where_the_load_does_not_repeat(shape) -> None:  # type: ignore[no-untyped-def]
    t = np.arange(6 * 3600.0, 6 * 3600.0 + PERIOD_WINDOW_S, STEP)
    assert detected(np.asarray(shape(t), dtype=np.float64)) is None


def test_a_15_second_series_is_read_in_minutes() -> None:
    t = np.arange(0.0, 3 * 3600.0, 15.0)
    assert detected(noisy(bursts(t, 1800.0)), step=15.0) == pytest.approx(1800.0, abs=60.0)


def test_the_period_at_a_time_is_the_same_with_or_without_the_series_after_it() -> None:
    t = np.arange(0.0, 5 * 3600.0, STEP)
    # The load changes its period half way: the future holds a different pattern.
    full = noisy(np.where(t < 2.5 * 3600, bursts(t, 1800.0), bursts(t, 2700.0, high=35.0)))
    found = 0
    for origin in range(0, len(t), 7):
        truncated = full[: origin + 1].copy()
        assert detect_period(full, STEP, origin) == detect_period(truncated, STEP, origin)
        found += detect_period(truncated, STEP, origin) is not None
    assert found > 10  # the comparison is not only of Nones
    # And the forecast refuses a series that reaches past now, as before.
    series = LoadSeries.of(0.0, STEP, {SCALAR: full})
    with pytest.raises(ValueError, match="never sees the future"):
        forecast_load(series, 3 * 3600.0, HORIZON, own_period=True)


def test_without_a_day_of_history_the_forecast_foresees_the_next_rise() -> None:
    t = np.arange(0.0, 3 * 3600.0, STEP)
    now_index = int(np.flatnonzero((t % 1800) == 600)[-1])  # low, the rise due in 3 minutes
    load = noisy(bursts(t, 1800.0))
    series = LoadSeries.of(0.0, STEP, {SCALAR: load[: now_index + 1]})
    forecast = forecast_load(series, t[now_index], HORIZON, own_period=True)
    assert forecast.basis is Basis.PERIOD
    # Only the reserve's forecast rests on it: the release's stays on the level here.
    assert forecast_load(series, t[now_index], HORIZON).basis is Basis.LEVEL
    assert forecast.period_s == pytest.approx(1800.0)
    assert forecast.last < 5
    assert forecast.peak.expected == pytest.approx(20.0, rel=0.1)
    assert forecast.errors >= MIN_ERRORS and forecast.foresees
    assert forecast.peak.upper < 20.0 * 1.3  # measured, not the wide band of the level
    assert "its own period of 30 min" in forecast.confidence
    assert forecast.to_json()["period_s"] == pytest.approx(1800.0)
    # Before the load repeated twice it is the level, with the wide band.
    early = LoadSeries.of(0.0, STEP, {SCALAR: load[:40]})
    assert forecast_load(early, t[39], HORIZON, own_period=True).basis is Basis.LEVEL


def test_with_a_day_of_history_the_period_is_used_only_where_it_forecast_better() -> None:
    t = np.arange(0.0, 2 * DAY_S, STEP)
    day = 200 - 100 * np.cos(2 * np.pi * (t - 3 * 3600) / DAY_S)
    # A 37-minute batch on top of the day: it does not fall at the same time of day twice.
    batch = noisy(day + bursts(t, 37 * 60.0, high=150.0, low=0.0), share=0.01)
    now = int(np.flatnonzero((t % 2220) == 1020)[-1])
    series = LoadSeries.of(0.0, STEP, {SCALAR: batch[: now + 1]})
    forecast = forecast_load(series, t[now], HORIZON, own_period=True)
    assert forecast.basis is Basis.PERIOD
    real = float(batch[now + 1 : now + 13].max())
    assert forecast.peak.expected == pytest.approx(real, rel=0.1)
    # The day alone (no shorter period) stays seasonal by day.
    plain = LoadSeries.of(0.0, STEP, {SCALAR: noisy(day, share=0.01)[: now + 1]})
    assert forecast_load(plain, t[now], HORIZON, own_period=True).basis is Basis.DAY


class Bursts:
    """Three hours of a load that bursts every half hour, up to the time asked (never past it)."""

    def series(self, end: float) -> LoadSeries:
        t = np.arange(0.0, end + 1, STEP)
        return LoadSeries.of(0.0, STEP, {SCALAR: noisy(bursts(t, 1800.0))})


def test_the_reserve_plans_by_the_loads_own_period_the_release_by_the_cycles_forecast() -> None:
    now = 2 * 3600.0 + 600.0  # low, the rise due in 3 minutes
    off = Settings()
    cycle_forecast, _ = forecast_at(Bursts(), off, now)
    assert cycle_forecast is not None and cycle_forecast.basis is Basis.LEVEL
    assert reserve_forecast(Bursts(), off, now, cycle_forecast) is cycle_forecast
    on = replace(off, forecast=replace(off.forecast, reserve_max_nodes=1))
    ahead = reserve_forecast(Bursts(), on, now, cycle_forecast)
    assert ahead is not None and ahead.basis is Basis.PERIOD and ahead.foresees
    assert ahead.peak.expected > 2 * ahead.last
    assert reserve_forecast(None, on, now, None) is None


def test_a_load_without_a_period_plans_its_reserve_by_the_cycles_forecast_not_made_again() -> None:
    t = np.arange(0.0, 2 * DAY_S, STEP)
    day = noisy(200 - 100 * np.cos(2 * np.pi * (t - 3 * 3600) / DAY_S), share=0.01)

    class Day:
        def series(self, end: float) -> LoadSeries:
            return LoadSeries.of(0.0, STEP, {SCALAR: day[: int(end // STEP) + 1]})

    on = replace(Settings(), forecast=replace(Settings().forecast, reserve_max_nodes=1))
    now = t[-200]
    cycle_forecast, _ = forecast_at(Day(), on, now)
    assert cycle_forecast is not None and cycle_forecast.basis is Basis.DAY
    assert reserve_forecast(Day(), on, now, cycle_forecast) is cycle_forecast
    made = reserve_forecast(Day(), on, now, None)
    assert made is not None and made is not cycle_forecast
    assert made == cycle_forecast  # the same forecast, made again without one to reuse
    later = reserve_forecast(Day(), on, now + STEP, cycle_forecast)  # another cycle's: not it
    assert later is not None and later.at == now + STEP
