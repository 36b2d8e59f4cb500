"""The load history the tuner reads in a simulation: what its Prometheus would hold, and never
a second more.

The simulation serves, at every moment from its start (``-scenario.warmup``), the load of its
patterns; before that, a scenario replaying a trace has the trace's own earlier samples as
history (:meth:`tuner.sim.load.TraceReplay.before`: the days before the replayed span, on the
same scale), as a real cluster's Prometheus holds weeks of it. A scenario without them (the
thesis' patterns, a trace replayed from its first day) has no history before the run. The
total over namespaces is known only where every namespace's load is.

Each point of the series is the mean load served over the step that ends there (sampled every
:data:`SAMPLE_S`), as ``load.query`` with ``$window`` set to the step answers in the daemon
(:mod:`tuner.monitor.history`).

:class:`SimLoadHistory` is the cycle's :class:`~tuner.cycle.LoadHistory` port over a
simulation's clock: asked for anything after the simulated now it raises :class:`FutureLoad`.
It computes only the points it has not computed yet and keeps the last ``lookback_s``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from tuner.model.forecast import LoadSeries
from tuner.model.load import SCALAR
from tuner.sim.engine import Scenario
from tuner.sim.load import LoadPattern, TraceReplay

Vector = npt.NDArray[np.float64]

SAMPLE_S = 5.0
"""How often the load is sampled inside a step (the simulation's tick)."""


class FutureLoad(RuntimeError):
    """The tuner asked for load the simulation has not served yet."""


def served(scenario: Scenario, times: Vector) -> Vector:
    """The total load at each of ``times``: what the simulation serves from its start, the
    traces' history before it (NaN where a namespace has none)."""
    total = np.zeros(len(times))
    running = times >= -scenario.warmup
    for pattern in scenario.loads.values():
        total += _pattern_at(pattern, times, running)
    return total


def _pattern_at(pattern: LoadPattern, times: Vector, running: npt.NDArray[np.bool_]) -> Vector:
    if isinstance(pattern, TraceReplay):
        return np.where(running, pattern.at(times), pattern.before(times))
    values = np.full(len(times), np.nan)
    values[running] = [pattern(float(t)) for t in times[running]]
    return values


def step_means(scenario: Scenario, ends: Vector, step_s: float) -> Vector:
    """At each of ``ends``, the mean load served over the step that ends there."""
    per_step = max(1, round(step_s / SAMPLE_S))
    offsets = (np.arange(per_step) - per_step + 1) * (step_s / per_step)
    times = (ends[:, None] + offsets[None, :]).ravel()
    means: Vector = served(scenario, times).reshape(len(ends), per_step).mean(axis=1)
    return means


class SimLoadHistory:
    """The load series up to the simulated now, at ``step_s``, at most ``lookback_s`` long."""

    def __init__(
        self,
        scenario: Scenario,
        clock: Callable[[], float],
        step_s: float = 60.0,
        lookback_s: float = 14 * 86400.0,
    ) -> None:
        self.scenario = scenario
        self.clock = clock
        self.step_s = step_s
        self.lookback_s = lookback_s
        self._first = 0
        """Grid index (time / step) of the first point kept."""
        self._values: Vector = np.empty(0)
        self.latest = -math.inf
        """The latest time any caller asked for (tests: never after the simulated now)."""

    def series(self, end: float) -> LoadSeries:
        """The load at every step of the last ``lookback_s`` up to ``end``; FutureLoad when
        ``end`` is after the simulated now."""
        now = self.clock()
        if end > now + 1e-9:
            raise FutureLoad(f"load asked up to {end:g} s, but the simulation is at {now:g} s")
        self.latest = max(self.latest, end)
        last = math.floor(end / self.step_s + 1e-9)
        first = last - math.floor(self.lookback_s / self.step_s) + 1
        kept_end = self._first + len(self._values)
        if self._values.size and self._first <= first <= kept_end and last >= kept_end - 1:
            values = self._values
            if last >= kept_end:  # points not computed yet (none when asked again at a step)
                new = step_means(self.scenario, self._grid(kept_end, last), self.step_s)
                values = np.concatenate((values, new))
            values = values[first - self._first :]
        else:
            values = step_means(self.scenario, self._grid(first, last), self.step_s)
        self._first, self._values = first, values
        return LoadSeries.of(first * self.step_s, self.step_s, {SCALAR: values})

    def _grid(self, first: int, last: int) -> Vector:
        """The times of grid points ``first`` to ``last``."""
        return np.arange(first, last + 1, dtype=np.float64) * self.step_s
