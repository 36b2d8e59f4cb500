"""The load expected over the next horizon, from the load's own past: a pure function.

The input is a :class:`LoadSeries` (the load at a fixed step up to now; a missing step is NaN)
and the output a :class:`Forecast`: the **peak** of the load over ``(now, now + horizon]`` (what
must fit until a node started now could serve) with an error band, per dimension of a load
vector and for its total, and the expected load at each step of the horizon.

The model is seasonal, corrected by the recent level:

1. **Seasonal baseline.** The load at a future time is the mean of the load at the same time of
   day over the last days (the most recent weighing most) and, once the history holds a week
   before it, the load at the same time last week, blended by their recent errors (the closer
   one over the last days counts more): a load that differs between weekdays and weekends
   follows the weeks, one that does not follows the days.
2. **Recent level.** The baseline is scaled by how the last minutes' load compares with the
   baseline over them (:data:`LEVEL_S`): a busier day than usual, or a step change, carries
   over; the seasonal baseline gives the shape of the coming minutes.
3. **Band, measured.** The same forecast is made from every past time of the last week whose
   outcome is known, and the relative errors of its peak are collected; the band is their
   ``1 - quantile`` and ``quantile`` quantiles around the forecast, and the expected peak is
   corrected by their median (a model that keeps under-forecasting learns it).
4. **A rise under way.** While the load is rising, the band's upper edge is at least the line
   fitted to the last :data:`TREND_S`, carried to the horizon's end: the baseline's days may
   have risen later or slower (a weekend morning against a weekday's commute).
5. **Rise calls.** Over the same past times, how many forecasts called a rise over the lead and
   how many came true (:func:`~tuner.model.seasonal.rise_calls`): a reserve acts only on a
   forecast :attr:`~Forecast.proven` that way.

**The load's own period** (``own_period``: the reserve's forecast only). A load may repeat
with a period of its own (a batch every half hour): :func:`~tuner.model.period.detect_period`
finds one when the last cycle correlates with the one before. The baseline may then be the
load at the same phase of the last cycles (:attr:`Basis.PERIOD`), its band measured over the
cycles it held: with under a day of history, or where it erred less than the day's or week's.

With less than a day of history and no period it is the last load known (:attr:`Basis.LEVEL`),
its band at least :data:`WIDE` either side, as is the band measured from fewer than
:data:`MIN_ERRORS` errors. Each forecast says its basis and how many errors its band came from.

The function never reads the clock and refuses a series that reaches past ``now``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import numpy as np

from tuner.errors import InputError, ServiceError
from tuner.model.load import SCALAR
from tuner.model.memo import by_value
from tuner.model.period import Period, detect_period
from tuner.model.seasonal import (
    Vector,
    age,
    ahead_max,
    band_edges,
    blended,
    closer,
    corrected,
    known_span,
    lagged_mean,
    last_known,
    relative_errors,
    rise_calls,
    rising_line,
    scale_of,
)
from tuner.settings import Settings

DAY_S = 86400.0
WEEK_S = 7 * DAY_S
DAY_LAGS = 3
"""Days the daily baseline averages (each older one weighing less: ``seasonal.LAG_DECAY``)."""
WEEK_LAGS = 1
"""Weeks the weekly baseline looks back (two did worse: docs/concepts.md#forecast)."""
LEVEL_S = 120.0
"""The recent span whose load, against the baseline, sets the level correction: the last two
minutes (longer spans did worse at a 12-minute horizon on every shipped trace)."""
BLEND_S = 3 * DAY_S
"""The recent span over which the daily and the weekly baselines' errors are compared."""
ERRORS_S = 7 * DAY_S
"""The past times (of the last week) whose forecast errors make the band."""
TREND_S = 600.0
"""The recent span whose least-squares line, while rising, the upper edge is held to (shorter
spans widened the band on noisy loads; the last ten minutes caught the weekend mornings the
daily baseline misses on ``diurnal-week``)."""
MIN_ERRORS = 60
"""Fewer measured errors than this and the band is widened to :data:`WIDE`."""
WIDE = 0.5
"""The relative half-width of the band when too few errors were measured."""
FLOOR_SHARE = 0.05
"""Relative errors are against at least this share of the load's 95th percentile."""
DEFAULT_QUANTILE = 0.95
MIN_CONFIRMED = 5
"""Past rise calls confirmed (:func:`~tuner.model.seasonal.rise_calls`) that prove a forecast."""


class Basis(StrEnum):
    """What a forecast rests on."""

    WEEK = "week"
    """The same time of the last weeks, blended with the same time of the last days."""
    DAY = "day"
    """The same time of the last days."""
    PERIOD = "period"
    """The same phase of the last cycles of the load's own period (:func:`detect_period`)."""
    LEVEL = "level"
    """The recent level only (less than a day of history)."""


class NoHistory(ValueError):
    """The series holds no load at all: nothing to forecast from."""


@dataclass(frozen=True, eq=False)
class LoadSeries:
    """The load at a fixed step: point ``i`` is at ``start + i * step_s``; per dimension of the
    load (:data:`~tuner.model.load.SCALAR` for a scalar load) one value per point, NaN where
    the load is not known (a gap)."""

    start: float
    step_s: float
    values: Mapping[str, Vector]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start) and math.isfinite(self.step_s)) or self.step_s <= 0:
            raise ValueError(f"a load series needs a finite start and step > 0: {self.step_s}")
        if not self.values:
            raise ValueError("a load series has at least one dimension")
        lengths = {len(v) for v in self.values.values()}
        if len(lengths) != 1:
            raise ValueError(f"the dimensions of a load series differ in length: {lengths}")

    @staticmethod
    def of(
        start: float, step_s: float, values: Mapping[str, Sequence[float] | Vector]
    ) -> LoadSeries:
        """A series from plain sequences (copied as float arrays)."""
        arrays = {key: np.asarray(v, dtype=np.float64).copy() for key, v in values.items()}
        return LoadSeries(start, step_s, MappingProxyType(dict(sorted(arrays.items()))))

    @property
    def length(self) -> int:
        return len(next(iter(self.values.values())))

    @property
    def end(self) -> float:
        """The time of the last point (``start - step_s`` when empty)."""
        return self.start + (self.length - 1) * self.step_s

    @property
    def is_scalar(self) -> bool:
        return set(self.values) == {SCALAR}

    def total(self) -> Vector:
        """The sum over dimensions at each point; NaN where no dimension is known (a dimension
        missing beside known ones counts 0, as in a load)."""
        stacked = np.vstack(list(self.values.values()))
        known = ~np.isnan(stacked)
        total: Vector = np.where(known, stacked, 0.0).sum(axis=0)
        total[~known.any(axis=0)] = np.nan
        return total


