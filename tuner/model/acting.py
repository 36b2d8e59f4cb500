"""What the cycle may do with a judged window: where the window starts, how long the decline
rule waits, and whether it acts on it, records it, and what it keeps out of the plan."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tuner.model.cluster import Cluster, Workload
from tuner.model.forecast import Forecast
from tuner.model.window_report import (
    OwnChange,
    Release,
    Scope,
    Verdict,
    WindowReport,
    decline_release,
    no_rise,
)
from tuner.settings import Settings


def decline_settle_s(settings: Settings) -> float:
    """How long after a change the next may come during a decline (``windows.decline_settle_s``,
    else a node's start-up, ``forecast.node_startup_s``)."""
    settle = settings.windows.decline_settle_s
    return settings.forecast.node_startup_s if settle is None else settle


def decline_candidate_delay_s(settings: Settings) -> float:
    """How long a node must stay a removal candidate during a released decline: found one at
    two looks in a row (``windows.decline_retry_s`` apart, the looks' pace during a released
    decline; never longer than ``windows.retry_s`` or ``analyse.candidate_delay_s``).

    Why this is safe: the candidate delay (the Cluster Autoscaler's unneeded time) waits to see
    that a node stays unneeded, i.e. that no rise takes its room back. During a released
    decline that is already established — the load fell over the whole forecast horizon, the
    forecast expects no rise over the next one (a node's start-up plus a window), nothing is
    Pending, no node is joining — and a removal still leaves the headroom
    (:mod:`tuner.analyse.headroom`) and the HPAs' next step. What a wait still buys is time
    for the HPAs' scale-down to end before the tuner moves their pods: a pod started in the
    middle of a scale-down has no metrics yet, which an HPA counts as at its target, and the
    scale-down stalls (with no wait at all the simulator shows it: more cost, nothing pending).
    Two looks ``decline_retry_s`` apart (30 s: two syncs of the HPAs) ask the node to be a
    candidate across an HPA step, not at one instant; a scale-down longer than that may still
    be caught. Measured (seed 1, every phase of the first look): looks a minute apart took
    75 % of ``thesis-narrow``'s room and half a minute apart 78–83 %, nothing more pending.
    The decline settle time (:func:`decline_settle_s`) is a node's start-up: how long a change
    must stand before the next, not how long a node must stay unneeded.
    """
    return min(settings.analyse.candidate_delay_s, decline_retry_s(settings))


def decline_retry_s(settings: Settings) -> float:
    """How soon a cycle looks again after staying on a released decline
    (``windows.decline_retry_s``, never longer than ``windows.retry_s``)."""
    return min(settings.windows.decline_retry_s, settings.windows.retry_s)


DECLINE_REPLACE_STANDS_S = 2400.0
"""How long a replacement made during a released decline must be expected to stand before the
decline frees the room it buys: the time the decline, going on at the pace it fell over the
last forecast horizon, takes to free the requests of the cluster's smallest node
(:func:`freed_in_s`), must be at least this. Sooner, a removal of that node's size soon does
what the replacement does without buying a node, and the replacement's new node is emptied
first by the HPAs' scale-in (a ReplicaSet deletes its newest pods first: the ones just moved
there), so its pods move twice for a saving of minutes. Measured on ``diurnal-week`` (seed 1):
of 34 replacements, the 24 made in released declines moved 9-22 pods each and the new nodes of
17 of them were removed within the hour (median 0.5 h); those made on windows stable as a whole
moved 1-4 pods. The value is a policy choice, the evictions a replacement may cost against the
minutes it saves, and it was chosen there: with 0 s (any replacement) the headline row took 50 %
of the room at 5.45 evictions an hour, 1,800 s 45 % at 4.9, 2,400 s 43 % at 4.55, 2,700 s 40 %
at 4.4, 3,600 s 35 % at 4.3, no replacement during a decline 31 % at 4.2; 2,400 s is the
shortest of these within issue 25's bound (twice CA alone's 2.35). Re-measured on the week that
scenario replays since (its third, after two weeks of history): 0 s 50 % at 5.16, 1,800 s 42 %
at 4.52, 2,400 s 40 % at 3.84, against twice CA alone's 2.13."""


def freed_in_s(forecast: Forecast, cluster: Cluster) -> float:
    """Seconds the decline takes to free the CPU requests of the cluster's smallest node if
    the load goes on falling at the pace it fell over the last forecast horizon (from its
    highest there to now, :attr:`Forecast.recent`: the load known, never the load to come),
    as if every request followed the load (which frees room sooner than the cluster will:
    DaemonSets and pods no HPA scales stay); infinite when the load did not fall."""
    recent = forecast.recent
    nodes = cluster.nodes
    if len(recent) < 2 or not nodes:
        return math.inf
    fall = (max(recent) - recent[-1]) / ((len(recent) - 1) * forecast.step_s)
    if fall <= 0:
        return math.inf
    requested = sum(p.requests.cpu for p in cluster.pods if p.node is not None)
    smallest = min(n.allocatable.cpu for n in nodes)
    if requested <= 0 or recent[-1] <= 0:
        return 0.0
    return smallest * recent[-1] / (requested * fall)


def window_start(
    settings: Settings, forecast: Forecast | None, now: float, stable_since: float
) -> tuple[float, bool] | None:
    """Where the window judged at ``now`` starts, and whether it is a whole one: a whole window
    back once no change came in it (``stable_since``); before that, during a decline (the rule
    on, the forecast's expected peak not above the load now), the decline settle time back once no
    change came in that (:func:`decline_settle_s`); else None (wait)."""
    start = now - settings.windows.measure_s
    if start >= stable_since:
        return start, True
    settle = decline_settle_s(settings)
    if settings.windows.release_on_decline and no_rise(forecast) and now - settle >= stable_since:
        return now - settle, False
    return None


@dataclass(frozen=True)
class Acting:
    """What the cycle may do with a judged window: act on it as the scope says (a whole window),
    or on the decline rule's release; record it only when whole and stable as a whole."""

    window: WindowReport
    whole: bool
    """The window is a whole ``windows.measure_s`` (not a decline's shorter settle window)."""
    release: Release | None = None
    """The decline rule's answer (None: not asked: the rule is off)."""
    forecast: Forecast | None = None
    """The forecast the release decided by."""
    freed_s: float = math.inf
    """During a released decline, once the cluster is read: :func:`freed_in_s`."""

    @staticmethod
    def of(
        window: WindowReport,
        forecast: Forecast | None,
        whole: bool,
        decline: bool,
        own: OwnChange | None = None,
    ) -> Acting:
        """The window judged, with the decline rule when ``decline`` (``own``: the tuner's last
        change) — asked of a window stable as a whole too: during a falling load the forecast
        agrees with, a removal candidate need stay one only a retry there as well
        (:meth:`settled`)."""
        release = decline_release(window, forecast, own) if decline else None
        return Acting(window, whole, release, forecast)

    @property
    def released(self) -> bool:
        """The decline rule holds on this window."""
        return self.release is not None and self.release.holds

    @property
    def actionable(self) -> bool:
        """The tuner may act: a load, and a whole actionable window or the decline's release."""
        if self.window.load is None:
            return False
        return (self.whole and self.window.actionable) or self.released

    @property
    def records(self) -> bool:
        """The deployment may be recorded: a whole window, stable as a whole."""
        return self.whole and self.window.whole_stable

    @property
    def unsettled_nodes(self) -> frozenset[str]:
        """Nodes a plan keeps out of: those that changed, less those the release settles."""
        settled = self.release.nodes if self.released and self.release else frozenset()
        return self.window.unsettled_nodes - settled

    @property
    def unsettled_workloads(self) -> frozenset[Workload]:
        """Workloads a plan keeps out of: those that changed, less those the release settles."""
        release = self.release if self.released else None
        settled = release.workloads | {w for w, _ in release.moved} if release else frozenset()
        return self.window.unsettled_workloads - settled

    def settled(self, settings: Settings) -> Settings:
        """The settings the analysis runs with: during a released decline a candidate need
        stay one only across two looks (:func:`decline_candidate_delay_s`), not the whole
        ``analyse.candidate_delay_s``, and no node is replaced when the decline frees a node's
        room sooner than :data:`DECLINE_REPLACE_STANDS_S` (the replace option then reports
        itself disabled)."""
        if not self.released:
            return settings
        delay = decline_candidate_delay_s(settings)
        stands = self.freed_s >= DECLINE_REPLACE_STANDS_S
        analyse = replace(
            settings.analyse,
            candidate_delay_s=delay,
            replace_nodes=settings.analyse.replace_nodes and stands,
        )
        return replace(settings, analyse=analyse)

    def read(self, cluster: Cluster) -> Acting:
        """The release's last conditions once the cluster is read: :meth:`Release.scaled_by`
        its HPAs' targets, :meth:`Release.left_as_moved` its pods per workload; and how soon
        the decline frees a node's room (:attr:`freed_s`)."""
        if self.release is None:
            return self
        release = self.release.scaled_by(cluster.hpa_targets).left_as_moved(
            cluster.pods_per_workload
        )
        freed = math.inf if self.forecast is None else freed_in_s(self.forecast, cluster)
        return replace(self, release=release, freed_s=freed)

    @property
    def outcome(self) -> str:
        """The cycle's outcome when it does not act: ``waiting`` on after a decline's settle
        window, else ``unknown`` or ``unstable`` as judged."""
        if not self.whole:
            return "waiting"
        return "unknown" if self.window.verdict is Verdict.UNKNOWN else "unstable"

    @property
    def reason(self) -> str:
        """Why the tuner does not act on the window (by the scope, and the decline rule)."""
        window = self.window
        unstable = window.verdict is Verdict.UNSTABLE
        reason = window.judgement if unstable and window.scope is Scope.TOUCHED else window.reason
        if not self.whole:
            reason = f"a settle window during a decline: {reason}"
        if self.release is not None and not self.release.holds:
            reason = f"{reason}; not a decline to act on: {self.release.reason}"
        return reason
