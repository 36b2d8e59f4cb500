"""What ``tuner plan`` (and each daemon cycle) reports: decision, costs, utilization, actions."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

from tuner.analyse.decision import Analysis
from tuner.analyse.usable import Utilization
from tuner.model.cluster import Cluster, Workload
from tuner.model.onboarding import Placement, placement
from tuner.model.price import TypePrice, type_prices
from tuner.plan.actions import Action, action_json, placed_workload
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
    placements: Mapping[Workload, Placement]
    """How the new pods of the migrated and added workloads are placed, where the source
    holds their pod templates."""
    prices: tuple[TypePrice, ...] = ()
    """What the cluster's nodes were costed at, per instance type, and from which source."""

    def placement(self, action: Action) -> Placement | None:
        """How a migrate or add places its new pod; None for other actions or when unknown."""
        workload = placed_workload(action)
        return None if workload is None else self.placements.get(workload)

    def to_json(self) -> dict[str, Any]:
        """The plan output contract (docs/concepts.md), plus the option costs, skipped entries and
        each migrate/add action's ``placement`` (where known)."""
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
                **{p.option.value: _finite(p.cost_after) for p in analysis.proposals},
            },
            "utilization": {
                "before": {k: round(v, 4) for k, v in asdict(self.before).items()},
                "after": {k: round(v, 4) for k, v in asdict(self.after).items()},
            },
            "removed_nodes": list(analysis.change.remove_nodes),
            "new_nodes": [
                {"node": n.name, "pool": n.pool.name, "type": n.pool.node_type}
                for n in analysis.change.new_nodes
            ],
            "previous_deployment": next((p.holds for p in analysis.proposals if p.holds), None),
            "unattainable": [
                {"id": f.entry, "reason": f.reason}
                for f in analysis.forget
                if f.kind == "unattainable"
            ],
            "actions": [self._action_json(a) for a in self.actions],
            "prices": [
                {
                    "node_type": p.node_type,
                    "nodes": p.nodes,
                    "price": round(p.price, 6),
                    "source": p.source.value,
                }
                for p in self.prices
            ],
        }

    def _action_json(self, action: Action) -> dict[str, Any]:
        entry = action_json(action)
        how = self.placement(action)
        if how is not None:
            entry["placement"] = how.value
        return entry


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 6)


def build_report(cluster: Cluster, settings: Settings, analysis: Analysis) -> PlanReport:
    """Plan the analysis' change, measure utilization before and after it (provisioned nodes
    included), and say how each new pod is placed (``execute.label_prefix`` names the
    onboarding labels)."""
    usability = settings.analyse.usability
    actions = plan(cluster, analysis.change)
    final = replay(cluster, actions)
    before = Utilization.of(
        ((n.allocatable, cluster.requested(n.name)) for n in cluster.nodes), usability
    )
    after = Utilization.of(
        (
            (allocatable, final.requested[name])
            for name, allocatable in final.allocatable.items()
            if name not in final.removed
        ),
        usability,
    )
    prefix = settings.execute.label_prefix
    placed = {w for a in actions if (w := placed_workload(a)) is not None}
    placements = {w: how for w in placed if (how := placement(cluster, w, prefix)) is not None}
    return PlanReport(
        analysis,
        actions,
        before,
        after,
        settings.pricing.currency,
        MappingProxyType(placements),
        type_prices(cluster.nodes, settings.pricing),
    )
