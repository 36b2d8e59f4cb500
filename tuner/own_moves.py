"""What a transition changed by its own verified moves
(:class:`~tuner.model.window_report.OwnChange`), which the decline rule tells from what the load
changed."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from tuner.model.cluster import Cluster
from tuner.model.window_report import OwnChange
from tuner.plan.actions import Add, Migrate, Remove, placed_workload

if TYPE_CHECKING:
    from tuner.cycle import TransitionResult


def own_change(cluster: Cluster, result: TransitionResult, at: float, until: float) -> OwnChange:
    """What a transition begun at ``at`` on ``cluster`` (the warm-up after it over at
    ``until``) changed by its verified actions: the workloads its migrates and adds started
    pods of, each with its pod count after it (the cluster's, plus the adds, less the removes),
    and the nodes those pods were verified on (the target, or where the executor saw it land;
    none for a pod the scheduler placed)."""
    placed = [a for a in result.done if isinstance(a, Migrate | Add)]
    change = Counter(a.workload for a in placed if isinstance(a, Add))
    change.subtract(a.pod.workload for a in result.done if isinstance(a, Remove))
    counts = Counter(p.workload for p in cluster.pods)
    started = sorted({w for a in placed if (w := placed_workload(a)) is not None}, key=str)
    nodes = frozenset(
        next((n for b, n in result.landed_elsewhere if b == a), a.target)
        for a in placed
        if a not in result.eviction_only
    )
    return OwnChange(at, until, tuple((w, counts[w] + change[w]) for w in started), nodes)
