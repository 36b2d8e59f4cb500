"""The monitor's verdict on one window, and the decline rule's answer on it (what the cycle does
with both: :mod:`tuner.model.acting`)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tuner.model.cluster import Workload
from tuner.model.forecast import Forecast
from tuner.model.load import Load


class Verdict(StrEnum):
    """How a window is judged."""

    STABLE = "stable"
    UNSTABLE = "unstable"
    UNKNOWN = "unknown"
    """Could not be judged: not stable and not unstable; the tuner does not act on it."""


KSM = "kube-state-metrics"


SNAPSHOTS = "snapshots"


class Scope(StrEnum):
    """What must have stood still over a window for the tuner to act (``windows.scope``)."""

    TOUCHED = "touched"
    """Nothing pending and no node joining or leaving; what changed is kept out of the plan."""
    CLUSTER = "cluster"
    """The thesis' rule: the whole cluster unchanged."""


@dataclass(frozen=True)
class Unsettled:
    """What changed over a window and its warm-up, as a stability judge saw it."""

    nodes: frozenset[str] = frozenset()
    """Nodes that joined, were cordoned or uncordoned, or had pods start or stop on them."""
    workloads: frozenset[Workload] = frozenset()
    """Workloads whose pod count changed, that rolled out, or had pending or unready pods."""
    blockers: tuple[str, ...] = ()
    """Cluster-wide reasons not to act at all: a pod pending anywhere, a node joining or
    leaving (but one the tuner left to the autoscaler), a change no node or workload explains."""
    shrinking: frozenset[Workload] = frozenset()
    """Of :attr:`workloads`, those whose only change was losing pods: no pod of theirs started,
    was pending or not ready (what an HPA scaling them down does)."""
    emptied: frozenset[str] = frozenset()
    """Of :attr:`nodes`, those whose only change was pods stopping on them (none started, the
    node neither joined nor was cordoned or uncordoned)."""
    only_leaving: bool = False
    """The :attr:`blockers` are only nodes leaving: no pod pending, no node joining, nothing
    unexplained."""

    @property
    def named(self) -> bool:
        """Whether the judge named anything that changed: an unstable window that names nothing
        cannot be scoped, so it is not acted on."""
        return bool(self.nodes or self.workloads or self.blockers)

    def describe(self) -> str:
        """One line: what changed and whether anything blocks the whole cluster."""
        kept = (
            f"{_counted(len(self.nodes), 'node')} and {_counted(len(self.workloads), 'workload')} "
            "changed (kept out of the plan)"
        )
        if self.blockers:
            return f"{kept}; blocked: {'; '.join(self.blockers)}"
        return f"{kept}; nothing pending, no node joining or leaving"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready values."""
        return {
            "nodes": sorted(self.nodes),
            "workloads": sorted(str(w) for w in self.workloads),
            "blockers": list(self.blockers),
        }


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@dataclass(frozen=True)
class WindowReport:
    """The monitor's verdict on one window.

    The tuner may act only when :attr:`actionable`, and record the deployment under
    :attr:`load` only when, besides, :attr:`whole_stable` (the knowledge base keys a deployment
    by the load of the whole cluster).
    """

    verdict: Verdict
    reason: str
    """One line: the main reason (all of them are in :attr:`findings`)."""
    load: Load | None
    """The load served over [start, end]; None when it could not be measured."""
    start: float
    end: float
    checked_from: float
    """Stability was checked from here (``start`` minus the warm-up) to ``end``."""
    findings: tuple[str, ...] = ()
    source: str = KSM
    """What stability was judged from: ``kube-state-metrics`` series or API ``snapshots``."""
    load_query: str = ""
    """The load query as sent (``$window`` replaced)."""
    failed_query: str | None = None
    """The query that failed or answered nonsense (verdict ``unknown``)."""
    scope: Scope = Scope.CLUSTER
    """The scope judged; a report that does not say what changed is judged as a whole."""
    unsettled: Unsettled = field(default_factory=Unsettled)
    """What changed, when the verdict is ``unstable`` (empty otherwise)."""
    load_covered_from: float | None = None
    """When the load query's series cover only the end of the window: their first sample in
    it (the load is extrapolated from that part); None when they cover it all or it is
    unknown."""
    load_warning: str | None = None
    """One line saying so, when :attr:`load_covered_from` is set."""
    observed_nodes: frozenset[str] | None = None
    """The nodes the window's source saw over the checked span (None: it cannot say); a node
    read after the window but not among them is kept out of the plan (:mod:`tuner.model.unseen`)."""

    @property
    def whole_stable(self) -> bool:
        """The whole cluster was stable over the window and its warm-up."""
        return self.verdict is Verdict.STABLE

    @property
    def actionable(self) -> bool:
        """The tuner may act on this window: a load, and under the ``cluster`` scope a stable
        cluster; under ``touched``, a judged window without a cluster-wide blocker."""
        if self.load is None or self.verdict is Verdict.UNKNOWN:
            return False
        if self.scope is Scope.CLUSTER or self.whole_stable:
            return self.whole_stable
        return self.unsettled.named and not self.unsettled.blockers

    @property
    def unsettled_nodes(self) -> frozenset[str]:
        """Nodes a plan must keep out of (none when the whole cluster was stable)."""
        return frozenset() if self.whole_stable else self.unsettled.nodes

    @property
    def unsettled_workloads(self) -> frozenset[Workload]:
        """Workloads a plan must keep out of (none when the whole cluster was stable)."""
        return frozenset() if self.whole_stable else self.unsettled.workloads

    @property
    def judgement(self) -> str:
        """One line: the scope judged and why the window is or is not actionable."""
        if self.verdict is Verdict.UNKNOWN:
            return f"{self.scope.value} scope: not judged ({self.reason})"
        if self.whole_stable:
            return f"{self.scope.value} scope: the whole cluster was stable"
        if self.scope is Scope.CLUSTER:
            return f"cluster scope: the cluster changed ({self.reason})"
        if not self.unsettled.named:
            return (
                f"touched scope: the judge named no node or workload that changed ({self.reason})"
            )
        return f"touched scope: {self.unsettled.describe()}"

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready values (``tuner monitor --format json``)."""
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "findings": list(self.findings),
            "load": None if self.load is None else self.load.to_json(),
            "load_query": self.load_query,
            "window": {
                "start": self.start,
                "end": self.end,
                "checked_from": self.checked_from,
                "length_s": self.end - self.start,
                "warmup_s": self.start - self.checked_from,
            },
            "source": self.source,
            "failed_query": self.failed_query,
            "scope": self.scope.value,
            "whole_stable": self.whole_stable,
            "actionable": self.actionable,
            "judgement": self.judgement,
            "unsettled": self.unsettled.to_json(),
            "load_covered_from": self.load_covered_from,
            "load_warning": self.load_warning,
            "observed_nodes": None if self.observed_nodes is None else sorted(self.observed_nodes),
        }