@dataclass(frozen=True, slots=True)
class Band:
    """A forecast value and its error band."""

    expected: float
    lower: float
    upper: float

    def to_json(self) -> dict[str, float]:
        return {"expected": self.expected, "lower": self.lower, "upper": self.upper}

    def __str__(self) -> str:
        return f"{self.expected:.6g} (band {self.lower:.6g} to {self.upper:.6g})"


@dataclass(frozen=True)
class Forecast:
    """The load expected over ``(at, at + horizon_s]``: the peak of the total with its band,
    the same per dimension of a load vector, and the expected total at each step."""

    at: float
    horizon_s: float
    step_s: float
    quantile: float
    peak: Band
    """The highest total load expected over the horizon."""
    basis: Basis
    errors: int
    """How many past forecast errors the total's band was measured from."""
    history_s: float
    """From the first known point of the series to ``at``."""
    path: tuple[float, ...]
    """The expected total at ``at + step_s``, ``at + 2 step_s``, ... to the horizon's end."""
    last: float
    """The last known total load at or before ``at`` (what the peak is compared with)."""
    dimensions: Mapping[str, Band] = field(default_factory=lambda: MappingProxyType({}))
    """Per dimension of a load vector, its peak (empty for a scalar load)."""
    notes: tuple[str, ...] = ()
    """What made it less sure than its basis says (no recent load, a wide band)."""
    recent: tuple[float, ...] = ()
    """The known total at each step of the last horizon up to ``at``, oldest first (no gaps)."""
    period_s: float = 0.0
    """The load's own period the forecast rests on (:attr:`Basis.PERIOD`; 0 otherwise)."""
    calls: int = 0
    """Past forecasts that called a rise over the lead, and (``confirmed``) that came true
    (:func:`~tuner.model.seasonal.rise_calls`)."""
    confirmed: int = 0

    @property
    def foresees(self) -> bool:
        """Sure enough to plan by: seasonal, its band measured from at least
        :data:`MIN_ERRORS` past errors (else its upper edge, :data:`WIDE` above the expected
        peak or more, says how little is known, not that the load will rise)."""
        return self.basis is not Basis.LEVEL and self.errors >= MIN_ERRORS

    @property
    def proven(self) -> bool:
        """Foresees, and at least :data:`MIN_CONFIRMED` of its past rise calls came true."""
        return self.foresees and self.confirmed >= MIN_CONFIRMED

    @property
    def confidence(self) -> str:
        """One line: the basis, the history, what the band was measured from."""
        basis = {
            Basis.WEEK: "seasonal by week and day",
            Basis.DAY: "seasonal by day",
            Basis.PERIOD: f"seasonal by its own period of {self.period_s / 60:g} min",
            Basis.LEVEL: "the recent level only",
        }[self.basis]
        band = (
            f"band from {self.errors} past errors"
            if self.errors >= MIN_ERRORS and self.basis is not Basis.LEVEL
            else f"band at least ±{WIDE:.0%} ({self.errors} past errors measured)"
        )
        days = self.history_s / DAY_S
        history = f"{days:.1f} days" if days >= 1 else f"{self.history_s:.0f} s"
        return "; ".join((basis, f"{history} of history", band, *self.notes))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at": self.at,
            "horizon_s": self.horizon_s,
            "step_s": self.step_s,
            "quantile": self.quantile,
            "peak": self.peak.to_json(),
            "basis": self.basis.value,
            "errors": self.errors,
            "history_s": self.history_s,
            "confidence": self.confidence,
            "path": list(self.path),
            "last": self.last,
        }
        if self.basis is Basis.PERIOD:
            out["period_s"] = self.period_s
        if self.dimensions:
            out["dimensions"] = {k: b.to_json() for k, b in self.dimensions.items()}
        return out

    def __str__(self) -> str:
        return (
            f"peak over the next {self.horizon_s:.0f} s {self.peak} "
            f"at {self.quantile:.0%}; {self.confidence}"
        )


