"""How much of a span Prometheus holds samples for: a fresh Prometheus (or a new exporter)
has only the last minutes of a window, and a ``rate(...[$window])`` over them is extrapolated
from that part alone. Also when a fresh daemon can judge its first window from
kube-state-metrics series.
"""

from __future__ import annotations

import re

from tuner.monitor.load import WINDOW_TOKEN
from tuner.monitor.prometheus import Queries, QueryError
from tuner.monitor.window import clock_time, promql_duration

_RANGE_SELECTOR = re.compile(
    r"((?:[a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(?:\{[^{}]*\})?)\s*\[\s*"
    + re.escape(WINDOW_TOKEN)
    + r"\s*\]"
)
"""A series selector followed by ``[$window]``: ``name``, ``name{...}`` or ``{...}``."""


def window_selectors(query: str) -> tuple[str, ...]:
    """The selectors of a load query (``$window`` not replaced) whose series it reads over the
    window, e.g. ``http_requests_total{job="web"}``."""
    return tuple(dict.fromkeys(m.strip() for m in _RANGE_SELECTOR.findall(query) if m.strip()))


def first_sample(
    prometheus: Queries, selector: str, start: float, end: float, step_s: float
) -> float | None:
    """The earliest sample time of the selector's series in [start, end] (to ``step_s``), or
    None when there is none. Raises :class:`~tuner.monitor.prometheus.QueryError`."""
    first = _earliest(prometheus, selector, end - start, step_s, end)
    if first is None and step_s > FINE_STEP_S:
        # Subquery steps are aligned to multiples of the step: a series younger than the
        # last aligned instant shows at none of them, so look again over that last step.
        first = _earliest(prometheus, selector, min(step_s, end - start), FINE_STEP_S, end)
    return first


FINE_STEP_S = 1.0
"""The resolution of the second look at a series younger than one step."""


def _earliest(
    prometheus: Queries, selector: str, span_s: float, step_s: float, end: float
) -> float | None:
    span, step = promql_duration(span_s), promql_duration(step_s)
    answer = prometheus.instant(f"min(min_over_time(timestamp({selector})[{span}:{step}]))", end)
    if isinstance(answer, float):
        return answer
    values = [series.last for series in answer if series.points]
    return min(values) if values else None


def partial_coverage(
    prometheus: Queries, query: str, start: float, end: float, step_s: float
) -> float | None:
    """When the load query's window series begin after ``start`` (more than two steps in):
    the first instant all of them cover, else None (covered, nothing to tell, or not known)."""
    firsts: list[float] = []
    for selector in window_selectors(query):
        try:
            first = first_sample(prometheus, selector, start, end, step_s)
        except QueryError:
            return None  # the load query itself says what is wrong with Prometheus
        if first is not None:
            firsts.append(first)
    if not firsts or max(firsts) <= start + 2 * step_s:
        return None
    return max(firsts)


def coverage_warning(covered_from: float, start: float, end: float) -> str:
    """The one line :attr:`WindowReport.load_warning` holds."""
    return (
        f"the load query's series cover only the last {end - covered_from:.0f} s of the "
        f"{end - start:.0f} s window (from {clock_time(covered_from)}): the load is "
        "extrapolated from that part; wait until Prometheus holds a whole window"
    )
