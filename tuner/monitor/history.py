"""The load's history from Prometheus, for the forecast: ``load.query`` over the look-back.

``load.query`` is evaluated by ``query_range`` at every ``forecast.step_s`` of the last
``forecast.lookback_s`` (default 14 days at 60 s: 20,160 steps), with ``$window`` set to the
step, so each point is the load served over the step that ends there. Steps are whole
multiples of the step since the epoch, so every cycle asks for the same instants.

The first call fetches the whole look-back, in pieces of at most :data:`MAX_POINTS` steps
(Prometheus refuses more than 11,000 points per series and query); later calls fetch only the
steps after the last one fetched, and the last :data:`REFETCH` steps again (a scrape that came
in late). What is kept is the look-back and no more: at most :data:`MAX_DIMENSIONS`
dimensions of ``lookback_s / step_s`` floats each (20,160 x 8 bytes = 161 kB per dimension at
the defaults). A query answering more series than that is kept as its total only.

A step the query did not answer (Prometheus down, a series missing, NaN, a negative or
infinite value) is a gap; the forecast handles gaps. A failed query raises a
:class:`~tuner.errors.ServiceError`, and what was fetched before stays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tuner.errors import ServiceError
from tuner.model.forecast import LoadSeries
from tuner.model.load import SCALAR
from tuner.monitor.load import load_query, render_query
from tuner.monitor.prometheus import Queries, QueryError
from tuner.monitor.series import Series, selector
from tuner.settings import Settings

Vector = npt.NDArray[np.float64]

MAX_POINTS = 10_000
"""Steps per ``query_range`` (Prometheus' own limit is 11,000 points per series)."""
REFETCH = 2
"""Steps fetched again each time (late scrapes)."""
MAX_DIMENSIONS = 100
"""Dimensions kept; a load vector with more is kept as its total."""


class PrometheusHistory:
    """The cycle's :class:`~tuner.cycle.LoadHistory` over Prometheus."""

    def __init__(self, prometheus: Queries, settings: Settings) -> None:
        self.prometheus = prometheus
        self.settings = settings.load
        self.step_s = settings.forecast.step_s
        self.lookback_s = settings.forecast.lookback_s
        self._first = 0
        """Grid index (time / step) of the first point kept."""
        self._values: dict[str, Vector] = {}
        self._fetched = -1
        """Grid index of the last step fetched (-1: nothing yet)."""
        self.fetched_points = 0
        """Steps asked of Prometheus so far (how incremental the fetching is)."""
        self.collapsed = False
        """More than :data:`MAX_DIMENSIONS` dimensions were seen: only the total is kept."""

    def series(self, end: float) -> LoadSeries:
        """The load at every step of the look-back up to ``end``."""
        step = self.step_s
        last = math.floor(end / step + 1e-9)
        first = last - math.floor(self.lookback_s / step) + 1
        start = first if self._fetched < 0 else max(first, self._fetched - REFETCH + 1)
        values = {key: self._kept(array, first, last) for key, array in self._values.items()}
        collapsed = self.collapsed
        query = render_query(load_query(self.settings), step)
        for low in range(start, last + 1, MAX_POINTS):
            high = min(low + MAX_POINTS - 1, last)
            answer = self._range(query, low, high)
            if not collapsed and len(set(values) | set(map(_key, answer))) > MAX_DIMENSIONS:
                collapsed = True
                gaps = np.full(last - first + 1, np.nan)
                values = {SCALAR: LoadSeries.of(first, step, values).total() if values else gaps}
            _store(values, answer, first, last, step, collapsed)
            self.fetched_points += high - low + 1
        kept = {key: v for key, v in values.items() if not np.isnan(v).all()}
        self._first, self._values, self.collapsed = first, kept, collapsed
        self._fetched = max(self._fetched, last)
        return LoadSeries.of(
            first * step, step, kept or {SCALAR: np.full(last - first + 1, np.nan)}
        )

    def _kept(self, array: Vector, first: int, last: int) -> Vector:
        """What is kept of ``array`` moved onto the grid points ``first`` to ``last``."""
        out = np.full(last - first + 1, np.nan)
        low, high = max(first, self._first), min(last, self._first + len(array) - 1)
        if low <= high:
            out[low - first : high - first + 1] = array[low - self._first : high - self._first + 1]
        return out

    def _range(self, query: str, low: int, high: int) -> Sequence[Series]:
        try:
            return self.prometheus.range(query, low * self.step_s, high * self.step_s, self.step_s)
        except QueryError as err:
            raise ServiceError(f"load history: {err}") from None


def _key(item: Series) -> str:
    """The dimension of a series (as in a load vector)."""
    return selector(item.labels) or "{}"


def _store(
    values: dict[str, Vector],
    answer: Sequence[Series],
    first: int,
    last: int,
    step: float,
    collapsed: bool,
) -> None:
    """Write the answer's points into ``values``, per dimension (a new one starts as all gaps),
    or, ``collapsed``, their sum per step into the total."""
    scalar = collapsed or (len(answer) == 1 and not answer[0].labels)
    summed: dict[int, float] = {}
    for item in answer:
        key = SCALAR if scalar else _key(item)
        array = values.get(key)
        if array is None:
            array = values[key] = np.full(last - first + 1, np.nan)
        for at, value in item.points:
            index = round(at / step) - first
            if not 0 <= index < len(array):
                continue
            usable = math.isfinite(value) and value >= 0
            if collapsed:
                if usable:
                    summed[index] = summed.get(index, 0.0) + value
            else:
                array[index] = value if usable else np.nan
    if summed:
        total = values[SCALAR]
        total[list(summed)] = list(summed.values())
