"""Draining like the autoscalers and verifying what really happened, over the in-memory double of
the executor's Kubernetes calls (``testkit/fake_kube.py``); ``tests/cluster/test_drain.py`` runs
the same paths against a real control plane."""

from __future__ import annotations

from collections import Counter

import pytest

from testkit import builders as b
from testkit.fake_kube import FakeKube
from tests.unit.test_execute_rollback import Events, marks_left
from tuner.execute.events import Event, Ref
from tuner.execute.runner import check_transition, run_transition
from tuner.model.cluster import Pod, Workload
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Add, Migrate, RemoveNode

NS = "shop"
SOURCE, TARGET, OTHER = "node-1", "node-2", "node-3"


def shop(*, onboarded: bool = False, tolerates_all: bool = False, removal: str = "") -> FakeKube:
    """Three nodes; ``web`` has two pods on node-1 (the node the plans empty), ``api`` one."""
    kube = FakeKube()
    if removal:
        kube.settings = type(kube.settings)(eviction_retries=0, node_removal=removal)
    for name in (SOURCE, TARGET, OTHER):
        kube.add_node(name)
    kube.add_deployment(
        NS, "web", [SOURCE, SOURCE], onboarded=onboarded, tolerates_all=tolerates_all
    )
    kube.add_deployment(NS, "api", [SOURCE], onboarded=onboarded)
    kube.default_node = SOURCE  # the scheduler's favourite: the node being emptied
    return kube


def pods_on(kube: FakeKube, node: str) -> list[Pod]:
    """The pods on a node, by name: ``api`` first, then the two of ``web``."""
    return [
        b.pod(d["metadata"]["name"], node, namespace=NS, workload=d["metadata"]["labels"]["app"])
        for d in sorted(kube.pod_docs.values(), key=lambda d: d["metadata"]["name"])
        if d["spec"].get("nodeName") == node
    ]


def empty_source(kube: FakeKube) -> list[Action]:
    """Migrate every pod off node-1, then remove it (the trial's plan)."""
    return [*(Migrate(p, TARGET) for p in pods_on(kube, SOURCE)), RemoveNode(SOURCE)]


def run(kube: FakeKube, actions: list[Action]) -> tuple[object, list[Event]]:
    events = Events()
    result = run_transition(kube, actions, events)  # type: ignore[arg-type]
    return result, events.recorded  # type: ignore[return-value]


def test_the_emptied_node_is_cordoned_and_tainted_before_the_first_eviction() -> None:
    kube = shop(onboarded=True)
    result, events = run(kube, empty_source(kube))

    assert result.completed, result.reason  # type: ignore[attr-defined]
    writes = kube.mutations()
    first_eviction = next(i for i, (call, _) in enumerate(writes) if call == "evict")
    assert ("patch_node", SOURCE) in writes[:first_eviction]
    cordoned = next(e for e in events if e.reason == "Cordoned")
    assert cordoned.regarding.name == SOURCE and "tuner.dev/draining=" in cordoned.note
    assert events.index(cordoned) == 0
    left = kube.nodes[SOURCE]  # handed over to the autoscaler: cordoned, untainted, stamped
    assert left["spec"]["unschedulable"] and not left["spec"].get("taints")
    assert kube.keys.left_for_removal in left["metadata"]["annotations"]


def test_a_replacement_that_tolerates_the_drain_and_returns_to_its_source_fails_the_migration() -> (
    None
):
    """The trial's bounce: the workload is not onboarded, the scheduler's favourite is the
    emptied node, and its pods tolerate every taint (the cordon's included)."""
    kube = shop(tolerates_all=True)
    api, web, _ = pods_on(kube, SOURCE)
    plan = empty_source(kube)

    result, events = run(kube, plan)

    assert not result.completed  # type: ignore[attr-defined]
    reason = result.reason  # type: ignore[attr-defined]
    assert "action 2/4" in reason and f"was scheduled on {SOURCE}, its source" in reason
    assert result.done == result.eviction_only == (plan[0],)  # type: ignore[attr-defined]
    reasons = ["Cordoned", "Migrated", "MigrationFailed", "Uncordoned"]
    assert [e.reason for e in events] == reasons
    assert marks_left(kube) == []
    evicted = [what for call, what in kube.mutations() if call == "evict"]
    assert evicted == [f"{NS}/{api.name}", f"{NS}/{web.name}"]  # no remove_node ran


