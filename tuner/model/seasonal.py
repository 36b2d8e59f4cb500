"""Seasonal arithmetic over a load series at a fixed step (NaN in a gap), shared by the
forecast's bases: the same-phase mean of the last cycles, the recent level against it, the
highest value over the coming steps, the errors of past forecasts and the line of a recent rise.
Pure functions over arrays."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]

RISE = 0.1
"""A past forecast *called a rise* when the load it expected over the lead was more than this
share above the load then (an HPA adds no pod within its 10 % tolerance)."""
CONFIRMED = 0.5
"""... and the load confirmed the call when its real peak over the lead rose at least this
share of the called rise above the load then."""
LAG_DECAY = 0.2
LEVEL_CLAMP = 4.0
"""The level correction is at most this factor either way (a near-empty baseline hour)."""


def lagged_mean(y: Vector, period: int, lags: int) -> Vector:
    """At each point, the decaying-weight mean of the values ``period``, ``2 period``, ...
    points before it (NaN where none is known)."""
    total = np.zeros(len(y))
    weight = np.zeros(len(y))
    w = 1.0
    for k in range(1, lags + 1):
        shift = k * period
        if shift >= len(y):
            break
        source = y[: len(y) - shift]
        known = ~np.isnan(source)
        total[shift:] += np.where(known, source, 0.0) * w
        weight[shift:] += known * w
        w *= LAG_DECAY
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weight > 0, total / weight, np.nan)


def level_ratio(y: Vector, baseline: Vector, span: int) -> Vector:
    """At each point, the ratio of the load to the baseline over the last ``span`` points
    (where both are known), within :data:`LEVEL_CLAMP`; 1 where it cannot be told."""
    both = ~(np.isnan(y) | np.isnan(baseline))
    observed = trailing_sum(np.where(both, y, 0.0), span)
    expected = trailing_sum(np.where(both, baseline, 0.0), span)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(expected > 0, observed / expected, 1.0)
    ratio = np.where(trailing_sum(both.astype(np.float64), span) > 0, ratio, 1.0)
    return np.clip(ratio, 1 / LEVEL_CLAMP, LEVEL_CLAMP)


def trailing_sum(x: Vector, span: int) -> Vector:
    """At each point, the sum of the last ``span`` values, itself included."""
    cumulative = np.concatenate(([0.0], np.cumsum(x)))
    ends = np.arange(1, len(x) + 1)
    return cumulative[ends] - cumulative[np.maximum(ends - span, 0)]


def ahead_max(x: Vector, ahead: int) -> Vector:
    """At each point, the highest known value over the next ``ahead`` points (NaN when none is
    known or the series ends first): a sliding maximum by doubling, O(n log ahead)."""
    # shifted[i] = x[i + 1]; widest[i] = max(shifted[i : i + width]), width doubling to ahead
    shifted = np.concatenate(
        (np.where(np.isnan(x[1:]), -np.inf, x[1:]), np.full(ahead + 1, -np.inf))
    )
    widest, width = shifted, 1
    while width * 2 <= ahead:
        widest = np.maximum(widest[:-width], widest[width:])
        width *= 2
    n = len(x)
    highest = np.maximum(widest[:n], widest[ahead - width : ahead - width + n])
    return np.where(np.isneginf(highest), np.nan, highest)


def corrected(
    y: Vector, baseline: Vector, origin: int, ahead: int, span: int
) -> tuple[Vector, Vector]:
    """The level correction at each point and the forecast peak it makes from each past point
    to ``origin``."""
    level = level_ratio(y, baseline, span)
    return level, (level * ahead_max(baseline, ahead))[: origin + 1]


def rising_line(y: Vector, origin: int, ahead: int, span: int) -> float:
    """The least-squares line through the known values of the ``span`` points to ``origin``,
    at ``ahead`` points after it, when it rises (0 when it does not, or fewer than half the
    points, at least 3, are known)."""
    recent = y[max(0, origin + 1 - span) : origin + 1]
    x = np.arange(len(recent), dtype=np.float64) - (len(recent) - 1)
    known = ~np.isnan(recent)
    if np.count_nonzero(known) < max(3, span // 2):
        return 0.0
    slope, at_origin = np.polyfit(x[known], recent[known], 1)
    return float(at_origin + slope * ahead) if slope > 0 else 0.0


def relative_errors(actual: Vector, peaks: Vector, floor: float) -> Vector:
    """The relative errors of forecast peaks (NaN where either is unknown)."""
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 on a load of zero: NaN
        errors: Vector = (actual - peaks) / np.maximum(peaks, floor)
    return errors


def closer(candidate: Vector, incumbent: Vector, /) -> bool:
    """Whether ``candidate``'s errors were smaller in mean absolute value than ``incumbent``'s
    where both were measured."""
    both = ~(np.isnan(candidate) | np.isnan(incumbent))
    if not both.any():
        return False
    return float(np.mean(np.abs(candidate[both]))) < float(np.mean(np.abs(incumbent[both])))


def mean_abs(x: Vector) -> float:
    """The mean absolute value of the known values (NaN when none is)."""
    x = x[~np.isnan(x)]
    return float(np.mean(np.abs(x))) if x.size else math.nan


def scale_of(y: Vector) -> float:
    """The load's 95th percentile (0 when none is known)."""
    known = y[~np.isnan(y)]
    return float(np.quantile(known, 0.95)) if known.size else 0.0


