"""What the cluster read after a window holds that the window did not see.

The cycle judges a window from Prometheus (or API snapshots) and then reads the cluster to plan
on. Between the source's last look and the read, nodes may join and pods go pending:

- a node the window did not observe was never judged stable: the plan keeps out of it as out of
  a node that changed over the window (neither drains it nor places pods on it), and the
  deployment read is not recorded (it is not the one judged stable);
- a pod pending in the read: an actionable window saw none (a pod pending anywhere blocks
  acting, under either scope and for the decline rule), so a pending pod is a change after the
  window, and the cycle does not act, as it would not on a window that saw it. The pods the
  judges leave out are left out here too: the tuner's placeholders (they hold room for an
  autoscaler to fill) and Jobs' pods (they come and go by design).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.model.cluster import Cluster
from tuner.model.conventions import Keys
from tuner.model.window_report import WindowReport

LISTED = 5
"""Pods named in :attr:`Unseen.blocker`; the rest are counted."""


@dataclass(frozen=True)
class Unseen:
    """What a cluster read holds that the window before it did not see."""

    nodes: frozenset[str] = frozenset()
    """Nodes the window did not observe (they joined after it): kept out of the plan."""
    pending: tuple[str, ...] = ()
    """Pods pending in the read (``namespace/name``, sorted): the cycle does not act."""

    @property
    def blocker(self) -> str | None:
        """Why the cycle does not act (pods pending), or None."""
        if not self.pending:
            return None
        shown = ", ".join(self.pending[:LISTED])
        more = len(self.pending) - LISTED
        listed = shown if more <= 0 else f"{shown} and {more} more"
        return f"pods pending in the cluster read after the window (not seen by it): {listed}"


def unseen(window: WindowReport, cluster: Cluster, keys: Keys) -> Unseen:
    """What ``cluster``, read after an actionable ``window``, holds that the window did not see:
    the nodes it did not observe (none when its source cannot say, ``observed_nodes`` None)
    and the pods pending, but the tuner's placeholders (labelled as ``keys`` say) and Jobs'."""
    observed = window.observed_nodes
    nodes = frozenset() if observed is None else frozenset(n.name for n in cluster.nodes) - observed
    pending = sorted(
        p.key
        for p in cluster.pods
        if p.pending and keys.placeholder not in p.labels and p.owner_kind != "Job"
    )
    return Unseen(nodes, tuple(pending))
