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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tuner.errors import InputError
from tuner.monitor.series import Series, selector
from tuner.monitor.window import promql_duration
from tuner.settings import Load as LoadSettings

WINDOW_TOKEN = "$window"
SCALAR = ""
"""The key of the only dimension of a scalar load."""
TOLERANCE = 1e-12
"""Relative slack on a band's edge, so a load exactly on it is within (float rounding)."""

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


@dataclass(frozen=True)
class Load:
    """A load: ``{"": value}`` for a scalar, ``{'{service="web"}': value, ...}`` for a vector."""

    values: Mapping[str, float]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("a load has at least one dimension")
        for key, value in self.values.items():
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"load {key or 'value'} must be finite and >= 0, not {value}")

    @staticmethod
    def scalar(value: float) -> Load:
        """A scalar load (the thesis')."""
        return Load(MappingProxyType({SCALAR: float(value)}))

    @staticmethod
    def vector(values: Mapping[str, float]) -> Load:
        """A load with one dimension per key."""
        return Load(MappingProxyType({k: float(v) for k, v in sorted(values.items())}))

    @property
    def is_scalar(self) -> bool:
        return set(self.values) == {SCALAR}

    @property
    def total(self) -> float:
        """The sum over dimensions (the scalar itself for a scalar load)."""
        return math.fsum(self.values.values())

    def within(self, other: Load, delta: float) -> bool:
        """True when ``other`` is the same load as this (current) one, within ``delta``.

        Per dimension: ``|other - this| <= delta * this``; a dimension one of them lacks is 0
        there, so a zero stays only within a zero.
        """
        return not self.outside(other, delta)

    def outside(self, other: Load, delta: float) -> tuple[str, ...]:
        """The dimensions where ``other`` is not within ``delta`` of this load."""
        return dimensions_outside(self.values, other.values, delta)

    def to_json(self) -> float | dict[str, float]:
        """A number for a scalar load, ``{dimension: value}`` for a vector."""
        return self.values[SCALAR] if self.is_scalar else dict(self.values)

    def __str__(self) -> str:
        if self.is_scalar:
            return f"{self.values[SCALAR]:.6g}"
        return ", ".join(f"{key} {value:.6g}" for key, value in self.values.items())


def dimensions_outside(
    current: Mapping[str, float], other: Mapping[str, float], delta: float
) -> tuple[str, ...]:
    """The dimensions where ``other`` is not within ``delta`` of ``current``, sorted:
    ``|other - current| > delta * current``, a dimension one of them lacks being 0 there.

    :meth:`Load.outside` on plain mappings, for loads read back from a store.
    """
    keys = sorted(set(current) | set(other))
    return tuple(
        key
        for key in keys
        if abs(other.get(key, 0.0) - (mine := current.get(key, 0.0)))
        > delta * mine * (1 + TOLERANCE)
    )


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


def load_from_json(data: Any) -> Load:
    """Inverse of :meth:`Load.to_json`."""
    if isinstance(data, int | float):
        return Load.scalar(float(data))
    if isinstance(data, Mapping):
        return Load.vector({str(k): float(v) for k, v in data.items()})
    raise ValueError(f"not a load: {data!r}")


def _check(value: float, what: str) -> None:
    if math.isnan(value):
        raise LoadError(f"returned NaN for {what}")
    if math.isinf(value):
        raise LoadError(f"returned an infinite value for {what}")
    if value < 0:
        raise LoadError(f"returned a negative load for {what} ({value:g})")
