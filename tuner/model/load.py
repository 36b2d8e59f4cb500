"""The load a deployment served: a scalar (the thesis) or one value per dimension.

Two loads are "the same load" when every dimension is within ``delta`` of the current
load's value (relative), the thesis' ``load * (1 ± delta)`` band applied per dimension.
A dimension one load lacks counts as 0 there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

SCALAR = ""
"""The key of the only dimension of a scalar load."""


TOLERANCE = 1e-12
"""Relative slack on a band's edge, so a load exactly on it is within (float rounding)."""


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


def load_from_json(data: Any) -> Load:
    """Inverse of :meth:`Load.to_json`."""
    if isinstance(data, int | float):
        return Load.scalar(float(data))
    if isinstance(data, Mapping):
        return Load.vector({str(k): float(v) for k, v in data.items()})
    raise ValueError(f"not a load: {data!r}")
