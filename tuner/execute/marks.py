"""Everything the tuner writes to nodes and pods, as pure patch builders.

Every change carries an ownership marker so a later run can find and undo it after a crash:
the label ``<prefix>/managed=true`` (found with one label selector) and the annotation
``<prefix>/changes``, a JSON record of exactly what was changed (labels added, cordon, taint,
the pod-deletion-cost it replaced). A change and its marker go in one merge patch, so they
are applied, and undone, atomically.
"""

from __future__ import annotations

import json
from typing import Any

from tuner.model.conventions import Keys

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LOWEST_COST = str(-(2**31))
"""The lowest pod-deletion-cost (an int32): this pod goes first on scale-down."""

Patch = dict[str, Any]


def recorded(obj: Any, keys: Keys) -> dict[str, Any]:
    """The changes recorded on a node or pod (client model object), ``{}`` when none."""
    text = (obj.metadata.annotations or {}).get(keys.changes)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _marked(keys: Keys, record: dict[str, Any], labels: dict[str, str | None]) -> Patch:
    return {
        "metadata": {
            "labels": {**labels, keys.managed: "true"},
            "annotations": {keys.changes: json.dumps(record, sort_keys=True)},
        }
    }


def label_node(node: Any, keys: Keys, label: str) -> Patch:
    """Add a workload label to a node."""
    record = recorded(node, keys)
    if label in (node.metadata.labels or {}) and label not in record.get("labels", []):
        raise ValueError(f"node {node.metadata.name} already has label {label} set by someone else")
    record["labels"] = sorted({*record.get("labels", []), label})
    return _marked(keys, record, {label: "true"})


def drain_node(node: Any, keys: Keys, since: float) -> Patch:
    """Cordon a node and add the tuner's NoSchedule taint, valued ``since`` (epoch seconds),
    each only if not already there, both recorded so that :func:`undo_node` (a rollback, a
    recovery) takes back exactly what this added."""
    record = recorded(node, keys)
    patch = _marked(keys, record, {})
    if not node.spec.unschedulable:
        record["cordoned"] = True
        patch["spec"] = {"unschedulable": True}
    taints = [_taint_dict(t) for t in node.spec.taints or ()]
    if not any(t["key"] == keys.taint for t in taints):
        record["tainted"] = True
        taints.append({"key": keys.taint, "value": str(int(since)), "effect": "NoSchedule"})
        patch.setdefault("spec", {})["taints"] = taints
        # The taint list is replaced whole: fail with 409 if the node changed meanwhile.
        patch["metadata"]["resourceVersion"] = node.metadata.resource_version
    patch["metadata"]["annotations"][keys.changes] = json.dumps(record, sort_keys=True)
    return patch


def undo_node(node: Any, keys: Keys, *, keep_cordon: bool = False) -> Patch | None:
    """Undo every recorded change and the marker; None when the node carries none."""
    labels = node.metadata.labels or {}
    record = recorded(node, keys)
    if keys.managed not in labels and not record:
        return None
    patch: Patch = {
        "metadata": {
            "labels": dict.fromkeys([keys.managed, *record.get("labels", [])]),
            "annotations": {keys.changes: None},
        }
    }
    if record.get("cordoned") and not keep_cordon:
        patch["spec"] = {"unschedulable": False}
    if record.get("tainted"):
        taints = [_taint_dict(t) for t in node.spec.taints or () if t.key != keys.taint]
        patch.setdefault("spec", {})["taints"] = taints or None
        patch["metadata"]["resourceVersion"] = node.metadata.resource_version
    return patch


def hand_over(node: Any, keys: Keys, when: str) -> Patch:
    """Leave an emptied node to the autoscaler: drop the taint and the ``managed`` label (so
    :func:`~tuner.execute.recover.recover` leaves it alone) but keep the cordon, stamped
    ``<prefix>/left-for-removal=<when>`` and recorded, so that :func:`reclaim` can undo it if
    no autoscaler removes the node. A node handed over before keeps its first stamp."""
    record = recorded(node, keys)
    patch = undo_node(node, keys, keep_cordon=True) or {"metadata": {"annotations": {}}}
    annotations = patch["metadata"].setdefault("annotations", {})
    stamp = (node.metadata.annotations or {}).get(keys.left_for_removal)
    annotations[keys.left_for_removal] = stamp or when
    if record.get("cordoned"):
        annotations[keys.changes] = json.dumps({"cordoned": True})
    return patch


def reclaim(node: Any, keys: Keys) -> Patch | None:
    """Take back a node handed over (:func:`hand_over`): undo its recorded cordon and drop the
    stamp; None when the node carries no stamp."""
    if keys.left_for_removal not in (node.metadata.annotations or {}):
        return None
    patch = undo_node(node, keys) or {"metadata": {"annotations": {}}}
    patch["metadata"].setdefault("annotations", {})[keys.left_for_removal] = None
    return patch


def cheapest_pod(pod: Any, keys: Keys) -> Patch:
    """Make a pod the first to go on scale-down, recording the cost it had."""
    annotations = pod.metadata.annotations or {}
    record = recorded(pod, keys)
    record.setdefault("deletion_cost", annotations.get(DELETION_COST))
    patch = _marked(keys, record, {})
    patch["metadata"]["annotations"][DELETION_COST] = LOWEST_COST
    return patch


def undo_pod(pod: Any, keys: Keys) -> Patch | None:
    """Restore a pod's deletion cost and drop the marker; None when it carries none."""
    record = recorded(pod, keys)
    if keys.managed not in (pod.metadata.labels or {}) and not record:
        return None
    annotations: dict[str, str | None] = {keys.changes: None}
    if "deletion_cost" in record:
        annotations[DELETION_COST] = record["deletion_cost"]
    return {"metadata": {"labels": {keys.managed: None}, "annotations": annotations}}


def _taint_dict(taint: Any) -> dict[str, Any]:
    entry = {"key": taint.key, "effect": taint.effect}
    if taint.value is not None:
        entry["value"] = taint.value
    if taint.time_added is not None:
        entry["timeAdded"] = taint.time_added
    return entry