@dataclass(frozen=True, slots=True)
class _Peak:
    band: Band
    basis: Basis
    errors: int
    path: Vector
    notes: tuple[str, ...]
    period: int
    calls: int = 0
    confirmed: int = 0


def forecast_load(
    series: LoadSeries,
    now: float,
    horizon_s: float,
    quantile: float = DEFAULT_QUANTILE,
    *,
    own_period: bool = False,
    lead_s: float | None = None,
    plain: Forecast | None = None,
) -> Forecast:
    """The load expected over ``(now, now + horizon_s]`` from ``series`` (not past ``now``).
    ``quantile`` (0.5 to 1) sets the band's upper edge among the past errors, ``1 - quantile``
    the lower; the past rise calls are counted over ``lead_s`` (None: the horizon). NoHistory
    when the series holds no load. ``plain`` (the forecast made at ``now`` without a period,
    from the same series and options) is returned where no period is found: not made twice."""
    if not 0.5 <= quantile < 1:
        raise ValueError(f"the band quantile must be in [0.5, 1), not {quantile}")
    step = series.step_s
    if series.end > now + 1e-6 * step:
        raise ValueError(
            f"the load series reaches {series.end - now:g} s past now: a forecast never sees "
            "the future"
        )
    if not step <= horizon_s <= DAY_S:
        raise ValueError(f"the horizon must be from one step ({step:g} s) to a day: {horizon_s}")
    origin = math.floor((now - series.start) / step + 1e-9)
    ahead = max(1, math.ceil(horizon_s / step - 1e-9))
    lead = min(ahead, max(1, math.ceil((lead_s or horizon_s) / step - 1e-9)))
    total = series.total()
    known = np.flatnonzero(~np.isnan(total))
    if origin < 0 or known.size == 0:
        raise NoHistory("no load in the history")
    history_s = now - (series.start + known[0] * step)
    period = detect_period(total, step, origin) if own_period else None
    if period is None and plain is not None and plain.at == now:
        return plain
    peak = _peak(total, origin, ahead, step, quantile, period, lead)
    dimensions: dict[str, Band] = {}
    if not series.is_scalar:
        for key, values in series.values.items():
            if np.isnan(values).all():
                continue
            dimensions[key] = _peak(values, origin, ahead, step, quantile, period).band
    return Forecast(
        at=now,
        horizon_s=horizon_s,
        step_s=step,
        quantile=quantile,
        peak=peak.band,
        basis=peak.basis,
        errors=peak.errors,
        history_s=history_s,
        path=tuple(float(v) for v in peak.path),
        last=last_known(total, origin),
        dimensions=MappingProxyType(dimensions),
        notes=peak.notes,
        recent=known_span(total, origin, ahead),
        period_s=peak.period * step,
        calls=peak.calls,
        confirmed=peak.confirmed,
    )


