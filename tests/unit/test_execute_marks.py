"""The executor's pure parts: ownership marks undo exactly what they record; the onboarding
affinity edit is reversible; plan JSON resolves back to actions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from tuner.execute.affinity import has_preference, with_preference, without_preference
from tuner.execute.marks import (
    DELETION_COST,
    LOWEST_COST,
    cheapest_pod,
    drain_node,
    hand_over,
    label_node,
    reclaim,
    undo_node,
    undo_pod,
)
from tuner.execute.reclaim import overdue
from tuner.model.conventions import Keys

SINCE = 1767225600.5
"""2026-01-01T00:00:00.5Z: the taint's value is whole epoch seconds."""
KEYS = Keys()
API = client.ApiClient()


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what the API server applies)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def node(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {"zone": "a"}, "resourceVersion": "7"},
        "spec": spec,
    }


def apply(obj: dict[str, Any], build: Any, model: Any = client.V1Node) -> dict[str, Any]:
    patch = build(model.from_dict(obj))
    if patch is None:
        return obj
    patch["metadata"].pop("resourceVersion", None)
    return merge(obj, json.loads(json.dumps(patch)))


def test_a_label_and_its_undo_leave_the_node_as_it_was() -> None:
    label = KEYS.workload_label("shop", "web")
    before = node()
    labelled = apply(before, lambda n: label_node(n, KEYS, label))
    assert labelled["metadata"]["labels"][label] == "true"
    assert labelled["metadata"]["labels"][KEYS.managed] == "true"
    assert apply(labelled, lambda n: undo_node(n, KEYS)) == merge(
        before, {"metadata": {"annotations": {}}}
    )


def test_undo_never_removes_a_cordon_or_taint_someone_else_set() -> None:
    theirs = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    before = node(unschedulable=True, taints=[theirs])
    drained = apply(before, lambda n: drain_node(n, KEYS, SINCE))
    assert drained["spec"]["unschedulable"] is True
    assert drained["spec"]["taints"] == [
        theirs,
        {"key": KEYS.taint, "value": "1767225600", "effect": "NoSchedule"},  # as CA spells it
    ]
    undone = apply(drained, lambda n: undo_node(n, KEYS))
    assert undone["spec"] == {"unschedulable": True, "taints": [theirs]}
    assert undone["metadata"]["labels"] == {"zone": "a"}


def test_a_cordon_the_tuner_set_is_undone_unless_the_node_is_handed_over() -> None:
    drained = apply(node(), lambda n: drain_node(n, KEYS, SINCE))
    assert apply(drained, lambda n: undo_node(n, KEYS))["spec"].get("unschedulable") is False
    kept = apply(drained, lambda n: undo_node(n, KEYS, keep_cordon=True))
    assert kept["spec"]["unschedulable"] is True
    assert "taints" not in kept["spec"]


def test_a_node_handed_over_then_reclaimed_is_as_it_was() -> None:
    before = node()
    drained = apply(before, lambda n: drain_node(n, KEYS, SINCE))
    handed = apply(drained, lambda n: hand_over(n, KEYS, "2026-01-01T00:00:00Z"))
    assert handed["spec"]["unschedulable"] is True
    assert "taints" not in handed["spec"]
    assert KEYS.managed not in handed["metadata"]["labels"]  # recover() leaves it alone
    assert handed["metadata"]["annotations"][KEYS.left_for_removal] == "2026-01-01T00:00:00Z"
    again = apply(
        apply(handed, lambda n: drain_node(n, KEYS, SINCE)), lambda n: hand_over(n, KEYS, "z")
    )
    assert again["metadata"]["annotations"][KEYS.left_for_removal] == "2026-01-01T00:00:00Z"
    reclaimed = apply(again, lambda n: reclaim(n, KEYS))
    assert reclaimed["spec"].get("unschedulable") is False
    assert reclaimed["metadata"]["labels"] == before["metadata"]["labels"]
    assert reclaimed["metadata"]["annotations"] == {}


def test_a_reclaim_keeps_a_cordon_someone_else_set() -> None:
    drained = apply(node(unschedulable=True), lambda n: drain_node(n, KEYS, SINCE))
    handed = apply(drained, lambda n: hand_over(n, KEYS, "2026-01-01T00:00:00Z"))
    reclaimed = apply(handed, lambda n: reclaim(n, KEYS))
    assert reclaimed["spec"]["unschedulable"] is True
    assert reclaimed["metadata"]["annotations"] == {}
    assert reclaim(client.V1Node.from_dict(node()), KEYS) is None


@pytest.mark.parametrize(
    ("stamp", "grace", "after", "due"),
    [
        ("2026-01-01T00:00:00Z", 1800, 1799, False),
        ("2026-01-01T00:00:00Z", 1800, 1800, True),
        ("2026-01-01T00:00:00Z", 0, 10**9, False),  # 0: wait for ever
        ("yesterday", 1800, 0, True),  # unreadable: not pinned for ever
        (None, 1800, 10**9, False),  # not handed over
    ],
)
def test_a_handed_over_node_is_overdue_after_the_grace(
    stamp: str | None, grace: float, after: float, due: bool
) -> None:
    obj = node()
    if stamp is not None:
        obj["metadata"]["annotations"] = {KEYS.left_for_removal: stamp}
    handed_at = 1767225600.0  # 2026-01-01T00:00:00Z
    assert overdue(client.V1Node.from_dict(obj), KEYS, grace, handed_at + after) is due


def test_a_label_someone_else_set_is_not_taken_over() -> None:
    label = KEYS.workload_label("shop", "web")
    theirs = node()
    theirs["metadata"]["labels"][label] = "mine"
    with pytest.raises(ValueError, match="someone else"):
        apply(theirs, lambda n: label_node(n, KEYS, label))


@pytest.mark.parametrize("previous", [None, "5"])
def test_the_deletion_cost_is_restored(previous: str | None) -> None:
    annotations = {DELETION_COST: previous} if previous else {}
    pod = {"metadata": {"name": "p", "namespace": "shop", "annotations": annotations}}
    cheap = apply(pod, lambda p: cheapest_pod(p, KEYS), client.V1Pod)
    assert cheap["metadata"]["annotations"][DELETION_COST] == LOWEST_COST
    restored = apply(cheap, lambda p: undo_pod(p, KEYS), client.V1Pod)
    assert restored["metadata"]["annotations"] == annotations
    assert restored["metadata"]["labels"] == {}


def test_an_unmarked_object_needs_no_undo() -> None:
    assert undo_node(client.V1Node.from_dict(node()), KEYS) is None


def test_long_workload_labels_stay_valid() -> None:
    label = KEYS.workload_label("n" * 60, "d" * 200)
    prefix, name = label.split("/")
    assert prefix == "tuner.dev" and len(name) <= 63 and name[-1].isalnum()
    assert label != KEYS.workload_label("n" * 60, "d" * 199)


def test_the_onboarding_preference_is_added_once_and_removed_alone() -> None:
    label = KEYS.workload_label("shop", "web")
    other = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    onboarded = with_preference(other, label)
    assert has_preference(onboarded, label)
    assert with_preference(onboarded, label) == onboarded
    term = onboarded["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term == [
        {"weight": 100, "preference": {"matchExpressions": [{"key": label, "operator": "Exists"}]}}
    ]
    assert without_preference(onboarded, label) == other
    assert without_preference(with_preference(None, label), label) is None
