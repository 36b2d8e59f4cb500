"""Time series as plain values: what a PromQL query answered, independent of any HTTP client.

An instant vector is a tuple of :class:`Series` with one point each; a range query gives one
:class:`Series` per label set with a point per evaluation step (steps where the series did not
exist are simply missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

Point = tuple[float, float]
"""(timestamp in epoch seconds, value)."""


@dataclass(frozen=True, slots=True)
class Series:
    """One labelled series and its points, oldest first."""

    labels: Mapping[str, str]
    points: tuple[Point, ...]

    def label(self, name: str, default: str = "") -> str:
        """The value of a label, ``default`` when the series lacks it."""
        return self.labels.get(name, default)

    @property
    def last(self) -> float:
        """The value of the newest point (instant vectors have exactly one)."""
        return self.points[-1][1]


def series(labels: Mapping[str, str] | None = None, *points: Point) -> Series:
    """A series with frozen labels (convenient for tests and adapters)."""
    return Series(MappingProxyType(dict(labels or {})), tuple(points))


def selector(labels: Mapping[str, str]) -> str:
    """``{a="x",b="y"}`` with sorted keys, ``""`` for no labels (PromQL's own notation)."""
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
