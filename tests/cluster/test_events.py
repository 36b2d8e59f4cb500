"""Kubernetes Events on the real control plane: each action carried out or failed leaves one
about the object it acted on, where ``kubectl describe`` finds it (the core/v1 view, matched by
uid); an Event that cannot be recorded fails nothing."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kubernetes import client

from testkit.cluster_fixture import ClusterHarness
from tests.cluster.conftest import make_actuator, model_pod
from tuner.execute.actuator import KubeActuator
from tuner.execute.events import Event, Recorder, Ref
from tuner.plan.actions import Migrate, RemoveNode

CONTROLLER = "tuner.dev/deployment-tuner"


def _described(kube: ClusterHarness, namespace: str, kind: str, name: str, uid: str) -> Any:
    """The tuner's Events ``kubectl describe`` would list for an object (it selects by uid)."""
    selector = f"involvedObject.kind={kind},involvedObject.name={name},involvedObject.uid={uid}"
    events = kube.core.list_namespaced_event(namespace, field_selector=selector).items
    return [e for e in events if e.reporting_component == CONTROLLER]


def test_a_migration_leaves_an_event_about_the_pod(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    nodes = [kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2)]
    kube.deployment("web", 1)
    (pod,) = kube.pods("app=web")
    target = next(n for n in nodes if n != pod.spec.node_name)

    migrate = Migrate(model_pod(kube, pod.metadata.name), target)

    result = actuator.carry_out([migrate])

    assert result.completed, result.reason
    (event,) = _described(kube, kube.namespace, "Pod", pod.metadata.name, pod.metadata.uid)
    assert (event.reason, event.type, event.action) == ("Migrated", "Normal", "Migrate")
    assert event.message.startswith(f"migrate {kube.namespace}/{pod.metadata.name}")
    assert f"Ready on {target}" in event.message
    assert (event.related.kind, event.related.name) == ("Node", target)


def test_a_failed_migration_is_a_warning_and_a_removed_node_is_described(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    kube.add_node(f"{kube.namespace}-n1")
    kube.deployment("web", 1)
    (pod,) = kube.pods("app=web")
    nowhere = Migrate(model_pod(kube, pod.metadata.name), "nowhere")
    failed = actuator.carry_out([nowhere])
    spare = kube.add_node(f"{kube.namespace}-n2")

    removed = actuator.carry_out([RemoveNode(spare)])

    assert not failed.completed and "node nowhere is gone" in failed.reason
    (warning,) = _described(kube, kube.namespace, "Pod", pod.metadata.name, pod.metadata.uid)
    assert (warning.reason, warning.type) == ("MigrationFailed", "Warning")
    assert "node nowhere is gone" in warning.message
    assert removed.completed, removed.reason
    described = _described(kube, "default", "Node", spare, spare)
    # Cordoned before the first move, then removed.
    assert sorted((e.reason, e.type) for e in described) == [
        ("Cordoned", "Normal"),
        ("NodeRemoved", "Normal"),
    ]


def test_an_event_that_cannot_be_recorded_fails_nothing(
    kube: ClusterHarness, caplog: pytest.LogCaptureFixture
) -> None:
    nodes = [kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2)]
    kube.deployment("web", 1)
    ((name, source),) = kube.placement("app=web").items()
    target = next(n for n in nodes if n != source)
    actuator = make_actuator(kube)
    unreachable = client.Configuration()
    unreachable.host = "http://127.0.0.1:9"  # nothing listens: connection refused
    actuator.events = Recorder(client.ApiClient(unreachable), CONTROLLER, "test")
    missing = Event(Ref("v1", "Pod", "p", "no-such-namespace"), "Migrate", "Migrated", "x")

    with caplog.at_level(logging.WARNING, logger="tuner.execute.events"):
        Recorder(kube.api, CONTROLLER, "test").record(missing)  # 404: the namespace
        result = actuator.carry_out([Migrate(model_pod(kube, name), target)])

    assert result.completed, result.reason
    assert list(kube.placement("app=web").values()) == [target]
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    assert "event Migrated about Pod no-such-namespace/p not recorded: 404" in warnings
    assert f"event Migrated about Pod {kube.namespace}/{name} not recorded" in warnings
