"""The provision_node action and the binding of its provisional name, over the in-memory double
of the executor's Kubernetes calls (``testkit/fake_kube.py``); ``tests/cluster/
test_provision.py`` runs the same paths against a real control plane."""

from __future__ import annotations

from types import MappingProxyType

from testkit.fake_kube import FakeKube
from tests.unit.test_execute_rollback import NS, Events, cluster, marks_left, model_pod
from tuner.execute.events import Event
from tuner.execute.provision import placeholder_pod, remove_placeholders
from tuner.execute.runner import check_transition, run_transition
from tuner.model.cluster import Node
from tuner.model.constraints import Taint
from tuner.model.pools import NodePool
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Migrate, ProvisionNode, RemoveNode
from tuner.settings import Execute

POOL_LABEL = "cloud.google.com/gke-nodepool"
TEMPLATE = Node(
    "",
    Resources(8000, 32 << 30),
    Resources(7910, 29 << 30),
    labels=MappingProxyType({POOL_LABEL: "general-8"}),
    taints=(Taint("dedicated", "general", "NoSchedule"),),
)
POOL = NodePool(
    "general-8", "e2-standard-8", TEMPLATE, selector=MappingProxyType({POOL_LABEL: "general-8"})
)
PROVISION = ProvisionNode("general-8+1", POOL, Resources(1000, 1 << 30))


def provisioned(**execute: object) -> FakeKube:
    kube = cluster()
    kube.settings = Execute(eviction_retries=0, **execute)  # type: ignore[arg-type]
    kube.priority_classes.add(kube.settings.placeholder_priority_class)
    return kube


def run(kube: FakeKube, actions: list[Action]) -> tuple[bool, str, list[Event]]:
    events = Events()
    result = run_transition(kube, actions, events)  # type: ignore[arg-type]
    return result.completed, result.reason, events.recorded  # type: ignore[return-value]


def placeholders(kube: FakeKube) -> list[str]:
    return [
        n for (_, n), d in kube.pod_docs.items() if kube.keys.placeholder in d["metadata"]["labels"]
    ]


def test_a_replace_grows_the_pool_migrates_onto_the_new_node_and_hands_the_old_one_over() -> None:
    kube = provisioned(node_removal="delete-node")
    kube.grows = "gke-general-8-abcd"
    pod = model_pod(kube)
    plan: list[Action] = [PROVISION, Migrate(pod, "general-8+1"), RemoveNode(pod.node or "")]

    ok, reason, events = run(kube, plan)

    assert ok, reason
    assert [p.spec.node_name for p in kube.live_pods(NS, "web")].count("gke-general-8-abcd") == 1
    assert pod.node not in kube.nodes
    assert placeholders(kube) == []
    assert marks_left(kube) == []
    assert kube.config_maps == {}
    assert [e.reason for e in events] == ["NodeProvisioned", "Cordoned", "Migrated", "NodeRemoved"]
    provision, cordoned, migrate, _ = events
    assert cordoned.regarding.name == pod.node  # after the provision, before the first move
    assert (provision.reason, provision.regarding.kind) == ("NodeProvisioned", "Node")
    assert provision.regarding.name == "gke-general-8-abcd"
    assert migrate.related is not None and migrate.related.name == "gke-general-8-abcd"


def test_the_placeholder_asks_for_a_new_node_of_the_pool_at_the_lowest_priority() -> None:
    kube = provisioned()
    kube.grows = "gke-general-8-abcd"

    ok, reason, _ = run(kube, [PROVISION])

    assert ok, reason
    created = [what for call, what in kube.calls if call == "create_pod"]
    assert len(created) == 1
    assert created[0].startswith("tuner-system/tuner-dev-placeholder-general-8-1-")
    body = placeholder_pod(kube.keys, kube.settings, "p", PROVISION, ("node-1", "node-2"))
    spec = body["spec"]
    assert spec["priorityClassName"] == "deployment-tuner-placeholder"
    assert spec["preemptionPolicy"] == "Never"
    assert spec["nodeSelector"] == {POOL_LABEL: "general-8"}
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "general", "effect": "NoSchedule"}
    ]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchFields"] == [
        {"key": "metadata.name", "operator": "NotIn", "values": ("node-1", "node-2")}
    ]
    assert spec["containers"][0]["resources"]["requests"] == {
        "cpu": "1000m",
        "memory": str(1 << 30),
    }
    assert body["metadata"]["labels"] == {kube.keys.placeholder: "p"}


