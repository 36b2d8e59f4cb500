"""The onboarding preference, as pure edits of a pod template's ``affinity`` (JSON form).

An onboarded workload's pods prefer (weight 100) nodes carrying its per-workload label, so
the executor steers a replacement pod by labelling its destination. Preferred, never
required: without the label the workload schedules as before.
"""

from __future__ import annotations

import copy
from typing import Any

from tuner.model.onboarding import PREFERRED, preferred_labels

WEIGHT = 100


def _term(label: str) -> dict[str, Any]:
    return {
        "weight": WEIGHT,
        "preference": {"matchExpressions": [{"key": label, "operator": "Exists"}]},
    }


def _is_ours(term: Any, label: str) -> bool:
    expressions = (term.get("preference") or {}).get("matchExpressions") or []
    return any(e.get("key") == label for e in expressions)


def has_preference(affinity: dict[str, Any] | None, label: str) -> bool:
    """The affinity prefers nodes with ``label``."""
    return label in preferred_labels(affinity)


def with_preference(affinity: dict[str, Any] | None, label: str) -> dict[str, Any]:
    """The affinity plus the preference (unchanged when already there)."""
    result = copy.deepcopy(affinity or {})
    if has_preference(result, label):
        return result
    node = result.setdefault("nodeAffinity", {})
    node[PREFERRED] = [*(node.get(PREFERRED) or []), _term(label)]
    return result


def without_preference(affinity: dict[str, Any] | None, label: str) -> dict[str, Any] | None:
    """The affinity without the preference; None when nothing is left."""
    result = copy.deepcopy(affinity or {})
    node = result.get("nodeAffinity") or {}
    terms = [t for t in node.get(PREFERRED) or [] if not _is_ours(t, label)]
    if terms:
        node[PREFERRED] = terms
    else:
        node.pop(PREFERRED, None)
    if not node:
        result.pop("nodeAffinity", None)
    return result or None