def test_a_workload_that_is_not_onboarded_is_verified_off_its_source_and_counted() -> None:
    kube = shop()
    plan = empty_source(kube)

    result, events = run(kube, plan)

    assert result.completed, result.reason  # type: ignore[attr-defined]
    assert result.eviction_only == tuple(plan[:3])  # type: ignore[attr-defined]
    migrated = [e for e in events if e.reason == "Migrated"]
    # The scheduler's next choice after the cordoned source: node-2, named as where it landed.
    assert [e.related.name for e in migrated if e.related] == [TARGET] * 3
    assert all("is not onboarded: placement not controlled" in e.note for e in migrated)
    assert all(f"Ready on {TARGET}" in e.note for e in migrated)
    evicted = Counter(what for call, what in kube.mutations() if call == "evict")
    assert set(evicted.values()) == {1}  # no pod evicted twice
    assert len(evicted) == 3  # the remove_node found nothing left to evict


def test_migrated_names_the_node_the_pod_really_landed_on() -> None:
    kube = shop()
    kube.default_node = OTHER  # the scheduler prefers node-3 to the plan's node-2
    result, events = run(kube, empty_source(kube))

    assert result.completed, result.reason  # type: ignore[attr-defined]
    migrated = [e for e in events if e.reason == "Migrated"]
    assert {e.related.name for e in migrated if e.related} == {OTHER}
    assert all(f"Ready on {OTHER}" in e.note for e in migrated)


def test_an_onboarded_replacement_the_scheduler_puts_on_a_third_node_is_verified_elsewhere() -> (
    None
):
    """The destination's label is only a preferred affinity: the scheduler's other scores put
    every replacement on node-3. Each migration is verified (off its source, off the node being
    emptied), reported as landed elsewhere, and the source empties."""
    kube = shop(onboarded=True)
    kube.preference_outscored = True
    kube.default_node = OTHER
    plan = empty_source(kube)

    result, events = run(kube, plan)

    assert result.completed, result.reason  # type: ignore[attr-defined]
    assert result.landed_elsewhere == tuple((a, OTHER) for a in plan[:3])  # type: ignore[attr-defined]
    assert result.eviction_only == ()  # type: ignore[attr-defined]
    migrated = [e for e in events if e.reason == "Migrated"]
    assert [e.related.name for e in migrated if e.related] == [OTHER] * 3
    for event in migrated:
        assert f"is Ready on {OTHER}, not on its destination {TARGET}: landed elsewhere" in (
            event.note
        )
        assert not event.warning
    assert pods_on(kube, SOURCE) == [] and len(pods_on(kube, OTHER)) == 3
    assert not any(kube.keys.prefix in k for k in kube.nodes[TARGET]["metadata"]["labels"])
    assert not kube.nodes[OTHER]["spec"].get("unschedulable")


def test_an_onboarded_replacement_on_its_destination_is_not_counted_elsewhere() -> None:
    kube = shop(onboarded=True)
    kube.default_node = OTHER  # outscored by the label: it steers the pods to node-2

    result, events = run(kube, empty_source(kube))

    assert result.completed, result.reason  # type: ignore[attr-defined]
    assert result.landed_elsewhere == ()  # type: ignore[attr-defined]
    migrated = [e for e in events if e.reason == "Migrated"]
    assert all(e.note.endswith(f"is Ready on {TARGET}") for e in migrated), migrated


