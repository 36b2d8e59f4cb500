"""Seasonal arithmetic over a load series at a fixed step (NaN in a gap), shared by the
forecast's bases: the same-phase mean of the last cycles, the recent level against it, and the
highest value over the coming steps. Pure functions over arrays."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]

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
