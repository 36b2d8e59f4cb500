"""Each action on the real control plane: it succeeds, is verified, and leaves nothing behind."""

from __future__ import annotations

import time

from kubernetes import client

from testkit.cluster_fixture import ClusterHarness, eventually
from tests.cluster.conftest import make_actuator, model_pod
from tuner.execute.actuator import KubeActuator
from tuner.execute.affinity import with_preference
from tuner.model.cluster import Workload
from tuner.model.conventions import Keys
from tuner.model.resources import Resources
from tuner.plan.actions import Add, Migrate, Remove, RemoveNode
from tuner.settings import settings_from_dict

KEYS = Keys()


def _three_nodes(kube: ClusterHarness) -> list[str]:
    return [kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2, 3)]


def test_migrate_moves_the_pod_to_the_destination(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    nodes = _three_nodes(kube)
    kube.deployment("web", 1)
    ((name, source),) = kube.placement("app=web").items()
    target = next(n for n in nodes if n != source)

    began = time.monotonic()
    result = actuator.carry_out([Migrate(model_pod(kube, name), target)])

    assert result.completed, result.reason
    assert len(result.done) == 1
    assert 0 < result.took_s <= time.monotonic() - began  # the warm-up counts from the end
    placement = kube.placement("app=web")
    assert name not in placement
    assert list(placement.values()) == [target]
    assert kube.leftovers() == []


def test_add_starts_one_more_pod_on_the_destination(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    nodes = _three_nodes(kube)
    kube.deployment("web", 2)
    before = kube.placement("app=web")
    target = nodes[0]
    workload = Workload(kube.namespace, "Deployment", "web")

    result = actuator.carry_out([Add(workload, target, Resources(500, 256 << 20))])

    assert result.completed, result.reason
    after = kube.placement("app=web")
    new = set(after) - set(before)
    assert len(after) == 3 and len(new) == 1
    assert after[new.pop()] == target
    assert kube.apps.read_namespaced_deployment("web", kube.namespace).spec.replicas == 3
    assert kube.leftovers() == []


def test_remove_takes_exactly_the_chosen_pod(kube: ClusterHarness, actuator: KubeActuator) -> None:
    _three_nodes(kube)
    kube.deployment("web", 3)
    before = kube.placement("app=web")
    chosen = sorted(before)[1]

    result = actuator.carry_out([Remove(model_pod(kube, chosen))])

    assert result.completed, result.reason
    kube.wait_available("web", 2)
    after = kube.placement("app=web")
    assert set(after) == set(before) - {chosen}
    assert kube.apps.read_namespaced_deployment("web", kube.namespace).spec.replicas == 2
    assert kube.leftovers() == []


def test_remove_node_empties_and_deletes_it(kube: ClusterHarness, actuator: KubeActuator) -> None:
    nodes = _three_nodes(kube)
    kube.deployment("web", 3)
    victim = next(iter(kube.placement("app=web").values()))

    result = actuator.carry_out([RemoveNode(victim)])

    assert result.completed, result.reason
    assert victim not in {n.metadata.name for n in kube.core.list_node().items}
    kube.wait_available("web", 3)
    assert victim not in kube.placement("app=web").values()
    assert set(kube.placement("app=web").values()) <= set(nodes) - {victim}
    assert kube.leftovers() == []


FAST = {"disk": "ssd", "tier": "fast"}


def _web_preferring(kube: ClusterHarness, labels: dict[str, str]) -> tuple[str, str]:
    """One onboarded pod of ``web`` whose own terms prefer (weight 100 each) nodes with each of
    ``labels``' keys: its name and node."""
    prefer = [
        {"weight": 100, "preference": {"matchExpressions": [{"key": k, "operator": "Exists"}]}}
        for k in labels
    ]
    own = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": prefer}}
    label = KEYS.workload_label(kube.namespace, "web")
    kube.deployment("web", 1, pod_spec={"affinity": with_preference(own, label)})
    ((name, where),) = kube.placement("app=web").items()
    return name, where


def test_an_onboarded_replacement_the_scheduler_would_send_back_lands_on_the_destination(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    """The pods of ``web`` prefer (their own terms, weight 100 each) two labels the source
    carries: with the destination labelled for the move, kube-scheduler's NodeAffinity score
    still ranks the source first (200 against 100), so only the source's cordon keeps the
    replacement off it."""
    source = kube.add_node(f"{kube.namespace}-n1", labels=FAST)
    target, _ = (kube.add_node(f"{kube.namespace}-n{i}") for i in (2, 3))
    name, where = _web_preferring(kube, FAST)
    assert where == source
    dry: list[str] = []
    KubeActuator(kube.api, settings_from_dict(kube.settings_doc()), echo=dry.append).check(
        [Migrate(model_pod(kube, name), target)]
    )

    result = actuator.carry_out([Migrate(model_pod(kube, name), target)])

    assert f"cordon and taint node {source} for the move" in dry[0]
    assert result.completed, result.reason
    assert list(kube.placement("app=web").values()) == [target]
    assert kube.leftovers() == []


def test_an_onboarded_replacement_the_scheduler_puts_on_a_third_node_is_verified_elsewhere(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    """The pods of ``web`` prefer (their own terms, weight 100 each) two labels a third node
    carries: with the destination labelled for the move (100), kube-scheduler's NodeAffinity
    score ranks the third node first (200), as its spreading and fit scores can in a real
    cluster. The replacement lands there: the migration is verified (Ready off its source, the
    node the transition empties), reported as landed elsewhere, the source is removed, and
    nothing is left behind."""
    source = kube.add_node(f"{kube.namespace}-n1")
    name, where = _web_preferring(kube, FAST)
    assert where == source  # the only node there is
    target = kube.add_node(f"{kube.namespace}-n2")
    third = kube.add_node(f"{kube.namespace}-n3", labels=FAST)
    pod = kube.core.read_namespaced_pod(name, kube.namespace)
    plan = [Migrate(model_pod(kube, name), target), RemoveNode(source)]

    result = actuator.carry_out(plan)

    assert result.completed, result.reason
    assert result.landed_elsewhere == ((plan[0], third),)
    assert list(kube.placement("app=web").values()) == [third]
    assert source not in {n.metadata.name for n in kube.core.list_node().items}
    assert kube.leftovers() == []
    selector = f"involvedObject.name={name},involvedObject.uid={pod.metadata.uid}"
    events = kube.core.list_namespaced_event(kube.namespace, field_selector=selector).items
    (event,) = [e for e in events if e.reporting_component == "tuner.dev/deployment-tuner"]
    assert (event.reason, event.type) == ("Migrated", "Normal")
    assert f"Ready on {third}, not on its destination {target}: landed elsewhere" in event.message
    assert (event.related.kind, event.related.name) == ("Node", third)


def test_a_workload_that_is_not_onboarded_is_still_moved_by_eviction(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    nodes = _three_nodes(kube)
    kube.deployment("plain", 1, onboarded=False)
    ((name, source),) = kube.placement("app=plain").items()
    target = next(n for n in nodes if n != source)
    dry: list[str] = []
    KubeActuator(kube.api, settings_from_dict(kube.settings_doc()), echo=dry.append).check(
        [Migrate(model_pod(kube, name), target)]
    )

    result = actuator.carry_out([Migrate(model_pod(kube, name), target)])

    assert "not onboarded: placement not controlled" in dry[0]
    assert f"Ready on a node other than {source}" in dry[0]
    assert result.completed, result.reason
    kube.wait_available("plain", 1)
    assert name not in kube.placement("app=plain")
    assert kube.leftovers() == []


def test_a_finished_job_pod_neither_blocks_nor_delays_the_removal_of_its_node(
    kube: ClusterHarness,
) -> None:
    """KWOK completes a Job's pod; the monitor's parser leaves a finished pod out, so a plan
    empties its node: the executor removes the node without refusing it, evicting the pod or
    waiting for it to go (tests/unit/test_execute_drain.py holds the same on the fake)."""
    victim, *_ = _three_nodes(kube)
    spec = {
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/hostname": victim},
        "containers": [{"name": "once", "image": "fake"}],
        "terminationGracePeriodSeconds": 0,
    }
    client.BatchV1Api(kube.api).create_namespaced_job(
        kube.namespace,
        {"metadata": {"name": "once"}, "spec": {"template": {"spec": spec}, "backoffLimit": 0}},
    )

    def finished() -> str | None:
        pods = kube.pods("job-name=once")
        done = [p for p in pods if p.status.phase == "Succeeded"]
        return done[0].metadata.name if done else None

    pod = eventually(finished, what="the Job's pod Succeeded")

    result = make_actuator(kube).carry_out([RemoveNode(victim)])

    assert result.completed, result.reason
    assert victim not in {n.metadata.name for n in kube.core.list_node().items}
    evicted = kube.core.list_namespaced_event(
        kube.namespace, field_selector=f"involvedObject.name={pod},reason=Evicted"
    ).items
    assert evicted == []


def test_remove_node_left_for_the_autoscaler_stays_cordoned(kube: ClusterHarness) -> None:
    _three_nodes(kube)
    kube.deployment("web", 2)
    victim = next(iter(kube.placement("app=web").values()))
    actuator = make_actuator(kube, node_removal="autoscaler")

    result = actuator.carry_out([RemoveNode(victim)])

    assert result.completed, result.reason
    node = kube.core.read_node(victim)
    assert node.spec.unschedulable
    assert KEYS.left_for_removal in node.metadata.annotations
    assert KEYS.managed not in node.metadata.labels
    assert not any(t.key == KEYS.taint for t in node.spec.taints or [])
    assert victim not in kube.placement("app=web").values()
    assert actuator.recover() == []  # the autoscaler's node now: not uncordoned
    assert kube.core.read_node(victim).spec.unschedulable


def test_a_node_the_autoscaler_did_not_remove_is_taken_back_after_the_grace(
    kube: ClusterHarness,
) -> None:
    old, young, _ = _three_nodes(kube)
    actuator = make_actuator(kube, node_removal="autoscaler", autoscaler_grace_s=600)
    result = actuator.carry_out([RemoveNode(old), RemoveNode(young)])
    assert result.completed, result.reason
    an_hour_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    kube.core.patch_node(old, {"metadata": {"annotations": {KEYS.left_for_removal: an_hour_ago}}})

    taken = actuator.reclaim_unremoved(time.time())

    assert taken == (old,)
    assert [f for f in kube.leftovers() if f.startswith(f"{old} ")] == []
    events = kube.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={old},reason=NodeNotRemoved"
    ).items
    assert [(e.type, e.involved_object.kind) for e in events] == [("Warning", "Node")]
    left = kube.core.read_node(young)
    assert left.spec.unschedulable
    assert KEYS.left_for_removal in left.metadata.annotations
    assert actuator.reclaim_unremoved(time.time()) == ()


def test_a_node_left_for_the_autoscaler_is_taken_back_when_pods_pend_for_it(
    kube: ClusterHarness,
) -> None:
    wanted, unwanted, _ = _three_nodes(kube)
    actuator = make_actuator(kube, node_removal="autoscaler")
    assert actuator.carry_out([RemoveNode(wanted), RemoveNode(unwanted)]).completed
    assert actuator.take_back_needed(time.time()) == ()  # nothing pending
    container = {"name": "app", "image": "fake", "resources": {"requests": {"cpu": "500m"}}}
    kube.core.create_namespaced_pod(
        kube.namespace,
        {
            "metadata": {"name": "needs-it", "labels": {"app": "needs-it"}},
            "spec": {
                "containers": [container],
                "nodeSelector": {"kubernetes.io/hostname": wanted},
                "terminationGracePeriodSeconds": 0,
            },
        },
    )

    taken = actuator.take_back_needed(time.time())

    assert taken == (wanted,)
    node = kube.core.read_node(wanted)
    assert not node.spec.unschedulable
    assert KEYS.left_for_removal not in (node.metadata.annotations or {})
    assert [f for f in kube.leftovers() if f.startswith(f"{wanted} ")] == []
    events = kube.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={wanted},reason=NodeNeeded"
    ).items
    assert [(e.type, e.involved_object.kind) for e in events] == [("Normal", "Node")]
    eventually(lambda: kube.placement("app=needs-it").get("needs-it"), what="the pod bound")
    assert kube.core.read_node(unwanted).spec.unschedulable  # no pod needs it: still left
    assert actuator.take_back_needed(time.time()) == ()


def test_remove_node_by_a_provider_command(kube: ClusterHarness) -> None:
    _three_nodes(kube)
    kube.deployment("web", 2)
    victim = next(iter(kube.placement("app=web").values()))
    command = [kube.env["TUNER_KUBECTL"], "--kubeconfig", kube.kubeconfig, "delete", "node"]
    actuator = make_actuator(kube, node_removal="command", node_removal_command=command)

    result = actuator.carry_out([RemoveNode(victim)])

    assert result.completed, result.reason
    assert victim not in {n.metadata.name for n in kube.core.list_node().items}
    (event,) = kube.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={victim},reason=NodeRemoved"
    ).items
    assert event.message.endswith(f"node {victim} removed by the provider command (kubectl)")


def test_a_failing_provider_command_undoes_the_cordon(kube: ClusterHarness) -> None:
    _three_nodes(kube)
    kube.deployment("web", 1)
    victim = next(iter(kube.placement("app=web").values()))
    actuator = make_actuator(kube, node_removal="command", node_removal_command=["false"])

    result = actuator.carry_out([RemoveNode(victim)])

    assert not result.completed
    assert "exited 1" in result.reason
    assert not kube.core.read_node(victim).spec.unschedulable
    assert kube.leftovers() == []