def test_an_onboarded_replacement_back_on_a_node_being_emptied_still_fails() -> None:
    """Outscored, and tolerating every taint: the replacement of ``web`` goes back to the node
    the transition empties; the migration fails at once and the drain is given back."""
    kube = shop(onboarded=True, tolerates_all=True)
    kube.preference_outscored = True
    plan = empty_source(kube)

    result, events = run(kube, plan)

    assert not result.completed  # type: ignore[attr-defined]
    assert f"was scheduled on {SOURCE}, its source" in result.reason  # type: ignore[attr-defined]
    assert result.done == (plan[0],) and result.landed_elsewhere == ()  # type: ignore[attr-defined]
    reasons = ["Cordoned", "Migrated", "MigrationFailed", "Uncordoned"]
    assert [e.reason for e in events] == reasons
    assert marks_left(kube) == []


@pytest.mark.parametrize("room_on_target", [None, 1])
def test_a_move_whose_destination_an_earlier_landing_filled_lands_elsewhere_or_fails_whole(
    room_on_target: int | None,
) -> None:
    """``api``'s replacement, aimed at node-2, lands on node-3 and takes its last place; the
    pods of ``web`` are aimed at node-3. With room on node-2 they land there (allowed, landed
    elsewhere). With room for one only, the last one finds no node: its verification times
    out, the transition stops and gives back the node it was emptying, nothing else is left."""
    kube = shop(onboarded=True)
    kube.preference_outscored = True
    kube.default_node = OTHER
    kube.room[OTHER] = 1
    if room_on_target is not None:
        kube.room[TARGET] = room_on_target
    api, *webs = pods_on(kube, SOURCE)
    plan: list[Action] = [Migrate(api, TARGET), *(Migrate(p, OTHER) for p in webs)]
    plan.append(RemoveNode(SOURCE))

    result, events = run(kube, plan)

    elsewhere = result.landed_elsewhere  # type: ignore[attr-defined]
    if room_on_target is None:
        assert result.completed, result.reason  # type: ignore[attr-defined]
        assert elsewhere == ((plan[0], OTHER), (plan[1], TARGET), (plan[2], TARGET))
        assert pods_on(kube, SOURCE) == []
        return
    assert not result.completed  # type: ignore[attr-defined]
    assert result.reason.startswith("action 3/4")  # type: ignore[attr-defined]
    assert "timed out" in result.reason  # type: ignore[attr-defined]
    assert result.done == tuple(plan[:2])  # type: ignore[attr-defined]
    assert elsewhere == ((plan[0], OTHER), (plan[1], TARGET))
    assert [e.reason for e in events][-2:] == ["MigrationFailed", "Uncordoned"]
    assert marks_left(kube) == []
    assert SOURCE in kube.nodes


def test_an_onboarded_add_the_scheduler_puts_on_another_node_is_kept() -> None:
    """An add's claim is the migration's: one more Ready pod, off the nodes being emptied; a
    pod outscored off its destination is verified elsewhere, not scaled back."""
    kube = shop(onboarded=True)
    kube.preference_outscored = True
    kube.default_node = OTHER
    add = Add(Workload(NS, "Deployment", "web"), TARGET, Resources(100, 0))

    result, events = run(kube, [add])

    assert result.completed, result.reason  # type: ignore[attr-defined]
    assert result.landed_elsewhere == ((add, OTHER),)  # type: ignore[attr-defined]
    (added,) = events
    assert added.reason == "Added" and added.related == Ref.node(OTHER)
    assert f"not on its destination {TARGET}" in added.note
    assert kube.replicas("Deployment", NS, "web") == 3
    assert [what for call, what in kube.mutations() if call == "scale"] == [
        "Deployment shop/web 2->3"
    ]
    assert marks_left(kube) == []


def test_a_single_move_of_a_workload_not_onboarded_cordons_its_source_for_the_move() -> None:
    """No node is emptied, so no drain: the migration itself keeps the replacement off its
    source, and gives the source back."""
    kube = shop()
    (pod, *_) = pods_on(kube, SOURCE)

    result, events = run(kube, [Migrate(pod, TARGET)])

    assert result.completed, result.reason  # type: ignore[attr-defined]
    writes = [what for call, what in kube.mutations() if call in ("patch_node", "evict")]
    assert writes == [SOURCE, f"{NS}/{pod.name}", SOURCE]  # cordon, evict, uncordon
    assert [e.reason for e in events] == ["Migrated"]
    assert marks_left(kube) == []


