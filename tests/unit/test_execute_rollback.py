"""The executor's check/apply split and its rollback and failure paths, over the in-memory
double of its Kubernetes calls (``testkit/fake_kube.py``); ``tests/cluster/`` runs the
same paths against a real control plane."""

from __future__ import annotations

import json

import pytest

from testkit import builders as b
from testkit.fake_kube import FakeKube
from tuner.execute.actions import check
from tuner.execute.marks import DELETION_COST
from tuner.execute.retry import ActionFailed
from tuner.execute.runner import check_transition, run_transition
from tuner.execute.scaling import undo_scale
from tuner.model.cluster import Pod, Workload
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode

NS = "shop"
WEB = Workload(NS, "Deployment", "web")


class Events:
    """Collects the Events the runner records."""

    def __init__(self) -> None:
        self.recorded: list[object] = []

    def record(self, event: object) -> None:
        self.recorded.append(event)


def cluster() -> FakeKube:
    kube = FakeKube()
    for name in ("node-1", "node-2", "node-3"):
        kube.add_node(name)
    kube.add_deployment(NS, "web", ["node-1", "node-2"])
    return kube


def model_pod(kube: FakeKube, index: int = 0) -> Pod:
    pod = sorted(kube.live_pods(NS, "web"), key=lambda p: p.metadata.name)[index]
    return b.pod(pod.metadata.name, pod.spec.node_name, namespace=NS, workload="web")


def marks_left(kube: FakeKube) -> list[str]:
    """Every tuner label, annotation or taint still on a node or pod."""
    prefix = kube.keys.prefix
    left = []
    for doc in [*kube.nodes.values(), *kube.pod_docs.values()]:
        meta = doc["metadata"]
        keys = [*(meta.get("labels") or {}), *(meta.get("annotations") or {})]
        keys += [t["key"] for t in doc.get("spec", {}).get("taints") or ()]
        left += [f"{meta['name']}: {k}" for k in keys if k.startswith(prefix) or k == DELETION_COST]
        if doc.get("spec", {}).get("unschedulable"):
            left.append(f"{meta['name']}: cordoned")
    return left


def run(kube: FakeKube, actions: list[Action]) -> tuple[bool, str]:
    result = run_transition(kube, actions, Events())  # type: ignore[arg-type]
    return result.completed, result.reason


def test_add_and_remove_apply_and_leave_no_marks() -> None:
    kube = cluster()
    ok, reason = run(kube, [Add(WEB, "node-3", Resources(100, 0))])
    assert ok, reason
    assert kube.replicas("Deployment", NS, "web") == 3
    assert "node-3" in {p.spec.node_name for p in kube.live_pods(NS, "web")}
    victim = model_pod(kube, 0)
    ok, reason = run(kube, [Remove(victim)])
    assert ok, reason
    assert victim.name not in {p.metadata.name for p in kube.live_pods(NS, "web")}
    assert kube.replicas("Deployment", NS, "web") == 2
    assert marks_left(kube) == [] and kube.config_maps == {}


def test_a_failed_add_scales_back_taking_exactly_the_pod_it_created() -> None:
    kube = cluster()
    kube.ready = False  # the new pod never becomes Ready
    before = {p.metadata.name for p in kube.live_pods(NS, "web")}
    ok, reason = run(kube, [Add(WEB, "node-3", Resources(100, 0))])
    assert not ok
    assert "scaled Deployment shop/web back to 2, removing the new pod" in reason
    assert {p.metadata.name for p in kube.live_pods(NS, "web")} == before
    scales = [what for call, what in kube.mutations() if call == "scale"]
    assert scales == ["Deployment shop/web 2->3", "Deployment shop/web 3->2"]
    assert marks_left(kube) == [] and kube.config_maps == {}


def test_a_failed_remove_scales_back_up() -> None:
    kube = cluster()
    kube.newest_goes = True  # the controller ignores the pod-deletion-cost
    chosen = model_pod(kube, 0)  # the oldest: another pod goes instead
    ok, reason = run(kube, [Remove(chosen)])
    assert not ok
    assert "instead" in reason and "scaled Deployment shop/web back to 2" in reason
    assert kube.replicas("Deployment", NS, "web") == 2
    assert len(kube.live_pods(NS, "web")) == 2
    scales = [what for call, what in kube.mutations() if call == "scale"]
    assert scales == ["Deployment shop/web 2->1", "Deployment shop/web 1->2"]
    assert marks_left(kube) == []


def test_a_failed_migrate_always_removes_its_label() -> None:
    kube = cluster()
    kube.ready = False
    ok, reason = run(kube, [Migrate(model_pod(kube, 0), "node-3")])
    assert not ok and "timed out" in reason
    assert any(call == "patch_node" for call, _ in kube.mutations())
    assert marks_left(kube) == []


def test_a_failed_node_removal_undoes_cordon_and_taint() -> None:
    kube = cluster()
    kube.refuse_evictions = True
    ok, reason = run(kube, [RemoveNode("node-1")])
    assert not ok and "refused" in reason
    assert [call for call, _ in kube.mutations() if call == "patch_node"] == ["patch_node"] * 2
    assert "node-1" in kube.nodes and marks_left(kube) == []


def test_a_node_with_a_pod_that_may_not_move_is_refused_before_any_change() -> None:
    kube = cluster()
    kube.add_deployment("other", "db", ["node-2"])
    name = kube.live_pods("other", "db")[0].metadata.name
    kube.pod_docs[("other", name)]["metadata"]["annotations"] = {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"
    }
    with pytest.raises(ActionFailed, match="cannot be emptied"):
        check(kube, RemoveNode("node-2"))
    assert kube.mutations() == []


def test_an_interrupted_add_is_withdrawn_by_recovery() -> None:
    kube = cluster()
    before = frozenset(p.metadata.uid for p in kube.live_pods(NS, "web"))
    kube.scale("Deployment", NS, "web", 2, 3)  # the crash came after the scaling
    record = {
        "kind": "Deployment",
        "namespace": NS,
        "name": "web",
        "selector": "app=web",
        "replicas": 2,
        "to": 3,
        "pods": sorted(before),
    }
    line = undo_scale(kube, json.dumps(record))
    assert "back to 2, removing the new pod" in line
    assert frozenset(p.metadata.uid for p in kube.live_pods(NS, "web")) == before


def test_a_dry_run_only_reads() -> None:
    kube = cluster()
    plan: list[Action] = [
        Migrate(model_pod(kube, 0), "node-3"),
        Add(WEB, "node-3", Resources(100, 0)),
        Remove(model_pod(kube, 1)),
        RemoveNode("node-1"),
    ]
    lines: list[str] = []
    result = check_transition(kube, plan, lines.append)
    assert result.completed, lines
    drain, *steps = lines
    assert drain.startswith("dry run: before action 1: would cordon node(s) node-1 and taint")
    assert len(steps) == 4 and all("): would " in line for line in steps), lines
    assert kube.calls and kube.mutations() == []


def test_a_refused_check_changes_nothing() -> None:
    kube = cluster()
    kube.hpas[(NS, "Deployment", "web")] = "web-hpa"
    ok, reason = run(kube, [Add(WEB, "node-3", Resources(100, 0))])
    assert not ok and "scaled by HPA web-hpa" in reason
    assert [call for call, _ in kube.mutations() if not call.endswith("config_map")] == []
