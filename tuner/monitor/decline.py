"""What the decline rule (:func:`~tuner.model.window_report.decline_release`) reads from a
window besides what changed: the workloads that only lost pods, the nodes that only had pods
stop on them, and whether the cluster-wide blockers are only nodes leaving — from
kube-state-metrics series (:func:`shrunk_in_series`) or from two API snapshots
(:func:`shrunk_in_snapshots`). Pure functions."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from tuner.model.cluster import Cluster, Workload
from tuner.model.window_report import Unsettled
from tuner.monitor.evidence import WindowEvidence


def shrunk_in_series(
    evidence: WindowEvidence, unsettled: Unsettled, moved: set[str], orphans: bool
) -> Unsettled:
    """``unsettled`` with its shrinking workloads (every step's live pods at most the step's
    before, no pod seen that was not there at the first step, none pending or unready), its
    emptied nodes (the same over the pods on them, neither cordoned nor uncordoned, present
    all along) and whether its blockers are only the ``moved`` nodes leaving (none joined, no
    pod pending, no unready pod of no known workload: ``orphans``)."""
    troubled = {evidence.pod_workloads.get(k) for k in evidence.pending | evidence.unready}
    shrinking = {
        w
        for w in unsettled.workloads - troubled
        if falls(evidence.pod_counts.get(w, ()), evidence.pods_seen.get(w, 0))
    }
    emptied = {
        n
        for n in unsettled.nodes - moved - evidence.cordons
        if all(evidence.nodes.get(n, (False,)))
        and falls(evidence.node_pods.get(n, ()), evidence.node_pods_seen.get(n, 0))
    }
    joined = {n for n in moved if not evidence.nodes.get(n, (False,))[0]}
    return replace(
        unsettled,
        shrinking=frozenset(shrinking),
        emptied=frozenset(emptied),
        only_leaving=bool(unsettled.blockers) and not (evidence.pending or orphans or joined),
    )


def falls(counts: Sequence[int], seen: int) -> bool:
    """Whether a timeline of live pods only fell: never rose from one step to the next, and no
    more different pods were seen than at the first step (none started between two steps)."""
    return bool(counts) and seen <= counts[0] and all(a >= b for a, b in itertools.pairwise(counts))


def shrunk_in_snapshots(
    start: Cluster,
    end: Cluster,
    unsettled: Unsettled,
    troubled: set[Workload],
    pending: bool,
    handed_over: frozenset[str],
) -> Unsettled:
    """``unsettled`` (between the snapshots ``start`` and ``end``) with its shrinking workloads
    (no pod at the end that was not at the start, none of the ``troubled`` with a pending or
    unready pod), its emptied nodes (in both, cordoned as before, no pod at the end that was
    not on it at the start) and whether its blockers are only nodes leaving (none joined but
    ``handed_over`` ones, nothing ``pending``). A change that came back is not seen."""
    keys_before = {p.key for p in start.pods}
    started = {p.workload for p in end.pods if p.key not in keys_before}
    before, after = start.node_by_name, end.node_by_name
    by_start, by_end = start.pods_by_node, end.pods_by_node
    emptied = {
        name
        for name in unsettled.nodes & set(before) & set(after)
        if before[name].unschedulable == after[name].unschedulable
        and {p.key for p in by_end[name]} <= {p.key for p in by_start[name]}
    }
    joined = set(after) - set(before) - handed_over
    return replace(
        unsettled,
        shrinking=frozenset(unsettled.workloads - troubled - started),
        emptied=frozenset(emptied),
        only_leaving=bool(unsettled.blockers) and not (pending or joined),
    )