def test_an_onboarded_move_cordons_its_source_so_an_outscored_preference_cannot_send_it_back() -> (
    None
):
    """The destination's label is only a preferred affinity: here the scheduler's other scores
    outweigh it and favour the source. The source, cordoned and tainted for the move, is not
    open to the replacement, which the label then steers to the destination."""
    kube = shop(onboarded=True)
    kube.preference_outscored = True
    (pod, *_) = pods_on(kube, SOURCE)

    result, events = run(kube, [Migrate(pod, TARGET)])

    assert result.completed, result.reason  # type: ignore[attr-defined]
    writes = [what for call, what in kube.mutations() if call in ("patch_node", "evict")]
    # label the destination, cordon the source, evict, unlabel, uncordon
    assert writes == [TARGET, SOURCE, f"{NS}/{pod.name}", TARGET, SOURCE]
    (migrated,) = events
    assert migrated.reason == "Migrated" and f"Ready on {TARGET}" in migrated.note
    assert marks_left(kube) == []
    assert not kube.nodes[SOURCE]["spec"].get("unschedulable")


def test_an_onboarded_move_off_a_node_the_transition_empties_cordons_nothing_more() -> None:
    """The drain has cordoned the source already: the migration only labels its destination."""
    kube = shop(onboarded=True)
    kube.preference_outscored = True

    result, _ = run(kube, empty_source(kube))

    assert result.completed, result.reason  # type: ignore[attr-defined]
    patched = [what for call, what in kube.mutations() if call == "patch_node"]
    assert patched.count(SOURCE) == 2  # the drain's cordon, the hand-over to the autoscaler


def test_a_failed_transition_uncordons_every_node_it_marked() -> None:
    kube = shop()
    kube.add_node("node-4")
    kube.add_deployment(NS, "db", ["node-4"])
    plan: list[Action] = [
        *(Migrate(p, TARGET) for p in pods_on(kube, SOURCE)),
        *(Migrate(p, TARGET) for p in pods_on(kube, "node-4")),
        RemoveNode(SOURCE),
        RemoveNode("node-4"),
    ]
    kube.ready = False  # no replacement becomes Ready

    result, events = run(kube, plan)

    assert not result.completed  # type: ignore[attr-defined]
    reasons = Counter(e.reason for e in events)  # the first wave's two moves (api, web) failed
    assert reasons == {"Cordoned": 2, "MigrationFailed": 2, "Uncordoned": 2}
    assert marks_left(kube) == []


def test_a_pod_its_hpa_scaled_in_since_the_plan_is_nothing_to_move_and_the_node_still_goes() -> (
    None
):
    kube = shop()
    plan = empty_source(kube)
    gone = pods_on(kube, SOURCE)[1]  # a web pod: the HPA scales web in while the plan waits
    kube.deployments[(NS, "web")]["spec"]["replicas"] = 1
    del kube.pod_docs[(NS, gone.name)]

    result, events = run(kube, plan)

    assert result.completed, result.reason  # type: ignore[attr-defined]
    assert ("evict", f"{NS}/{gone.name}") not in kube.mutations()
    assert any(f"pod {NS}/{gone.name} is already gone" in e.note for e in events)
    assert result.done == tuple(plan)  # type: ignore[attr-defined]
    assert kube.keys.left_for_removal in kube.nodes[SOURCE]["metadata"]["annotations"]
    assert {p.spec.node_name for p in kube.live_pods(NS, "web")} == {TARGET}


