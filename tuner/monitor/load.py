"""The load a deployment served over a window: a scalar (the thesis) or one value per workload.

The load query is PromQL from ``load.query``; ``$window`` in it becomes the window's length
(``600s``). The 2019 key ``load.pod_name`` gives the thesis' query: bytes received per second by
the pods whose name starts with it. A query answering one unlabelled value is a scalar load; a
query answering several labelled series (``sum by (service) (...)``) is a load vector with one
dimension per label set.

Two loads are "the same load" when every dimension is within ``delta`` of the current load's
value (relative), the thesis' ``load * (1 ± delta)`` band applied per dimension. A dimension
one load lacks counts as 0 there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from tuner.errors import InputError
from tuner.model.load import Load
from tuner.monitor.series import Series, selector
from tuner.monitor.window import promql_duration
from tuner.settings import LoadSettings

WINDOW_TOKEN = "$window"

_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


class LoadError(Exception):
    """The load query answered something that is not a usable load (empty, NaN, ...)."""


def pod_name_query(prefix: str) -> str:
    """The thesis' load: bytes/s received by the pods whose name starts with ``prefix``."""
    pattern = _RE2_SPECIAL.sub(r"\\\1", prefix) + ".*"
    literal = pattern.replace("\\", "\\\\").replace('"', '\\"')
    return f'sum(rate(container_network_receive_bytes_total{{pod=~"{literal}"}}[{WINDOW_TOKEN}]))'


def load_query(settings: LoadSettings) -> str:
    """The configured load query (``$window`` not yet replaced); InputError when there is none."""
    if settings.query is not None:
        if not settings.query.strip():
            raise InputError("load.query: must not be empty")
        return settings.query
    if settings.pod_name is not None:
        if not settings.pod_name.strip():
            raise InputError("load.pod_name: must not be empty")
        return pod_name_query(settings.pod_name)
    raise InputError(
        "load.query is not set (nor the 2019 key load_pod_name): "
        "the tuner cannot tell which load a deployment served"
    )


def render_query(query: str, window_s: float) -> str:
    """The query with ``$window`` replaced by the window's length, e.g. ``600s``."""
    return query.replace(WINDOW_TOKEN, promql_duration(window_s))


def load_from_scalar(value: float) -> Load:
    """The load of a query that answered a PromQL scalar."""
    _check(value, "the scalar")
    return Load.scalar(value)


def load_from_vector(result: Sequence[Series]) -> Load:
    """The load of a query that answered an instant vector; LoadError when it is unusable."""
    if not result:
        raise LoadError(
            "returned no series (nothing matched; if zero load is possible, append `or vector(0)`)"
        )
    if len(result) == 1 and not result[0].labels:
        _check(result[0].last, "the value")
        return Load.scalar(result[0].last)
    values: dict[str, float] = {}
    for item in result:
        key = selector(item.labels) or "{}"
        _check(item.last, key)
        values[key] = item.last
    return Load.vector(values)


def _check(value: float, what: str) -> None:
    if math.isnan(value):
        raise LoadError(f"returned NaN for {what}")
    if math.isinf(value):
        raise LoadError(f"returned an infinite value for {what}")
    if value < 0:
        raise LoadError(f"returned a negative load for {what} ({value:g})")
