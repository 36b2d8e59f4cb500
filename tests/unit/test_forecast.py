"""The load forecast on synthetic series whose next hours are known: daily and weekly seasons,
gaps, short history, a flat and a noisy load, a step change; it never sees the future."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from tuner.model.forecast import (
    DAY_S,
    MIN_CONFIRMED,
    MIN_ERRORS,
    WEEK_S,
    WIDE,
    Basis,
    LoadSeries,
    NoHistory,
    forecast_load,
)
from tuner.model.load import SCALAR

STEP = 60.0
HORIZON = 720.0
Vector = npt.NDArray[np.float64]


def daily(t: Vector) -> Vector:
    """100 at night, 300 at 15:00 (a smooth daily swing)."""
    return 200 - 100 * np.cos(2 * np.pi * (t - 3 * 3600) / DAY_S)


def weekly(t: Vector) -> Vector:
    """The daily swing on weekdays, a third of it at weekends (days 5 and 6 of each week)."""
    weekend = (t % WEEK_S) >= 5 * DAY_S
    return np.where(weekend, daily(t) / 3, daily(t))


def series_of(load: Vector, start: float = 0.0) -> LoadSeries:
    return LoadSeries.of(start, STEP, {SCALAR: load})


def history(shape, days: float, end: float | None = None) -> tuple[LoadSeries, float]:  # type: ignore[no-untyped-def]
    """``days`` of ``shape`` at STEP ending at ``end`` (default: the last point), and now."""
    end = days * DAY_S if end is None else end
    t = np.arange(end - days * DAY_S + STEP, end + STEP / 2, STEP)
    return LoadSeries.of(t[0], STEP, {SCALAR: shape(t)}), float(t[-1])


def true_peak(shape, now: float) -> float:  # type: ignore[no-untyped-def]
    return float(shape(now + STEP * np.arange(1, HORIZON / STEP + 1)).max())


@pytest.mark.parametrize("hour", [3.0, 9.0, 15.0, 21.5])
def test_a_daily_season_is_forecast_from_the_same_time_yesterday(hour: float) -> None:
    load, now = history(daily, 3, end=2 * DAY_S + hour * 3600)
    forecast = forecast_load(load, now, HORIZON)
    assert forecast.basis is Basis.DAY
    assert forecast.peak.expected == pytest.approx(true_peak(daily, now), rel=1e-3)
    assert forecast.peak.lower <= forecast.peak.expected <= forecast.peak.upper
    assert forecast.errors >= MIN_ERRORS
    assert len(forecast.path) == HORIZON / STEP
    assert forecast.path[-1] == pytest.approx(float(daily(np.array([now + HORIZON]))[0]), 1e-3)


def test_the_week_tells_a_monday_from_a_sunday() -> None:
    # Two weeks of history, now Monday 08:00: yesterday was a quiet Sunday, last Monday was busy.
    monday_8 = 14 * DAY_S + 8 * 3600
    load, now = history(weekly, 14, end=monday_8)
    forecast = forecast_load(load, now, HORIZON)
    assert forecast.basis is Basis.WEEK
    want = true_peak(weekly, now)
    assert forecast.peak.expected == pytest.approx(want, rel=0.02)
    # The same series cut to six days knows only the days: it is caught out by the weekend.
    short, _ = history(weekly, 6, end=monday_8)
    days_only = forecast_load(short, now, HORIZON)
    assert days_only.basis is Basis.DAY
    assert abs(days_only.peak.expected - want) > abs(forecast.peak.expected - want)


def test_less_than_a_day_falls_back_to_the_recent_level_with_a_wide_band() -> None:
    load, now = history(daily, 0.25, end=12 * 3600)
    forecast = forecast_load(load, now, HORIZON)
    assert forecast.basis is Basis.LEVEL
    level = float(daily(np.array([now]))[0])
    assert forecast.peak.expected == pytest.approx(level, rel=0.05)
    assert forecast.peak.upper >= forecast.peak.expected * (1 + WIDE) - 1e-9
    assert "recent level" in forecast.confidence
    # A few minutes of history: still a forecast, with the wide band and the count it rests on.
    few, now = history(daily, 600 / DAY_S, end=12 * 3600)
    forecast = forecast_load(few, now, HORIZON)
    assert forecast.basis is Basis.LEVEL
    assert forecast.errors < MIN_ERRORS
    assert f"±{WIDE:.0%}" in forecast.confidence


def test_gaps_are_skipped_not_read_as_zero() -> None:
    load, now = history(daily, 8, end=7 * DAY_S + 15 * 3600)
    values = np.array(load.values[SCALAR])
    t = load.start + STEP * np.arange(load.length)
    # Prometheus was down for the whole of yesterday afternoon, and for 3 minutes just now.
    values[(t > now - DAY_S - 4 * 3600) & (t < now - DAY_S + 4 * 3600)] = np.nan
    values[-4:-1] = np.nan
    forecast = forecast_load(series_of(values, load.start), now, HORIZON)
    assert forecast.basis is Basis.WEEK
    assert forecast.peak.expected == pytest.approx(true_peak(daily, now), rel=0.01)


def test_no_load_at_the_last_step_says_so() -> None:
    load, now = history(daily, 2, end=DAY_S + 15 * 3600)
    values = np.array(load.values[SCALAR])
    values[-5:] = np.nan
    forecast = forecast_load(series_of(values, load.start), now, HORIZON)
    assert forecast.notes == ("no load at the last step (the last known is 300 s old)",)
    assert forecast.peak.expected == pytest.approx(true_peak(daily, now), rel=0.02)


def test_a_flat_load_is_forecast_flat_with_a_tight_band() -> None:
    load, now = history(lambda t: np.full(len(t), 42.0), 3)
    forecast = forecast_load(load, now, HORIZON)
    assert forecast.peak.expected == pytest.approx(42.0)
    assert forecast.peak.upper == pytest.approx(42.0)
    assert forecast.peak.lower == pytest.approx(42.0)


def test_the_band_of_a_noisy_load_covers_what_it_says() -> None:
    rng = np.random.default_rng(7)
    load, _ = history(daily, 10)
    noisy = np.array(load.values[SCALAR]) * (1 + 0.1 * rng.standard_normal(load.length))
    values = np.maximum(noisy, 0.0)
    above = 0
    origins = range(load.length - 200 * 12, load.length - 12, 12)
    for index in origins:  # the last 200 forecasts, each from the history up to then
        past = series_of(values[: index + 1], load.start)
        forecast = forecast_load(past, past.end, HORIZON, quantile=0.9)
        above += values[index + 1 : index + 13].max() > forecast.peak.upper
    # A 0.9 quantile: about 10 % above the band (measured on its own past, not guessed).
    assert 0.02 <= above / len(origins) <= 0.2


def test_a_step_change_carries_over_through_the_recent_level() -> None:
    # Ten days of the daily swing, then for the last two hours the load doubled.
    load, now = history(daily, 10, end=10 * DAY_S + 14 * 3600)
    t = load.start + STEP * np.arange(load.length)
    values = np.where(t > now - 2 * 3600, 2 * daily(t), daily(t))
    forecast = forecast_load(series_of(values, load.start), now, HORIZON)
    assert forecast.peak.expected == pytest.approx(2 * true_peak(daily, now), rel=0.03)


def test_a_load_vector_is_forecast_per_dimension_and_in_total() -> None:
    t = np.arange(STEP, 3 * DAY_S + STEP / 2, STEP)
    load = LoadSeries.of(t[0], STEP, {'{app="a"}': daily(t), '{app="b"}': np.full(len(t), 10.0)})
    forecast = forecast_load(load, float(t[-1]), HORIZON)
    assert set(forecast.dimensions) == {'{app="a"}', '{app="b"}'}
    assert forecast.dimensions['{app="b"}'].expected == pytest.approx(10.0)
    assert forecast.peak.expected == pytest.approx(true_peak(daily, t[-1]) + 10.0, rel=1e-3)
    assert forecast.to_json()["dimensions"]['{app="b"}']["expected"] == pytest.approx(10.0)


def test_it_never_sees_the_future() -> None:
    load, now = history(daily, 2)
    with pytest.raises(ValueError, match="never sees the future"):
        forecast_load(load, now - STEP, HORIZON)


def test_a_series_without_load_cannot_be_forecast() -> None:
    with pytest.raises(NoHistory):
        forecast_load(series_of(np.full(100, np.nan)), 99 * STEP, HORIZON)


@pytest.mark.parametrize(
    ("horizon", "quantile"), [(STEP / 2, 0.95), (DAY_S + 1, 0.95), (HORIZON, 1.0), (HORIZON, 0.4)]
)
def test_horizon_and_quantile_are_checked(horizon: float, quantile: float) -> None:
    load, now = history(daily, 1)
    with pytest.raises(ValueError, match=r"horizon|quantile"):
        forecast_load(load, now, horizon, quantile)


def test_a_forecast_says_what_it_rests_on() -> None:
    load, now = history(daily, 3)
    forecast = forecast_load(load, now, HORIZON)
    assert forecast.confidence == (
        f"seasonal by day; 3.0 days of history; band from {forecast.errors} past errors"
    )
    assert str(forecast).endswith(f"at 95%; {forecast.confidence}")
    assert forecast.to_json()["basis"] == "day"
    assert math.isclose(forecast.to_json()["peak"]["expected"], forecast.peak.expected)


def test_a_rise_the_baseline_misses_holds_the_upper_edge_to_its_trend() -> None:
    # Three flat days at 100; today, from 25 minutes ago, the load climbs 2 a minute (a weekend
    # morning against a weekday's baseline): the seasonal band, measured on the flat days,
    # stays near the level, but the rise under way reaches at least 150 + 2 x 12 by the
    # horizon's end.
    load, now = history(lambda t: np.full(len(t), 100.0), 3)
    values = np.array(load.values[SCALAR])
    values[-25:] = 100.0 + 2.0 * np.arange(1, 26)
    forecast = forecast_load(series_of(values, load.start), now, HORIZON)
    assert forecast.basis is Basis.DAY and forecast.errors >= MIN_ERRORS
    assert forecast.peak.upper == pytest.approx(150.0 + 2.0 * HORIZON / STEP)
    assert forecast.peak.expected < forecast.peak.upper


def test_a_falling_load_keeps_its_measured_band() -> None:
    load, now = history(lambda t: np.full(len(t), 100.0), 3)
    values = np.array(load.values[SCALAR])
    values[-25:] = 100.0 - 2.0 * np.arange(1, 26)
    forecast = forecast_load(series_of(values, load.start), now, HORIZON)
    assert forecast.peak.upper == pytest.approx(forecast.peak.expected)


def daily_rise(t: Vector) -> Vector:
    """100, and 150 for an hour from 10:00 every day."""
    return np.where((t % DAY_S - 10 * 3600) % DAY_S < 3600, 150.0, 100.0)


def test_past_rise_calls_the_load_confirmed_prove_the_forecast() -> None:
    load, now = history(daily_rise, 8, end=7 * DAY_S + 9 * 3600)
    forecast = forecast_load(load, now, HORIZON, lead_s=180.0)
    # each of the last week's rises was called from the 3 minutes before it, and came
    assert forecast.calls >= MIN_CONFIRMED
    assert forecast.confirmed == forecast.calls
    assert forecast.proven
    early, now = history(daily_rise, 2, end=DAY_S + 9 * 3600)  # one past rise only
    assert not forecast_load(early, now, HORIZON, lead_s=180.0).proven


def test_a_called_rise_that_did_not_come_is_not_confirmed() -> None:
    def stopped(t: Vector) -> Vector:
        """The daily rise, until it stopped two days ago."""
        return np.where(t < 6 * DAY_S, daily_rise(t), 100.0)

    load, now = history(stopped, 8, end=7 * DAY_S + 9 * 3600)
    forecast = forecast_load(load, now, HORIZON, lead_s=180.0)
    assert forecast.calls > forecast.confirmed  # yesterday's baseline still called it


def test_a_flat_load_calls_no_rise() -> None:
    load, now = history(lambda t: np.full(len(t), 100.0), 8)
    forecast = forecast_load(load, now, HORIZON, lead_s=180.0)
    assert (forecast.calls, forecast.confirmed, forecast.proven) == (0, 0, False)
