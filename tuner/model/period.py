"""The load's own period, from its recent past: a pure function (:func:`detect_period`).

A load that repeats every N minutes (a batch every half hour, an hourly cron, a test pattern)
is as predictable as one that follows the day, but hours of history cannot show a day. The
detector finds a period in the last few hours: the last cycle must correlate with the one
before it, so the period has repeated at least twice. :mod:`tuner.model.forecast` forecasts
from it as from the daily season.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]

PERIOD_WINDOW_S = 8 * 3600.0
"""The recent span the period detector looks at; the longest period it finds is half of it."""
PERIOD_MIN_S = 600.0
"""The shortest period it looks for (ten minutes: shorter, a cycle is a few steps)."""
PERIOD_STEP_S = 60.0
"""The detector works on the load averaged to this step at least (a 15 s series is read in
minutes: the same periods, a sixteenth of the work)."""
PERIOD_OVERLAP_S = 1800.0
"""The last cycle is compared with the one before over at least this span (half an hour of
minutes: a correlation over fewer points is noise)."""
PERIOD_CORRELATION = 0.8
"""A period is accepted when the load's last cycle correlates with the cycle before it at least
this much (its shifted copy explains two thirds of its variance; over the 30 points of the
shortest overlap, white noise reaches it at more than five standard errors)."""
PERIOD_DIP = 0.5
"""... and the correlation at some shorter lag was at least this much lower (a smooth trend
correlates with itself at every lag: that is no period)."""
PERIOD_HARMONIC = 0.05
"""Of the lags that pass, the shortest whose correlation is within this of the best is the
period (a load that repeats every 30 minutes repeats every 60 too)."""


@dataclass(frozen=True, slots=True)
class Period:
    """A period the load repeats with: ``steps`` long, holding over the last ``held`` steps."""

    steps: int
    held: int
    """How far back (in steps, to now) the load repeats itself one period earlier: the span
    whose forecast errors make the band."""


def detect_period(values: Vector, step: float, origin: int) -> Period | None:
    """The load's own period at point ``origin`` (now) of ``values`` (the load at each step of
    ``step``, NaN in a gap), or None. Only the points up to ``origin`` are read: the result is
    the same whether or not the series goes on after now.

    Over the last :data:`PERIOD_WINDOW_S` (on a grid of :data:`PERIOD_STEP_S` at least), for
    each lag from :data:`PERIOD_MIN_S` to half the known span: the Pearson correlation of the
    last ``max(lag, PERIOD_OVERLAP_S)`` of the load with the same span one lag earlier (the
    last cycle against the one before: the period must have repeated at least twice). A lag
    is a period when its correlation is a local maximum, at least :data:`PERIOD_CORRELATION`,
    and some shorter lag's was :data:`PERIOD_DIP` lower; of those, the shortest within
    :data:`PERIOD_HARMONIC` of the best. It holds over that span and, one period at a time
    further back, over each cycle that still correlates with the one before it at least
    :data:`PERIOD_CORRELATION` (within the window)."""
    factor = max(1, round(PERIOD_STEP_S / step))
    if len(values) < origin + 1:  # the last steps are not known yet: gaps
        values = np.concatenate((values, np.full(origin + 1 - len(values), np.nan)))
    width = round(PERIOD_WINDOW_S / (step * factor))
    grid = step * factor
    x = _block_means(values[max(0, origin + 1 - width * factor) : origin + 1], factor)
    known = np.flatnonzero(~np.isnan(x))
    if known.size == 0:
        return None
    x = x[known[0] :]
    shortest = max(2, math.ceil(PERIOD_MIN_S / grid - 1e-9))
    overlap = max(2, round(PERIOD_OVERLAP_S / grid))
    r = _lag_correlations(x, overlap)
    if len(r) <= shortest:
        return None
    known_r = np.where(np.isnan(r), -np.inf, r)
    padded = np.concatenate((np.full(2, -np.inf), known_r, np.full(2, -np.inf)))
    local = known_r >= np.lib.stride_tricks.sliding_window_view(padded, 5).max(axis=1)
    lowest = np.minimum.accumulate(np.where(np.isnan(r), np.inf, r))
    before = np.concatenate(([np.inf], lowest[:-1]))  # the lowest at a shorter lag (from 1)
    before[1] = np.inf
    lags = np.arange(len(r))
    passing = (
        (lags >= shortest)
        & local
        & (known_r >= PERIOD_CORRELATION)
        & (before <= known_r - PERIOD_DIP)
    )
    if not passing.any():
        return None
    best = float(known_r[passing].max())
    lag = int(np.flatnonzero(passing & (known_r >= best - PERIOD_HARMONIC))[0])
    held, n = max(lag, overlap), len(x)
    while held + 2 * lag <= n and (
        _correlation(x[n - held - lag : n - held], x[n - held - 2 * lag : n - held - lag])
        >= PERIOD_CORRELATION
    ):
        held += lag
    return Period(lag * factor, held * factor)


def _correlation(later: Vector, earlier: Vector) -> float:
    """The correlation of two spans of the load (NaN when either is flat or unknown)."""
    both = ~(np.isnan(later) | np.isnan(earlier))
    if both.sum() < 2:
        return math.nan
    a, b = later[both] - later[both].mean(), earlier[both] - earlier[both].mean()
    scale = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum()) / scale if scale > 0 else math.nan


def _block_means(x: Vector, factor: int) -> Vector:
    """The mean of each ``factor`` consecutive points, aligned on the last one (NaN where none
    of a block is known)."""
    if factor == 1:
        return x
    whole = len(x) // factor * factor
    blocks = x[len(x) - whole :].reshape(-1, factor)
    known = ~np.isnan(blocks)
    with np.errstate(invalid="ignore", divide="ignore"):
        means: Vector = np.where(known, blocks, 0.0).sum(axis=1) / known.sum(axis=1)
    return means


def _lag_correlations(x: Vector, overlap: int) -> Vector:
    """Per lag ``L`` from 0 (its entry 1) to ``len(x) // 2``: the correlation of the last
    ``max(L, overlap)`` points of ``x`` with the same span ``L`` earlier; NaN where the history
    is too short, fewer than 80 % of the pairs are known, or either side is flat."""
    n = len(x)
    longest = n // 2
    lags = np.arange(1, longest + 1)[:, None]
    span = np.maximum(lags, overlap)
    k = np.arange(max(longest, overlap))[None, :]
    used = (k < span) & (span + lags <= n)
    later = np.where(used, x[np.clip(n - 1 - k, 0, n - 1)], np.nan)
    earlier = np.where(used, x[np.clip(n - 1 - k - lags, 0, n - 1)], np.nan)
    both = ~(np.isnan(later) | np.isnan(earlier))
    count = both.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(both, later - (np.where(both, later, 0.0).sum(axis=1) / count)[:, None], 0.0)
        b = np.where(
            both, earlier - (np.where(both, earlier, 0.0).sum(axis=1) / count)[:, None], 0.0
        )
        saa, sbb = (a * a).sum(axis=1), (b * b).sum(axis=1)
        r = (a * b).sum(axis=1) / np.sqrt(saa * sbb)
    flat = (saa <= 1e-12 * np.maximum(1.0, count)) | (sbb <= 1e-12 * np.maximum(1.0, count))
    r[(count < 0.8 * span[:, 0]) | flat] = np.nan
    return np.concatenate(([1.0], r))
