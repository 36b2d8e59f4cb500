"""The evaluation's targets for a row beside the Cluster Autoscaler (issue 25's, measured the
same way as every figure of a :class:`~tuner.sim.report.Comparison`).

Where CA alone is at least :data:`ROOM_FOR_TARGETS` above the lower bound, the row must take at
least :data:`CAPTURE` of that room (``capture``) and cost no more than Karpenter plus
:data:`COST_SLACK` of CA alone's cost (``cost vs Karpenter``). On every scenario: pending
pod-seconds no more than CA alone's (``pending``); seconds over 100 % CPU no more than CA alone's
plus :data:`OVER_SLACK` of them (``over CPU``); evictions an hour no more than Karpenter's or
twice CA alone's, whichever is more (``evictions``); and never a higher cost than CA alone's
(``cost vs CA alone``).
"""

from __future__ import annotations

from tuner.sim.report import BASELINE, Comparison
from tuner.sim.strategies.karpenter import KarpenterStrategy

KARPENTER = KarpenterStrategy.name
ROOM_FOR_TARGETS = 0.03
CAPTURE = 0.7
COST_SLACK = 0.005
OVER_SLACK = 0.05
_EPSILON = 1e-9
"""Figures equal to a limit meet it (float sums over ticks)."""


def missed(comparison: Comparison, strategy: str) -> tuple[str, ...]:
    """The targets ``strategy``'s row misses on ``comparison`` (its Karpenter row needed for
    the cost and eviction targets), in the module's words; empty: every one met."""
    row, base = comparison.outcome(strategy), comparison.outcome(BASELINE)
    karpenter = comparison.outcome(KARPENTER)
    misses = []
    if comparison.room >= ROOM_FOR_TARGETS:
        bound = comparison.lower_bound_cost
        if row.cost > base.cost - CAPTURE * (base.cost - bound) + _EPSILON:
            misses.append("capture")
        if row.cost > karpenter.cost + COST_SLACK * base.cost + _EPSILON:
            misses.append("cost vs Karpenter")
    if row.pending_pod_seconds > base.pending_pod_seconds + _EPSILON:
        misses.append("pending")
    if row.short_seconds > base.short_seconds * (1 + OVER_SLACK) + _EPSILON:
        misses.append("over CPU")
    evictions = max(karpenter.evictions_per_hour, 2 * base.evictions_per_hour)
    if row.evictions_per_hour > evictions + _EPSILON:
        misses.append("evictions")
    if row.cost > base.cost + _EPSILON:
        misses.append("cost vs CA alone")
    return tuple(misses)
