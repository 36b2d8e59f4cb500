"""A replace on the real control plane: a node obtained from a pool (a provider command that
creates a KWOK node; a placeholder pod for the Cluster Autoscaler), pods migrated onto it, the
old node handed over; the timeout and crash paths leave no placeholder behind."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testkit.cluster_fixture import REPO_ROOT, ClusterHarness, eventually, kwok_node
from tests.cluster.conftest import make_actuator, model_pod
from tests.cluster.test_safety import _kill_child_when, _transition_child
from tests.cluster.transition_child import pool
from tuner.model.conventions import Keys
from tuner.model.pools import POOL_LABELS
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Migrate, ProvisionNode, RemoveNode

KEYS = Keys()
POOL_LABEL = POOL_LABELS[0]
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def _placeholders(kube: ClusterHarness) -> list[str]:
    pods = kube.core.list_pod_for_all_namespaces(label_selector=KEYS.placeholder).items
    return [p.metadata.name for p in pods]


def _priority_class(kube: ClusterHarness) -> None:
    """The PriorityClass of deploy/ (cluster-scoped: created once per control plane)."""
    body = yaml.safe_load((REPO_ROOT / "deploy" / "priorityclass.yaml").read_text())
    with contextlib.suppress(ApiException):
        client.SchedulingV1Api(kube.api).create_priority_class(body)


def _provision_script(kube: ClusterHarness, tmp_path: Path, name: str) -> list[str]:
    """A provider command creating KWOK node ``name`` of the pool and type it is asked for."""
    node = kwok_node(name, "4", "8Gi", labels={POOL_LABEL: "$TUNER_POOL"})
    node["metadata"]["labels"][INSTANCE_TYPE] = "$TUNER_NODE_TYPE"
    node["metadata"]["annotations"]["provisional"] = "$TUNER_NODE"
    script = tmp_path / "provision.sh"
    script.write_text(
        "#!/bin/sh\nset -e\n"
        f'"{kube.env["TUNER_KUBECTL"]}" --kubeconfig "{kube.kubeconfig}" create -f - <<EOF\n'
        f"{json.dumps({'apiVersion': 'v1', 'kind': 'Node', **node})}\nEOF\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    kube.nodes.append(name)  # deleted after the test
    return [str(script)]


def test_a_replace_by_provider_command_moves_the_pods_to_the_new_node(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    old = kube.add_node(f"{kube.namespace}-old", labels={POOL_LABEL: "small"})
    kube.deployment("web", 2)
    new = f"{kube.namespace}-big"
    command = _provision_script(kube, tmp_path, new)
    actuator = make_actuator(kube, node_provision="command", node_provision_command=command)
    big = pool("big")
    pods = [model_pod(kube, name) for name in sorted(kube.placement("app=web"))]
    plan: list[Action] = [
        ProvisionNode("big+1", big, Resources(1000, 512 << 20)),
        *(Migrate(pod, "big+1") for pod in pods),
        RemoveNode(old),
    ]

    result = actuator.carry_out(plan)

    assert result.completed, result.reason
    node = kube.core.read_node(new)
    assert node.metadata.labels[POOL_LABEL] == "big"
    assert node.metadata.labels[INSTANCE_TYPE] == "kwok-4"
    assert node.metadata.annotations["provisional"] == "big+1"
    kube.wait_available("web", 2)
    assert set(kube.placement("app=web").values()) == {new}
    assert old not in {n.metadata.name for n in kube.core.list_node().items}
    assert kube.leftovers() == []
    events = kube.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={new},reason=NodeProvisioned"
    ).items
    assert [e.involved_object.kind for e in events] == ["Node"]


def test_a_replace_through_a_placeholder_pod_the_autoscaler_answers(
    kube: ClusterHarness,
) -> None:
    """No Cluster Autoscaler runs on this control plane: a thread stands in for it, adding a
    KWOK node of the pool once a placeholder is Pending. The placeholder itself (PriorityClass
    admission, nodeSelector, the affinity that keeps it off the old node) is the real API's
    and kube-scheduler's."""
    _priority_class(kube)
    old = kube.add_node(f"{kube.namespace}-old", labels={POOL_LABEL: "small"})
    kube.deployment("web", 2)
    new = f"{kube.namespace}-big"
    pods = [model_pod(kube, name) for name in sorted(kube.placement("app=web"))]
    seen: list[Any] = []

    def autoscaler() -> None:
        seen.extend(eventually(lambda: _pending_placeholders(kube), what="a placeholder"))
        kube.add_node(new, labels={POOL_LABEL: "big"})

    thread = threading.Thread(target=autoscaler, daemon=True)
    thread.start()
    actuator = make_actuator(kube, node_provision="autoscaler", provision_timeout_s=120)

    result = actuator.carry_out(
        [
            ProvisionNode("big+1", pool("big"), Resources(1000, 512 << 20)),
            *(Migrate(pod, "big+1") for pod in pods),
            RemoveNode(old),
        ]
    )

    thread.join(timeout=60)
    assert result.completed, result.reason
    (placeholder,) = seen
    assert placeholder.spec.priority == -10
    assert placeholder.spec.preemption_policy == "Never"
    assert placeholder.spec.node_selector == {POOL_LABEL: "big"}
    kube.wait_available("web", 2)
    assert set(kube.placement("app=web").values()) == {new}
    assert _placeholders(kube) == []
    assert kube.leftovers() == []


def _pending_placeholders(kube: ClusterHarness) -> list[Any]:
    pods = kube.core.list_pod_for_all_namespaces(label_selector=KEYS.placeholder).items
    return [p for p in pods if not p.spec.node_name]


def test_without_an_autoscaler_the_placeholder_times_out_and_is_deleted(
    kube: ClusterHarness,
) -> None:
    _priority_class(kube)
    old = kube.add_node(f"{kube.namespace}-old", labels={POOL_LABEL: "small"})
    kube.deployment("web", 1)
    (pod,) = [model_pod(kube, name) for name in kube.placement("app=web")]
    actuator = make_actuator(kube, node_provision="autoscaler", provision_timeout_s=3)
    plan: list[Action] = [
        ProvisionNode("big+1", pool("big"), Resources(1000, 512 << 20)),
        Migrate(pod, "big+1"),
        RemoveNode(old),
    ]

    result = actuator.carry_out(plan)

    assert not result.completed
    assert "action 1/3" in result.reason
    assert "no new Ready node of pool big within 3 s" in result.reason
    assert "placeholder pod tuner-system/tuner-dev-placeholder-big-1-" in result.reason
    assert _placeholders(kube) == []
    assert kube.placement("app=web") == {pod.name: old}
    assert kube.leftovers() == []


def test_a_transition_killed_while_provisioning_leaves_no_placeholder_after_recovery(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    _priority_class(kube)
    kube.add_node(f"{kube.namespace}-old", labels={POOL_LABEL: "small"})
    _kill_child_when(
        lambda: _placeholders(kube),
        "the child to create its placeholder pod",
        _transition_child(
            kube, tmp_path, "provision", "big", node_provision="autoscaler", provision_timeout_s=600
        ),
    )
    assert _placeholders(kube) != []

    undone = make_actuator(kube).recover()

    assert any("interrupted at action 1 (op=provision_node" in line for line in undone), undone
    assert any("placeholder pod tuner-system/" in line and "big+1" in line for line in undone)
    assert _placeholders(kube) == []
    assert kube.leftovers() == []
    assert make_actuator(kube).recover() == []
