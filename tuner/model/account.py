"""The shadow account: what ``tuner run --shadow`` would have done and saved, cycle by cycle.

A shadow cycle changes nothing; it records, in the knowledge base, the cycle's plan as the
acting tuner would have carried it out — the same analysis, the same limits — and what that
would have saved. The saving is in money, not a rate: the cost per hour the plan would remove,
held until the next cycle,

    saving = max(0, cost_before − cost_after) × interval_s / 3600

where ``interval_s`` is the time the cycle scheduled until the next one (the window after a
stable window, the retry window otherwise). A cycle that would not have acted (it stayed, or
a pause, a maintenance window or the eviction budget held its change) saves nothing. The sum
over a period is what the tuner would have saved in it, had every change held until the next
cycle; it counts each cycle's change once, never what a removed node would have kept saving
after the next cycle, so an acting tuner that keeps a node away saves at least as much.

While the tuner only watches, the cluster does not follow its plans: each cycle plans again
from the same cluster, and often the same change. The actions and evictions of a period count
each *distinct* plan once: a plan equal to the previous cycle's on a cluster that did not change
under it is the same change still waiting, not a second one. The cluster "changed under" a
cycle when, since the previous shadow cycle, a node joined or left or a pod that cycle's plan
would move or remove was gone or on another node: the previous plan no longer described the
cluster, as an acting tuner would have found mid-transition.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.model.cluster import Cluster

Counts = tuple[tuple[str, int], ...]
"""(name, count) pairs, sorted by name."""


def counts(values: Mapping[str, int]) -> Counts:
    """A count per name as sorted pairs (zeros dropped)."""
    return tuple(sorted((k, v) for k, v in values.items() if v))


def saving(cost_before: float, cost_after: float, interval_s: float) -> float:
    """A saving per hour held for ``interval_s`` seconds, in money (never negative)."""
    return max(0.0, cost_before - cost_after) * interval_s / 3600.0


def digest(lines: Iterable[str]) -> str:
    """A short digest of some lines (equal lines, equal digest)."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def premise(cluster: Cluster, touched: Iterable[str]) -> str:
    """A digest of what a plan relies on: the cluster's nodes and where each pod it touches
    (``namespace/name``) runs now."""
    where = {pod.key: pod.node or "" for pod in cluster.pods}
    nodes = sorted(n.name for n in cluster.nodes)
    return digest([*nodes, "", *(f"{p}@{where.get(p, '-')}" for p in touched)])


