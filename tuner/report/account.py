"""A shadow cycle's entry in the account (:mod:`tuner.model.account`), from its cycle report."""

from __future__ import annotations

from collections import Counter

from tuner.cycle import CycleReport
from tuner.model.account import ShadowCycle, counts, digest, premise
from tuner.plan.actions import Migrate, Remove, action_json, evictions
from tuner.report.text import describe


def shadow_cycle(report: CycleReport, previous: ShadowCycle | None) -> ShadowCycle | None:
    """What the cycle would have done and saved (None when it analysed nothing: an unstable,
    unknown or waiting window); ``previous`` is the account's last cycle, to tell whether the
    cluster changed under its plan."""
    plan, cluster = report.plan, report.cluster
    if plan is None or cluster is None:
        return None
    analysis = plan.analysis
    touched = sorted({a.pod.key for a in plan.actions if isinstance(a, Migrate | Remove)})
    changed = None
    if previous is not None:
        changed = premise(cluster, previous.touched) != previous.premise
    return ShadowCycle(
        at=report.end,
        interval_s=report.next_in,
        decision=analysis.decision.value,
        reason=report.reason,
        cost_before=analysis.cost_current,
        cost_after=analysis.cost_after,
        currency=plan.currency,
        actions=counts(Counter(action_json(a)["op"] for a in plan.actions)),
        evictions=counts(evictions(plan.actions)),
        held=report.hold,
        plan=digest(describe(a) for a in plan.actions) if plan.actions else "",
        touched=tuple(touched),
        premise=premise(cluster, touched),
        changed=changed,
    )