DECLINE_TOLERANCE = 0.05
"""A falling load may rise this share above the lowest it was before (noise) and still count as
falling; a load that rose within the horizon counts as falling only once it is more than this
share below its highest (a dip after a rise is no decline)."""


@dataclass(frozen=True)
class OwnChange:
    """What the tuner's last transition changed itself, by its verified moves (the decline rule
    tells it from what the load changed: :func:`decline_release`)."""

    at: float
    """When the transition began."""
    until: float
    """When the warm-up after its end ended (``stable_since``; the transition takes time): a
    window checked from between :attr:`at` and here sees the change and nothing before it."""
    counts: tuple[tuple[Workload, int], ...] = ()
    """The workloads it started pods of, each with its pod count after the transition."""
    nodes: frozenset[str] = frozenset()
    """The nodes those pods were verified Ready on (none for a pod the scheduler placed)."""

    @property
    def workloads(self) -> frozenset[Workload]:
        """The workloads it started pods of."""
        return frozenset(w for w, _ in self.counts)

    def seen_by(self, window: WindowReport) -> bool:
        """Whether ``window`` is the one right after the change: checked from its start (or
        within the warm-up after it), so that the change is all in it and nothing before."""
        return self.at <= window.checked_from <= self.until


@dataclass(frozen=True)
class Release:
    """The decline rule's answer on one window: whether acting is safe although HPAs are
    scaling workloads down, why, and what it counts as settled."""

    holds: bool
    reason: str
    kind: str = "released"
    """One word for counting: ``released``, else what refused (``scope``, ``no-forecast``,
    ``not-falling``, ``blocked``, ``grown``, ``disagrees``, ``no-hpa``)."""
    workloads: frozenset[Workload] = frozenset()
    """The workloads the HPAs shrink: settled for a removal or a replacement."""
    nodes: frozenset[str] = frozenset()
    """The nodes that only lost pods, and those the tuner's own moves started pods on:
    settled too."""
    moved: tuple[tuple[Workload, int], ...] = ()
    """The workloads only the tuner's own last change started pods of, each with its pod count
    after it (:class:`OwnChange`): settled too, while no more pods of it run than it left."""

    def scaled_by(self, scaled: Collection[Workload]) -> Release:
        """The rule's last condition, once the cluster is read: every shrinking workload is
        scaled by an HPA (``scaled``: the HPAs' targets); a workload scaled down by hand or by
        another controller refuses."""
        if not self.holds:
            return self
        other = sorted(str(w) for w in self.workloads if w not in scaled)
        if other:
            return Release(False, f"no HPA scales {_listed(other)}", "no-hpa")
        return self

    def left_as_moved(self, counts: Mapping[Workload, int]) -> Release:
        """The condition on the tuner's own moves, once the cluster is read (``counts``: pods
        per workload now): no workload they settle runs more pods than the transition left (an
        HPA that scaled one up since refuses)."""
        if not self.holds:
            return self
        grew = sorted(str(w) for w, n in self.moved if counts.get(w, 0) > n)
        if grew:
            return Release(False, f"grew since the tuner moved it: {_listed(grew)}", "grown")
        return self