def test_the_placeholders_requests_are_capped_to_what_the_new_node_holds() -> None:
    huge = ProvisionNode("general-8+1", POOL, Resources(64000, 1 << 40))
    body = placeholder_pod(FakeKube().keys, Execute(), "p", huge, ())
    requests = body["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "7910m", "memory": str(29 << 30)}


def test_no_new_node_in_time_deletes_the_placeholder_and_stops_the_transition() -> None:
    kube = provisioned()  # nothing grows the pool: the placeholder stays Pending
    pod = model_pod(kube)

    ok, reason, events = run(kube, [PROVISION, Migrate(pod, "general-8+1")])

    assert not ok
    assert "action 1/2" in reason and "timed out" in reason and "deleted" in reason
    assert placeholders(kube) == []
    assert [p.spec.node_name for p in kube.live_pods(NS, "web")] == ["node-1", "node-2"]
    assert not any(call == "evict" for call, _ in kube.calls)
    (failed,) = events
    assert (failed.reason, failed.regarding.kind) == ("NodeProvisionFailed", "Pod")
    assert failed.regarding.name.startswith("tuner-dev-placeholder-")


def test_without_the_priority_class_nothing_is_created() -> None:
    kube = provisioned()
    kube.priority_classes.clear()

    ok, reason, _ = run(kube, [PROVISION])

    assert not ok and "PriorityClass deployment-tuner-placeholder not found" in reason
    assert not any(call == "create_pod" for call, _ in kube.calls)


def test_a_pool_without_a_selector_or_at_its_maximum_is_refused() -> None:
    kube = provisioned()
    bare = NodePool("general-8", "e2-standard-8", TEMPLATE)
    full = NodePool("general-8", "e2-standard-8", TEMPLATE, max_size=1, selector=POOL.selector)
    kube.add_node("gke-general-8-old", {POOL_LABEL: "general-8"})

    for pool, why in ((bare, "no node selector"), (full, "at its maximum size (1 nodes)")):
        ok, reason, _ = run(kube, [ProvisionNode("general-8+1", pool, Resources(1, 1))])
        assert not ok and why in reason
    assert kube.mutations() == [m for m in kube.mutations() if "config_map" in m[0]]


def test_a_dry_run_creates_nothing_and_describes_the_later_actions_on_the_provisional_node() -> (
    None
):
    kube = provisioned()
    pod = model_pod(kube)
    lines: list[str] = []

    result = check_transition(kube, [PROVISION, Migrate(pod, "general-8+1")], lines.append)

    assert result.completed, result.reason
    assert "would create a placeholder pod" in lines[0]
    assert (
        "would run on the node provisioned as general-8+1: would label node general-8+1"
        in (lines[1])
    )
    assert kube.mutations() == []


def test_a_migration_onto_a_node_never_provisioned_fails() -> None:
    kube = provisioned()
    ok, reason, _ = run(kube, [Migrate(model_pod(kube), "general-8+1")])
    assert not ok and "node general-8+1 was not provisioned in this transition" in reason
    assert not any(call == "evict" for call, _ in kube.calls)


def test_a_failing_provision_command_fails_the_action() -> None:
    kube = provisioned(node_provision="command", node_provision_command=("false",))
    ok, reason, _ = run(kube, [PROVISION])
    assert not ok and "node provision command exited 1" in reason


def test_recovery_deletes_a_placeholder_left_behind() -> None:
    kube = provisioned()
    body = placeholder_pod(kube.keys, kube.settings, "left", PROVISION, ())
    kube.create_pod("default", body)

    lines = remove_placeholders(kube)

    assert lines == ["placeholder pod default/left deleted (it asked for a node for general-8+1)"]
    assert placeholders(kube) == []
    assert remove_placeholders(kube) == []
