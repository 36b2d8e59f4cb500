"""What ``tuner plan`` (and each daemon cycle) reports: decision, costs, utilization, actions."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from tuner.analyse.decision import Analysis
from tuner.analyse.usable import Utilization
from tuner.model.cluster import Cluster
from tuner.plan.actions import Action, action_json
from tuner.plan.planner import plan
from tuner.plan.replay import replay
from tuner.settings import Settings


@dataclass(frozen=True)
class PlanReport:
    """An analysis turned into ordered actions, with utilization before and after."""

    analysis: Analysis
    actions: tuple[Action, ...]
    before: Utilization
    after: Utilization
    currency: str

    def to_json(self) -> dict[str, Any]:
        """The plan output contract (DESIGN §8), plus the option costs and skipped entries."""
        analysis = self.analysis
        return {
            "decision": analysis.decision.value,
            "reason": analysis.reason,
            "cost": {
                "current": round(analysis.cost_current, 6),
                "after": round(analysis.cost_after, 6),
                "currency": self.currency,
            },
            "options": {
                "current": round(analysis.cost_current, 6),
                "remove_nodes": _finite(analysis.cost_removal),
                "previous_deployment": _finite(analysis.cost_previous),
            },
            "utilization": {
                "before": {k: round(v, 4) for k, v in asdict(self.before).items()},
                "after": {k: round(v, 4) for k, v in asdict(self.after).items()},
            },
            "removed_nodes": list(analysis.change.remove_nodes),
            "previous_deployment": (
                analysis.previous.execution.id if analysis.previous.execution else None
            ),
            "unattainable": [
                {"id": entry, "reason": why} for entry, why in analysis.previous.unattainable
            ],
            "actions": [action_json(a) for a in self.actions],
        }


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 6)


def build_report(cluster: Cluster, settings: Settings, analysis: Analysis) -> PlanReport:
    """Plan the analysis' change and measure utilization before and after it."""
    usability = settings.analyse.usability
    actions = plan(cluster, analysis.change)
    final = replay(cluster, actions)
    before = Utilization.of(
        ((n.allocatable, cluster.requested(n.name)) for n in cluster.nodes), usability
    )
    after = Utilization.of(
        (
            (final.allocatable[n.name], final.requested[n.name])
            for n in cluster.nodes
            if n.name not in final.removed
        ),
        usability,
    )
    return PlanReport(analysis, actions, before, after, settings.pricing.currency)