def forecast_from(
    settings: Settings,
    history: Callable[[float], LoadSeries],
    now: float,
    *,
    own_period: bool = False,
    plain: Forecast | None = None,
) -> tuple[Forecast | None, str | None]:
    """The forecast the settings ask for (``forecast``), from ``history(now)``; or None and why
    not when the history cannot be read (a service failed, no load query, no load at all);
    (None, None) with ``forecast.enabled`` off; ``own_period``, ``plain``: :func:`forecast_load`."""
    options, horizon = settings.forecast, settings.forecast.horizon(settings.windows)
    if not options.enabled:
        return None, None
    try:
        series = history(now)
        lead = options.lead(settings.windows)
        return forecast_load(
            series, now, horizon, options.quantile, own_period=own_period, lead_s=lead, plain=plain
        ), None
    except (ServiceError, InputError, NoHistory) as err:
        return None, str(err)


@by_value(8)
def _peak(
    values: Vector,
    origin: int,
    ahead: int,
    step: float,
    q: float,
    period: Period | None,
    lead: int | None = None,
) -> _Peak:
    """The peak of one series over the ``ahead`` steps after ``origin``, with its band, and
    the past rise calls over ``lead`` steps when given (the total's; no dimension's is read)."""
    y = np.full(origin + 1 + ahead, np.nan)
    have = min(len(values), origin + 1)
    y[:have] = values[:have]
    span = max(1, round(LEVEL_S / step))
    notes: list[str] = []
    if np.isnan(y[origin]):
        notes.append(f"no load at the last step (the last known is {age(y, origin, step)})")
    baseline, basis = _baseline(y, origin, max(1, round(DAY_S / step)))
    actual = ahead_max(y, ahead)[: origin + 1]
    floor = FLOOR_SHARE * scale_of(y)
    level = peaks = np.empty(0)
    if basis is not Basis.LEVEL:
        level, peaks = corrected(y, baseline, origin, ahead, span)
    chosen = 0
    past = slice(max(0, origin - round(ERRORS_S / step)), origin + 1 - ahead)  # outcome known
    if period is not None:
        cyclic = lagged_mean(y, period.steps, DAY_LAGS)
        if not np.isnan(cyclic[origin + 1 :]).all():
            cyclic_level, cyclic_peaks = corrected(y, cyclic, origin, ahead, span)
            held = slice(origin + 1 - period.held, past.stop)
            own = relative_errors(actual[held], cyclic_peaks[held], floor)
            if basis is Basis.LEVEL or (
                np.count_nonzero(~np.isnan(own)) >= MIN_ERRORS
                and closer(own, relative_errors(actual[held], peaks[held], floor))
            ):
                baseline, basis, chosen = cyclic, Basis.PERIOD, period.steps
                level, peaks = cyclic_level, cyclic_peaks
                past = held
    if basis is Basis.LEVEL:
        levels = y[: origin + 1].copy()
        if np.isnan(levels[origin]):
            levels[origin] = last_known(y, origin)
        path = np.full(ahead, levels[origin])
        peaks = levels  # a level forecast's peak is the level itself
    else:
        path = level[origin] * baseline[origin + 1 :]
        if np.isnan(path).all():
            path = np.full(ahead, last_known(y, origin))
        path = np.where(np.isnan(path), np.nanmax(path), path)
    errors = relative_errors(actual[past], peaks[past], floor)
    errors = errors[~np.isnan(errors)]
    low, middle, high = np.quantile(errors, (1 - q, 0.5, q)) if errors.size else (0.0, 0.0, 0.0)
    raw = float(np.max(path))
    path = np.maximum(path + float(middle) * np.maximum(path, floor), 0.0)
    sure = basis is not Basis.LEVEL and errors.size >= MIN_ERRORS
    rising = rising_line(y, origin, ahead, max(3, round(TREND_S / step))) if sure else 0.0
    edges = band_edges(raw, (float(low), float(middle), float(high)), floor, sure, rising, WIDE)
    band = Band(*edges)
    calls = (0, 0)
    if lead is not None and basis is not Basis.LEVEL:
        known = slice(past.start, origin + 1 - lead)  # the calls whose outcome is known
        calls = rise_calls(y, baseline, level, lead, known)
    return _Peak(band, basis, int(errors.size), path, tuple(notes), chosen, *calls)


def _baseline(y: Vector, origin: int, per_day: int) -> tuple[Vector, Basis]:
    """The seasonal baseline at every point to ``origin + ahead`` and what it rests on."""
    daily = lagged_mean(y, per_day, DAY_LAGS)
    if np.isnan(daily[origin + 1 :]).all():
        return daily, Basis.LEVEL
    weekly = lagged_mean(y, 7 * per_day, WEEK_LAGS)
    if np.isnan(weekly[origin + 1 :]).all():
        return daily, Basis.DAY
    recent = slice(max(0, origin + 1 - round(BLEND_S / DAY_S * per_day)), origin + 1)
    return blended(y, daily, weekly, recent), Basis.WEEK
