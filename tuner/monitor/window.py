"""The time window the monitor judges, and the evaluation steps used to look inside it.

A window ``[start, end]`` is the span whose load is measured. Stability is checked over the
window *and* the warm-up before it (``windows.warmup_s``): the thesis found the load
unrepresentative for up to 15 minutes after a scaling (§5.2.3), so a deployment must have been
unchanged for the warm-up before its load is trusted.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

MAX_STEPS = 120
"""Evaluation steps per range query (one point per step and series)."""
MIN_STEP_S = 1.0
TIMESTAMP_SLACK_MS = 2
"""A returned timestamp this close to a step belongs to it (time parsing may lose 1 ms)."""


@dataclass(frozen=True, slots=True)
class Window:
    """A window in epoch seconds; stability is checked from :attr:`checked_start` on."""

    start: float
    end: float
    warmup_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start) and math.isfinite(self.end)) or self.end <= self.start:
            raise ValueError(f"a window must end after it starts: [{self.start}, {self.end}]")
        if not math.isfinite(self.warmup_s) or self.warmup_s < 0:
            raise ValueError(f"warm-up must be >= 0 seconds, not {self.warmup_s}")

    @property
    def length_s(self) -> float:
        """Seconds from start to end (the load window, ``$window`` in the load query)."""
        return self.end - self.start

    @property
    def checked_start(self) -> float:
        """Where the stability check starts: the warm-up before the window."""
        return self.start - self.warmup_s


def promql_duration(seconds: float) -> str:
    """A PromQL duration for a span: ``600s``, or ``22500ms`` when not a whole second."""
    millis = max(1, round(seconds * 1000))
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


@dataclass(frozen=True, slots=True)
class Steps:
    """Evaluation times of the range queries over the checked span, in whole milliseconds.

    ``first`` is at or before the checked start (never after: the safe side), the last step is
    the window's end, and every step is ``step_ms`` apart, so Prometheus evaluates exactly
    these instants.
    """

    first_ms: int
    step_ms: int
    count: int

    @property
    def times(self) -> tuple[float, ...]:
        """The evaluation instants in epoch seconds."""
        return tuple((self.first_ms + k * self.step_ms) / 1000 for k in range(self.count))

    @property
    def start(self) -> float:
        return self.first_ms / 1000

    @property
    def end(self) -> float:
        return (self.first_ms + (self.count - 1) * self.step_ms) / 1000

    @property
    def step_s(self) -> float:
        return self.step_ms / 1000

    def index(self, timestamp: float) -> int | None:
        """The step a returned timestamp belongs to, or None when it is not one of them."""
        offset = round(timestamp * 1000) - self.first_ms
        k = round(offset / self.step_ms)
        exact = abs(offset - k * self.step_ms) <= TIMESTAMP_SLACK_MS
        return k if exact and 0 <= k < self.count else None


def steps_over(
    window: Window, max_steps: int | None = None, min_step_s: float = MIN_STEP_S
) -> Steps:
    """At most ``max_steps + 1`` (default :data:`MAX_STEPS`) evenly spaced instants from the
    checked start to the end, at least ``min_step_s`` apart."""
    max_steps = MAX_STEPS if max_steps is None else max_steps
    end_ms = round(window.end * 1000)
    span_ms = end_ms - math.floor(window.checked_start * 1000)
    intervals = max(1, min(max_steps, math.floor(span_ms / (min_step_s * 1000))))
    step_ms = -(-span_ms // intervals)  # ceil: the first step lands at or before the start
    return Steps(end_ms - intervals * step_ms, step_ms, intervals + 1)


def clock_time(timestamp: float) -> str:
    """``12:03:04Z``: how times are named in reasons (UTC)."""
    return time.strftime("%H:%M:%SZ", time.gmtime(timestamp))


def date_time(timestamp: float) -> str:
    """``2026-11-22 12:03:04Z`` (UTC)."""
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(timestamp))