def falling(loads: Sequence[float], tolerance: float = DECLINE_TOLERANCE) -> bool:
    """Whether ``loads`` (oldest first) fell since their highest: the last below the highest,
    and since it none more than ``tolerance`` above the lowest before it (monotone within the
    tolerance). A load that rose within the horizon and then fell is falling from its peak on
    once the last is more than ``tolerance`` below the peak; one that was highest at the
    horizon's start may fall slowly (a day's decline)."""
    if len(loads) < 2:
        return False
    top = max(range(len(loads)), key=loads.__getitem__)
    since = loads[top:]
    fell_enough = top == 0 or since[-1] < since[0] * (1 - tolerance)
    if not (since[-1] < since[0] and fell_enough):
        return False
    lowest = since[0]
    for value in since[1:]:
        if value > lowest * (1 + tolerance):
            return False
        lowest = min(lowest, value)
    return True


def no_rise(forecast: Forecast | None) -> bool:
    """Whether the forecast expects no rise: its expected peak over the horizon is not above
    the load now (False without a forecast)."""
    return forecast is not None and forecast.peak.expected <= forecast.last


def decline_release(
    window: WindowReport, forecast: Forecast | None, own: OwnChange | None = None
) -> Release:
    """When acting during a falling load is safe (``windows.release_on_decline``): a window
    judged under the ``touched`` scope, over whose last forecast horizon the load fell
    (:func:`falling` over :attr:`Forecast.recent`), with nothing pending and no node joining (a
    node leaving is what a decline does), some changed workload having only lost pods, and the
    forecast agreeing (its expected peak over the horizon not above the load now: no rise
    ahead; the room for its upper edge is the headroom's to keep, :mod:`tuner.analyse.headroom`).
    Then the workloads that only lost pods and the nodes that only had pods stop on them count
    as settled for a removal or a replacement; a workload that grew (one service's load may
    rise while the total falls) and the nodes pods started on stay kept out of the plan; a
    deployment is still recorded only after a whole-stable window. The last condition, that an
    HPA scales each shrinking workload, needs the cluster: :meth:`Release.scaled_by`.

    ``own``: the tuner's last transition. In the window right after it (checked from its start,
    :meth:`OwnChange.seen_by`), a workload it started pods of is not a workload that grew: it
    changed by the tuner's own verified moves (the window right after a change made during a decline
    always sees that change). Such a workload counts as settled like the shrinking ones, and, when
    no other workload grew, the nodes the moved pods are Ready on count as settled like the emptied
    ones, as long as no more pods of it run than the transition left (:meth:`Release.left_as_moved`,
    once the cluster is read): an HPA that scaled it up refuses, and anything else that changed
    refuses as before. Why this is safe: the change these workloads and nodes show is the one the
    tuner made and verified (each new pod Ready where it was placed), not one the load made; without
    it the next look after every removal during a decline is refused, and the nodes the decline
    empties wait a retry more.
    """
    unsettled = window.unsettled
    if window.scope is not Scope.TOUCHED or window.verdict is Verdict.UNKNOWN:
        return Release(
            False, "the decline rule needs a judged window under the touched scope", "scope"
        )
    if window.load is None or forecast is None:
        return Release(False, "no load or no forecast", "no-forecast")
    loads = forecast.recent
    if not falling(loads):
        shown = " → ".join(f"{v:.4g}" for v in loads[-4:])
        return Release(
            False,
            f"the load did not fall over the last {len(loads)} steps since their highest ({shown})",
            "not-falling",
        )
    if unsettled.blockers and not unsettled.only_leaving:
        return Release(False, "; ".join(unsettled.blockers), "blocked")
    ours = own if own is not None and own.seen_by(window) else OwnChange(math.inf, math.inf)
    moved = tuple((w, n) for w, n in ours.counts if w in unsettled.workloads - unsettled.shrinking)
    grown = sorted(str(w) for w in unsettled.workloads - unsettled.shrinking - ours.workloads)
    if grown and not unsettled.shrinking:
        return Release(
            False, f"no workload only lost pods; changed otherwise: {_listed(grown)}", "grown"
        )
    if not no_rise(forecast):
        return Release(
            False,
            f"the forecast disagrees: its peak {forecast.peak} is above the load now "
            f"{forecast.last:.6g}",
            "disagrees",
        )
    if unsettled.shrinking:
        settled = f"{_counted(len(unsettled.shrinking), 'workload')} scaling down count as settled"
    elif moved:
        settled = "only the tuner's own moves changed"
    else:
        settled = "a window stable as a whole waits only the settle time"
    reason = (
        f"the load fell {max(loads):.6g} → {loads[-1]:.6g} and the forecast peak "
        f"{forecast.peak.expected:.6g} stays under it: {settled}"
        + (f" ({_counted(len(moved), 'workload')} the tuner moved settled too)" if moved else "")
        + (f" ({_counted(len(grown), 'workload')} that grew kept out)" if grown else "")
    )
    ours_ready = unsettled.nodes & ours.nodes if moved and not grown else frozenset()
    nodes = unsettled.emptied | ours_ready
    return Release(True, reason, "released", unsettled.shrinking, nodes, moved)


def _listed(names: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"
