"""The shadow account in the graph: one ``(:ShadowCycle)`` vertex per cycle, apart from the
executions' onion (nothing links them).

``(:ShadowCycle {id, at, decision, cost_before, cost_after, saving, currency, evictions, held,
changed, body})``: the properties a person reads in Neo4j Browser, and ``body``, the whole cycle
as JSON (:meth:`~tuner.model.account.ShadowCycle.to_json`), which is what the tuner reads back.
"""

from __future__ import annotations

import json
from typing import Any

from tuner.model.account import ShadowCycle

RECORD = "MERGE (s:ShadowCycle {id: $id}) SET s += $props"
PERIOD = (
    "MATCH (s:ShadowCycle) WHERE s.at >= $since AND s.at <= $until "
    "RETURN s.id AS id, s.body AS body ORDER BY s.at, s.id"
)


def properties(cycle: ShadowCycle) -> dict[str, Any]:
    """The vertex' properties."""
    return {
        "at": cycle.at,
        "decision": cycle.decision,
        "cost_before": cycle.cost_before,
        "cost_after": cycle.cost_after,
        "saving": cycle.saving,
        "currency": cycle.currency,
        "evictions": sum(n for _, n in cycle.evictions),
        "held": cycle.held,
        "changed": cycle.changed,
        "body": json.dumps(cycle.to_json(), sort_keys=True),
    }
