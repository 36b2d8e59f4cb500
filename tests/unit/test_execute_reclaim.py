"""Recovery of what an earlier run left, and taking back nodes left for an autoscaler, through
the executor's port (:class:`~tuner.execute.port.KubePort`) on its in-memory double
(``testkit/fake_kube.py``). The same paths on a real control plane:
``tests/cluster/test_actions.py`` (``test_a_node_the_autoscaler_did_not_remove_is_taken_back_
after_the_grace``, ``test_a_node_left_for_the_autoscaler_is_taken_back_when_pods_pend_for_it``)
and ``tests/cluster/test_safety.py`` (``test_sigkill_mid_action_then_recover_undoes_the_
leftovers``, ``test_sigkill_after_an_adds_scaling_then_recover_restores_the_replicas``)."""

from __future__ import annotations

import time

from testkit import builders as b
from testkit.fake_kube import FakeKube
from tuner.execute.events import Event
from tuner.execute.journal import Journal
from tuner.execute.marks import DELETION_COST, cheapest_pod, drain_node, hand_over, label_node
from tuner.execute.reclaim import reclaim_unremoved, take_back_needed
from tuner.execute.recover import recover
from tuner.model.conventions import PRICE_ANNOTATION
from tuner.model.movability import DELETING_TAINTS
from tuner.plan.actions import RemoveNode
from tuner.settings import Execute

NOW = 1767225600.0
"""2026-01-01T00:00:00Z."""


class Events:
    """Collects the Events recorded."""

    def __init__(self) -> None:
        self.recorded: list[Event] = []

    def record(self, event: Event) -> None:
        self.recorded.append(event)


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _handed_over(kube: FakeKube, name: str, at: float) -> None:
    """The node as a removal with ``node_removal: autoscaler`` leaves it: drained, then
    handed over at ``at``."""
    kube.patch_node(name, lambda n: drain_node(n, kube.keys, at))
    kube.patch_node(name, lambda n: hand_over(n, kube.keys, _stamp(at)))


def _fake(*names: str) -> FakeKube:
    kube = FakeKube(Execute(eviction_retries=0, autoscaler_grace_s=600))
    for name in names:
        kube.add_node(name)
    return kube


def test_a_node_overdue_is_taken_back_and_the_others_are_left() -> None:
    kube = _fake("old", "young", "deleting")
    _handed_over(kube, "old", NOW - 3600)
    _handed_over(kube, "young", NOW - 60)
    _handed_over(kube, "deleting", NOW - 3600)
    taint = {"key": sorted(DELETING_TAINTS)[0], "effect": "NoSchedule"}
    kube.nodes["deleting"]["spec"]["taints"] = [taint]
    events = Events()

    assert reclaim_unremoved(kube, events, NOW) == ("old",)

    old = kube.nodes["old"]
    assert not old["spec"].get("unschedulable")
    assert not set(old["metadata"].get("annotations") or {}) & {
        kube.keys.left_for_removal,
        kube.keys.changes,
    }
    for left in ("young", "deleting"):  # within the grace; an autoscaler is deleting it
        assert kube.nodes[left]["spec"]["unschedulable"]
        assert kube.keys.left_for_removal in kube.nodes[left]["metadata"]["annotations"]
    ((reason, warning),) = [(e.reason, e.warning) for e in events.recorded]
    assert (reason, warning) == ("NodeNotRemoved", True)
    assert reclaim_unremoved(kube, events, NOW) == ()


def test_a_node_that_cannot_be_read_is_not_taken_back() -> None:
    """Its taints are unknown, so another autoscaler may be deleting it: the tuner's cordon
    stays (an unreadable node fails closed, as every other check of the executor)."""
    kube = _fake("unreadable")
    _handed_over(kube, "unreadable", NOW - 3600)
    kube.nodes["unreadable"]["metadata"]["annotations"][PRICE_ANNOTATION] = "cheap"
    assert reclaim_unremoved(kube, Events(), NOW) == ()
    assert kube.nodes["unreadable"]["spec"]["unschedulable"]


