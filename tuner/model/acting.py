"""What the cycle may do with a judged window: where the window starts, how long the decline
rule waits, and whether it acts on it, records it, and what it keeps out of the plan."""

from __future__ import annotations

from collections import Counter
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
    two looks in a row (``windows.retry_s``; never longer than ``analyse.candidate_delay_s``).

    Why this is safe: the candidate delay (the Cluster Autoscaler's unneeded time) waits to see
    that a node stays unneeded, i.e. that no rise takes its room back. During a released
    decline that is already established — the load fell over the whole forecast horizon, the
    forecast expects no rise over the next one (a node's start-up plus a window), nothing is
    Pending, no node is joining — and a removal still leaves the headroom
    (:mod:`tuner.analyse.headroom`) and the HPAs' next step. What a wait still buys is time
    for the HPAs' scale-down to end before the tuner moves their pods: a pod started in the
    middle of a scale-down has no metrics yet, which an HPA counts as at its target, and the
    scale-down stalls (with no wait at all the simulator shows it: more cost, nothing pending).
    Two looks a retry apart ask the node to be a candidate across a whole retry, not at one
    instant; a scale-down longer than that may still be caught. The decline settle time
    (:func:`decline_settle_s`) is a node's start-up: how long a change must stand before the
    next, not how long a node must stay unneeded.
    """
    return min(settings.analyse.candidate_delay_s, settings.windows.retry_s)


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
        return Acting(window, whole, release)

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
        stay one only ``windows.retry_s`` (:func:`decline_candidate_delay_s`), not the whole
        ``analyse.candidate_delay_s``."""
        if not self.released:
            return settings
        delay = decline_candidate_delay_s(settings)
        return replace(settings, analyse=replace(settings.analyse, candidate_delay_s=delay))

    def read(self, cluster: Cluster) -> Acting:
        """The release's last conditions once the cluster is read: :meth:`Release.scaled_by`
        its HPAs' targets, :meth:`Release.left_as_moved` its pods per workload."""
        if self.release is None:
            return self
        counts = Counter(p.workload for p in cluster.pods)
        release = self.release.scaled_by(cluster.hpa_targets).left_as_moved(counts)
        return replace(self, release=release)

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