def test_a_node_another_autoscaler_is_removing_fails_the_transition_before_any_move() -> None:
    kube = shop()
    taint = {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}
    kube.nodes[SOURCE]["spec"]["taints"] = [taint]

    result, events = run(kube, empty_source(kube))

    assert not result.completed  # type: ignore[attr-defined]
    assert result.reason.startswith("before action 1/4")  # type: ignore[attr-defined]
    assert "ToBeDeletedByClusterAutoscaler by another autoscaler" in result.reason  # type: ignore[attr-defined]
    assert [(e.reason, e.warning) for e in events] == [("CordonFailed", True)]
    assert [c for c, _ in kube.mutations() if not c.endswith("config_map")] == []


def test_each_pod_a_drain_evicts_has_an_event_and_the_node_left_is_not_called_removed() -> None:
    kube = shop(removal="autoscaler")
    there = {p.name for p in pods_on(kube, SOURCE)}

    result, events = run(kube, [RemoveNode(SOURCE)])

    assert result.completed, result.reason  # type: ignore[attr-defined]
    evicted = [e for e in events if e.reason == "Evicted"]
    assert {e.regarding.name for e in evicted} == there
    assert all(e.regarding.uid and e.related == Ref.node(SOURCE) for e in evicted)
    assert events[-1].reason == "LeftForAutoscaler"
    assert "left cordoned for the cluster autoscaler" in events[-1].note


def test_a_finished_pod_neither_blocks_nor_delays_the_removal_of_its_node() -> None:
    """A Job's finished pod holds nothing (the monitor's parser leaves it out, so the plan
    empties the node): the executor neither refuses the node for it, nor evicts it, nor waits
    for it to go."""
    kube = shop(removal="delete-node")
    kube.pod_docs[(NS, "nightly-x")] = {
        "metadata": {
            "name": "nightly-x",
            "namespace": NS,
            "uid": "uid-nightly-x",
            "labels": {"app": "nightly"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "nightly",
                    "uid": "job-nightly",
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": SOURCE, "containers": [{"name": "job", "image": "job"}]},
        "status": {"phase": "Succeeded"},
    }

    result, events = run(kube, [RemoveNode(SOURCE)])

    assert result.completed, result.reason  # type: ignore[attr-defined]
    assert ("evict", f"{NS}/nightly-x") not in kube.calls
    assert "nightly-x" not in {e.regarding.name for e in events if e.reason == "Evicted"}
    assert SOURCE not in kube.nodes


def test_a_deleted_node_is_removed() -> None:
    kube = shop(removal="delete-node")

    result, events = run(kube, [RemoveNode(SOURCE)])

    assert result.completed, result.reason  # type: ignore[attr-defined]
    assert events[-1].reason == "NodeRemoved" and SOURCE not in kube.nodes


def test_the_dry_run_of_an_onboarded_move_says_it_labels_and_cordons() -> None:
    kube = shop(onboarded=True)
    (pod, *_) = pods_on(kube, SOURCE)
    lines: list[str] = []

    result = check_transition(kube, [Migrate(pod, TARGET)], lines.append)

    assert result.completed, lines
    (line,) = lines
    label = kube.keys.workload_label(NS, "api")
    assert (
        f"would label node {TARGET} {label}, cordon and taint node {SOURCE} for the move, "
        f"evict pod {NS}/{pod.name}, wait for its replacement to be Ready on a node other than "
        f"{SOURCE} (aimed at {TARGET}), unlabel, undo the cordon"
    ) in line
    assert kube.mutations() == []


def test_the_dry_run_prints_the_drain_and_the_uncontrolled_placement_and_changes_nothing() -> None:
    kube = shop()
    lines: list[str] = []

    result = check_transition(kube, empty_source(kube), lines.append)

    assert result.completed, lines
    drain, wave, first, *_ = lines
    assert drain.startswith(f"dry run: before action 1: would cordon node(s) {SOURCE}")
    assert wave.startswith("dry run: actions 1-2 would move at once (a wave")  # api and web
    assert "would evict pod" in first and f"Ready on a node other than {SOURCE}" in first
    assert "placement not controlled" in first
    assert kube.mutations() == []