@dataclass(frozen=True)
class ShadowCycle:
    """One cycle of the shadow account."""

    at: float
    """When the cycle ran (epoch seconds)."""
    interval_s: float
    """Until the next cycle it scheduled: how long its saving is counted."""
    decision: str
    reason: str
    cost_before: float
    """Cost per hour of the cluster as it was."""
    cost_after: float
    """Cost per hour after the planned change (``cost_before`` when none)."""
    currency: str
    actions: Counts = ()
    """Planned actions per op."""
    evictions: Counts = ()
    """Pods per namespace the planned actions evict or remove."""
    held: str | None = None
    """Why the tuner would not have carried the change out (paused, outside every maintenance
    window, the eviction budget), or None."""
    plan: str = ""
    """A digest of the planned actions ("" when none)."""
    touched: tuple[str, ...] = ()
    """The pods the plan moves or removes (``namespace/name``), sorted."""
    premise: str = ""
    """:func:`premise` of the cluster the plan was made on."""
    changed: bool | None = None
    """Whether the cluster changed under the previous shadow cycle's plan (None: no previous
    cycle to compare with)."""

    @property
    def id(self) -> str:
        """Unique per cycle: its time in milliseconds."""
        return f"shadow-{round(self.at * 1000)}"

    @property
    def acts(self) -> bool:
        """Whether the acting tuner would have carried out a change this cycle."""
        return bool(self.actions) and self.held is None

    @property
    def saving(self) -> float:
        """What acting would have saved until the next cycle (module docstring)."""
        return saving(self.cost_before, self.cost_after, self.interval_s) if self.acts else 0.0

    def repeats(self, previous: ShadowCycle | None) -> bool:
        """Whether this is the change ``previous`` would have carried out, again, on a cluster
        that did not change under it."""
        return (
            previous is not None
            and previous.acts
            and self.changed is False
            and self.plan == previous.plan
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON object (the knowledge base's form)."""
        return {
            "at": self.at,
            "interval_s": self.interval_s,
            "decision": self.decision,
            "reason": self.reason,
            "cost_before": self.cost_before,
            "cost_after": self.cost_after,
            "currency": self.currency,
            "actions": dict(self.actions),
            "evictions": dict(self.evictions),
            "held": self.held,
            "plan": self.plan,
            "touched": list(self.touched),
            "premise": self.premise,
            "changed": self.changed,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ShadowCycle:
        """Inverse of :meth:`to_json`; KeyError, TypeError or ValueError when malformed."""
        changed = data["changed"]
        held = data["held"]
        return ShadowCycle(
            at=float(data["at"]),
            interval_s=float(data["interval_s"]),
            decision=str(data["decision"]),
            reason=str(data["reason"]),
            cost_before=float(data["cost_before"]),
            cost_after=float(data["cost_after"]),
            currency=str(data["currency"]),
            actions=counts({str(k): int(v) for k, v in dict(data["actions"]).items()}),
            evictions=counts({str(k): int(v) for k, v in dict(data["evictions"]).items()}),
            held=None if held is None else str(held),
            plan=str(data["plan"]),
            touched=tuple(str(p) for p in data["touched"]),
            premise=str(data["premise"]),
            changed=None if changed is None else bool(changed),
        )


@dataclass(frozen=True)
class Account:
    """A period of the shadow account, summed (``tuner report``)."""

    since: float
    until: float
    cycles: int
    """Shadow cycles recorded in the period."""
    acting: int
    """Cycles in which the tuner would have carried out a change."""
    plans: int
    """Distinct changes among them (a plan repeated on an unchanged cluster counts once)."""
    held: int
    """Cycles whose change a pause, a maintenance window or the eviction budget held."""
    saving: float
    """What the tuner would have saved, in :attr:`currency`."""
    currency: str
    actions: Counts
    """Actions of the distinct changes, per op."""
    evictions: Counts
    """Pods the distinct changes would have evicted or removed, per namespace."""
    compared: int
    """Cycles with a previous shadow cycle to compare the cluster with."""
    changed: int
    """... of which the cluster had changed under the previous plan."""

    @property
    def evicted(self) -> int:
        """Pods in every namespace."""
        return sum(n for _, n in self.evictions)

    def to_json(self) -> dict[str, Any]:
        """``tuner report --format json``."""
        return {
            "since": self.since,
            "until": self.until,
            "cycles": self.cycles,
            "acting_cycles": self.acting,
            "held_cycles": self.held,
            "plans": self.plans,
            "saving": round(self.saving, 6),
            "currency": self.currency,
            "actions": dict(self.actions),
            "evictions": self.evicted,
            "evictions_by_namespace": dict(self.evictions),
            "cluster_changed": self.changed,
            "compared": self.compared,
        }


def summary(
    cycles: Sequence[ShadowCycle], since: float, until: float, currency: str = "USD"
) -> Account:
    """The account of ``cycles`` (oldest first) over ``[since, until]``; ``currency`` when
    there is no cycle to take it from."""
    actions: Counter[str] = Counter()
    evictions: Counter[str] = Counter()
    plans = 0
    previous: ShadowCycle | None = None
    for cycle in cycles:
        if cycle.acts and not cycle.repeats(previous):
            plans += 1
            actions.update(dict(cycle.actions))
            evictions.update(dict(cycle.evictions))
        previous = cycle
    compared = [c for c in cycles if c.changed is not None]
    return Account(
        since=since,
        until=until,
        cycles=len(cycles),
        acting=sum(c.acts for c in cycles),
        plans=plans,
        held=sum(c.held is not None for c in cycles),
        saving=sum(c.saving for c in cycles),
        currency=cycles[-1].currency if cycles else currency,
        actions=counts(actions),
        evictions=counts(evictions),
        compared=len(compared),
        changed=sum(bool(c.changed) for c in compared),
    )
