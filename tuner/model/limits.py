"""Disruption limits (``limits`` in settings) and the eviction budget they leave.

A budget counts the pods the tuner made go — one per migrate (an eviction) and per remove (one
replica fewer, that pod chosen) — over a rolling hour and a rolling day, cluster-wide and per
namespace. The descheduler caps evictions per namespace and in total, but per run; Karpenter
caps the nodes disrupting at once; here the caps are rates, since the tuner acts once a window
and what an on-call engineer feels is evictions per hour and per day. What was spent comes from
the transitions the executor really ran (:class:`Spent`, kept by the caller, never from plans);
what is left is a :class:`Budget`, which the analysis respects (:meth:`Budget.refusal`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tuner.model.cluster import Pod
from tuner.model.conventions import NAME
from tuner.model.maintenance import MaintenanceWindow

HOUR_S = 3600.0
DAY_S = 86400.0
PAUSE_CONFIG_MAP = NAME
"""The ConfigMap whose annotation pauses the tuner: deploy/'s settings ConfigMap."""

Evictions = Mapping[str, int]
"""Pods per namespace."""


@dataclass(frozen=True)
class EvictionLimit:
    """At most so many evictions in any hour and in any day (None: no limit)."""

    per_hour: int | None = None
    per_day: int | None = None

    @property
    def unlimited(self) -> bool:
        """True when neither is set."""
        return self.per_hour is None and self.per_day is None


def _no_namespaces() -> Mapping[str, EvictionLimit]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Limits:
    """The ``limits`` settings: eviction budgets, maintenance windows, the pause switch."""

    cluster: EvictionLimit = field(default_factory=EvictionLimit)
    each_namespace: EvictionLimit = field(default_factory=EvictionLimit)
    """Applies to every namespace on its own, unless :attr:`namespaces` names it."""
    namespaces: Mapping[str, EvictionLimit] = field(default_factory=_no_namespaces)
    maintenance_windows: tuple[MaintenanceWindow, ...] = ()
    pause_config_map: str = PAUSE_CONFIG_MAP

    def of_namespace(self, namespace: str) -> EvictionLimit:
        """The limit of one namespace."""
        return self.namespaces.get(namespace, self.each_namespace)

    @property
    def budgeted(self) -> bool:
        """True when any eviction limit is set."""
        limits = [self.cluster, self.each_namespace, *self.namespaces.values()]
        return not all(limit.unlimited for limit in limits)


@dataclass(frozen=True)
class Spent:
    """The evictions of one transition, when it ended (or, while it runs, when it began)."""

    at: float
    namespaces: tuple[tuple[str, int], ...]

    @staticmethod
    def of(at: float, evictions: Evictions) -> Spent:
        """A record of ``evictions`` (pods per namespace) at ``at``."""
        return Spent(at, tuple(sorted((ns, n) for ns, n in evictions.items() if n > 0)))

    @property
    def total(self) -> int:
        """Pods in every namespace."""
        return sum(n for _, n in self.namespaces)


def pod_evictions(pods: Iterable[Pod]) -> dict[str, int]:
    """Pods per namespace."""
    return dict(Counter(pod.namespace for pod in pods))


def added(a: Evictions, b: Evictions) -> dict[str, int]:
    """Two counts of pods per namespace together."""
    return dict(Counter(a) + Counter(b))


@dataclass(frozen=True)
class Budget:
    """What the limits leave at one moment: the evictions of the last hour and day."""

    limits: Limits
    hour: Evictions
    """Pods evicted per namespace in the last 60 minutes."""
    day: Evictions
    """... in the last 24 hours."""

    @staticmethod
    def of(limits: Limits, spent: Iterable[Spent], now: float) -> Budget:
        """The budget at ``now`` after the transitions ``spent``."""
        hour: Counter[str] = Counter()
        day: Counter[str] = Counter()
        for record in spent:
            age = now - record.at
            if age < DAY_S:
                day.update(dict(record.namespaces))
                if age < HOUR_S:
                    hour.update(dict(record.namespaces))
        return Budget(limits, dict(hour), dict(day))

    def refusal(self, planned: Evictions) -> str | None:
        """None when evicting ``planned`` (pods per namespace) keeps within every limit; else
        the first limit it would break, in one line."""
        total = sum(planned.values())
        if total == 0:
            return None
        cluster = self.limits.cluster
        for spent, limit, span, key in (
            (sum(self.hour.values()), cluster.per_hour, "hour", "evictions_per_hour"),
            (sum(self.day.values()), cluster.per_day, "day", "evictions_per_day"),
        ):
            if limit is not None and spent + total > limit:
                return (
                    f"{total} evictions would exceed limits.{key} {limit} "
                    f"({spent} in the last {span})"
                )
        for namespace, count in sorted(planned.items()):
            own = self.limits.of_namespace(namespace)
            for spent, limit, span in (
                (self.hour.get(namespace, 0), own.per_hour, "hour"),
                (self.day.get(namespace, 0), own.per_day, "day"),
            ):
                if limit is not None and count > 0 and spent + count > limit:
                    return (
                        f"{count} evictions in namespace {namespace} would exceed its limit of "
                        f"{limit} per {span} ({spent} in the last {span})"
                    )
        return None