def test_no_grace_takes_nothing_back_and_reads_nothing() -> None:
    kube = FakeKube(Execute(eviction_retries=0, autoscaler_grace_s=0))
    kube.add_node("old")
    _handed_over(kube, "old", NOW - 86400)
    kube.calls.clear()
    assert reclaim_unremoved(kube, Events(), NOW) == ()
    assert kube.calls == []


def test_a_node_pending_pods_need_is_taken_back_at_once() -> None:
    kube = _fake("wanted", "unwanted")
    _handed_over(kube, "wanted", NOW - 60)
    _handed_over(kube, "unwanted", NOW - 60)
    handed = {kube.keys.left_for_removal: _stamp(NOW - 60)}
    cluster = b.cluster(
        [
            b.node("wanted", annotations=handed, unschedulable=True),
            b.node("unwanted", "1", "1Gi", annotations=handed, unschedulable=True),
        ],
        [b.pod("big-1", None, cpu="2")],  # fits only the wanted node
    )
    events = Events()

    assert take_back_needed(kube, events, cluster) == ("wanted",)

    assert not kube.nodes["wanted"]["spec"].get("unschedulable")
    assert kube.nodes["unwanted"]["spec"]["unschedulable"]
    assert [e.reason for e in events.recorded] == ["NodeNeeded"]


def test_recover_undoes_every_mark_the_journal_and_says_each() -> None:
    kube = _fake("node-1", "node-2")
    kube.add_deployment("shop", "web", ["node-1"])
    label = kube.keys.workload_label("shop", "web")
    kube.patch_node("node-2", lambda n: label_node(n, kube.keys, label))
    kube.patch_node("node-1", lambda n: drain_node(n, kube.keys, NOW))
    (pod,) = kube.live_pods("shop", "web")
    kube.patch_pod("shop", pod.metadata.name, lambda p: cheapest_pod(p, kube.keys))
    Journal(kube).begin([RemoveNode("node-1")])

    undone = recover(kube)

    assert any("interrupted at action 1" in u and "node-1" in u for u in undone), undone
    assert sorted(u for u in undone if u.startswith("node ")) == [
        "node node-1: removed the tuner's labels, cordon and taint",
        "node node-2: removed the tuner's labels, cordon and taint",
    ]
    assert f"pod shop/{pod.metadata.name}: restored its pod-deletion-cost" in undone
    for doc in [*kube.nodes.values(), *kube.pod_docs.values()]:
        meta, spec = doc["metadata"], doc["spec"]
        assert not any(k.startswith(kube.keys.prefix) for k in meta.get("labels") or {})
        assert not any(k.startswith(kube.keys.prefix) for k in meta.get("annotations") or {})
        assert DELETION_COST not in (meta.get("annotations") or {})
        assert not spec.get("unschedulable") and not spec.get("taints")
    assert kube.config_maps == {}
    assert recover(kube) == []


def test_recover_restores_an_interrupted_scaling() -> None:
    kube = _fake("node-1", "node-2")
    kube.add_deployment("shop", "web", ["node-1", "node-2"])
    before = [p.metadata.uid for p in kube.live_pods("shop", "web")]
    journal = Journal(kube)
    journal.begin([])
    record = {
        "kind": "Deployment",
        "namespace": "shop",
        "name": "web",
        "selector": "app=web",
        "replicas": 2,
        "to": 3,
        "pods": before,
    }
    journal.scaling(record)
    kube.scale("Deployment", "shop", "web", 2, 3)  # the crash came after the scaling

    undone = recover(kube)

    assert any("back to 2" in line for line in undone), undone
    assert kube.replicas("Deployment", "shop", "web") == 2
    assert sorted(p.metadata.uid for p in kube.live_pods("shop", "web")) == sorted(before)
    assert kube.config_maps == {}
