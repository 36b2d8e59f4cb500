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

from tuner.model.memo import by_value

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
CANDIDATES = 8
"""The detector checks this many candidate lags (the shortest), each and its two neighbours."""
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


@by_value(8)
def detect_period(values: Vector, step: float, origin: int) -> Period | None:
    """The load's own period at point ``origin`` (now) of ``values`` (the load at each step of
    ``step``, NaN in a gap), or None. Only the points up to ``origin`` are read: the result is
    the same whether or not the series goes on after now.

    Over the last :data:`PERIOD_WINDOW_S` (on a grid of :data:`PERIOD_STEP_S` at least), the
    load's autocorrelation at every lag up to half the known span picks the candidates: the
    local maxima from :data:`PERIOD_MIN_S` on that some shorter lag's correlation lies
    :data:`PERIOD_DIP` under (a trend, or a few hours of the day's swing, correlates with
    itself at every lag: no candidate). A candidate lag is a period when the last
    ``max(lag, PERIOD_OVERLAP_S)`` of the load, its straight-line trend removed, correlates
    with the same span one lag earlier (trend removed too) at least
    :data:`PERIOD_CORRELATION` (the last cycle against the one before: it must have repeated at
    least twice); of those, the shortest within :data:`PERIOD_HARMONIC` of the best. It holds
    over that span and, one period at a time further back, over each cycle that still
    correlates with the one before it as much (within the window)."""
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
    n = len(x)
    shortest = max(2, math.ceil(PERIOD_MIN_S / grid - 1e-9))
    overlap = max(2, round(PERIOD_OVERLAP_S / grid))
    r = _autocorrelation(x, n // 2)
    if len(r) <= shortest:
        return None
    known_r = np.where(np.isnan(r), -np.inf, r)
    padded = np.concatenate((np.full(2, -np.inf), known_r, np.full(2, -np.inf)))
    local = known_r >= np.lib.stride_tricks.sliding_window_view(padded, 5).max(axis=1)
    lowest = np.minimum.accumulate(np.where(np.isnan(r), np.inf, r))
    before = np.concatenate(([np.inf], lowest[:-1]))  # the lowest at a shorter lag (from 1)
    lags = np.arange(len(r))
    candidates = lags[(lags >= shortest) & local & (before <= known_r - PERIOD_DIP)]
    passing: dict[int, float] = {}
    for candidate in candidates[:CANDIDATES]:
        near = {
            lag: _correlation(x[n - span :], x[n - span - lag : n - lag])
            for lag in range(max(shortest, candidate - 1), candidate + 2)
            if (span := max(lag, overlap)) + lag <= n
        }
        near = {lag: c for lag, c in near.items() if c >= PERIOD_CORRELATION}
        if near:
            top = max(near, key=near.__getitem__)
            passing[top] = near[top]
    if not passing:
        return None
    best = max(passing.values())
    lag = min(lag for lag, c in passing.items() if c >= best - PERIOD_HARMONIC)
    held = max(lag, overlap)
    while held + 2 * lag <= n and (
        _correlation(x[n - held - lag : n - held], x[n - held - 2 * lag : n - held - lag])
        >= PERIOD_CORRELATION
    ):
        held += lag
    return Period(lag * factor, held * factor)


def _correlation(later: Vector, earlier: Vector) -> float:
    """The correlation of two spans of the load, each without its straight-line trend (NaN
    when fewer than 80 % of the pairs are known or either span is a straight line)."""
    both = ~(np.isnan(later) | np.isnan(earlier))
    if both.sum() < max(3, 0.8 * len(later)):
        return math.nan
    t = np.flatnonzero(both).astype(np.float64)
    t -= t.mean()
    a, b = _detrended(t, later[both]), _detrended(t, earlier[both])
    scale = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return (
        float((a * b).sum()) / scale if scale > 1e-12 * (1 + float(np.abs(a).max())) else math.nan
    )


def _detrended(t: Vector, y: Vector) -> Vector:
    """``y`` less its least-squares line over ``t`` (``t`` centred)."""
    centred = y - y.mean()
    slope = float((t * centred).sum() / (t * t).sum())
    out: Vector = centred - slope * t
    return out


def _autocorrelation(x: Vector, longest: int) -> Vector:
    """Per lag from 0 to ``longest``: the correlation of the load with itself that lag earlier,
    over all the pairs the span holds (gaps skipped); NaN where a side is flat or no pair is
    known. By FFT: a few hundred lags in one pass."""
    known = ~np.isnan(x)
    values = np.where(known, x, 0.0)
    size = 1 << (2 * len(x) - 1).bit_length()
    spectra = [np.fft.rfft(v, size) for v in (values, values * values, known.astype(np.float64))]

    def paired(i: int, j: int) -> Vector:  # sum over t of series i at t, series j at t - lag
        out: Vector = np.fft.irfft(spectra[i] * np.conj(spectra[j]), size)[: longest + 1]
        return out

    count = np.round(paired(2, 2))
    later, earlier = paired(0, 2), paired(2, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        covariance = paired(0, 0) - later * earlier / count
        spread_later = paired(1, 2) - later * later / count
        spread_earlier = paired(2, 1) - earlier * earlier / count
        r: Vector = covariance / np.sqrt(spread_later * spread_earlier)
    tiny = 1e-9 * np.maximum(1.0, paired(1, 2))
    r[(count < 2) | (spread_later <= tiny) | (spread_earlier <= tiny)] = np.nan
    return r


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