def last_known(y: Vector, origin: int) -> float:
    known = np.flatnonzero(~np.isnan(y[: origin + 1]))
    return float(y[known[-1]]) if known.size else 0.0


def rise_calls(
    y: Vector, baseline: Vector, level: Vector, lead: int, known: slice
) -> tuple[int, int]:
    """Of the past forecasts from ``baseline`` made at the points ``known`` (whose ``lead``
    points after are known), how many called a rise over the lead (their peak over it, by the
    ``level`` correction of :func:`corrected`, more than :data:`RISE` above the load then) and
    how many of those the load confirmed (its real peak over the lead at least
    :data:`CONFIRMED` of the called rise above the load then)."""
    called = (level * ahead_max(baseline, lead))[: known.stop + 1][known]
    then = y[known]
    real = ahead_max(y, lead)[known]
    with np.errstate(invalid="ignore"):
        calls = called > then * (1 + RISE)
        confirmed = calls & (real - then >= CONFIRMED * (called - then))
    return int(np.count_nonzero(calls)), int(np.count_nonzero(confirmed))


def band_edges(
    raw: float,
    quantiles: tuple[float, float, float],
    floor: float,
    sure: bool,
    rising: float,
    wide: float,
) -> tuple[float, float, float]:
    """The expected value, lower and upper edge of the band around the peak ``raw`` a model
    made, moved by the ``quantiles`` of its past relative errors (against at least ``floor``);
    at least ``wide`` either side unless ``sure``; its upper edge at least the ``rising``
    trend's (:func:`rising_line`)."""
    low, middle, high = quantiles
    unit = max(raw, floor)
    expected = max(0.0, raw + middle * unit)
    lower = max(0.0, raw + low * unit)
    upper = max(0.0, raw + high * unit, rising)
    if not sure:
        lower = min(lower, expected * (1 - wide))
        upper = max(upper, expected * (1 + wide), floor)
    return expected, min(lower, expected), max(upper, expected)


def blended(y: Vector, daily: Vector, weekly: Vector, recent: slice) -> Vector:
    """The daily and weekly baselines blended by their errors over ``recent`` (each weighs the
    other's squared mean error: the closer counts more); either alone where the other is not
    known."""
    day_error = mean_abs(y[recent] - daily[recent])
    week_error = mean_abs(y[recent] - weekly[recent])
    if math.isnan(week_error) or math.isnan(day_error) or day_error + week_error == 0:
        share = 0.5
    else:
        share = day_error**2 / (day_error**2 + week_error**2)
    mixed = np.where(np.isnan(weekly), daily, share * weekly + (1 - share) * daily)
    out: Vector = np.where(np.isnan(daily), weekly, mixed)
    return out


def age(y: Vector, origin: int, step: float) -> str:
    """How old the last known value up to ``origin`` is (``none`` when none is)."""
    known = np.flatnonzero(~np.isnan(y[: origin + 1]))
    return f"{(origin - known[-1]) * step:.0f} s old" if known.size else "none"


def known_span(y: Vector, origin: int, ahead: int) -> tuple[float, ...]:
    """The known values of the ``ahead`` steps up to ``origin`` (itself included), oldest first."""
    span = y[max(0, origin - ahead) : origin + 1]
    return tuple(float(v) for v in span[~np.isnan(span)])
