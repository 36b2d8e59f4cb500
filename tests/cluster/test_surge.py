"""Surge moves on the real control plane (the Deployment controller, kube-scheduler, KWOK
nodes): the lone pod of a one-replica Deployment is moved by restarting its rollout, served
throughout; a restart whose new pod cannot start is set back, by the move itself and by
recovery after a SIGKILL."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from testkit.cluster_fixture import ClusterHarness, eventually
from tests.cluster.conftest import make_actuator, model_pod
from tests.cluster.test_safety import _kill_child_when, _transition_child
from tuner.execute.actuator import KubeActuator
from tuner.model.conventions import Keys
from tuner.plan.actions import Migrate

KEYS = Keys()


def _moved_at(kube: ClusterHarness) -> str | None:
    deployment = kube.apps.read_namespaced_deployment("web", kube.namespace)
    annotations = deployment.spec.template.metadata.annotations or {}
    return annotations.get(KEYS.moved_at)


def _ready(pod: Any) -> bool:
    conditions = (pod.status and pod.status.conditions) or ()
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


class Timeline:
    """Every watch event on the namespace's ``app=web`` pods: whether a Ready pod not being
    deleted served after each."""

    def __init__(self, kube: ClusterHarness) -> None:
        self.pods: dict[str, tuple[bool, bool]] = {}
        self.served: list[bool] = []
        self.deleted: set[str] = set()
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._follow, args=(kube,), daemon=True)
        self._thread.start()
        eventually(lambda: self.served or None, what="the watch to list the pods")

    def _follow(self, kube: ClusterHarness) -> None:
        stream = self._watch.stream(
            kube.core.list_namespaced_pod,
            kube.namespace,
            label_selector="app=web",
            timeout_seconds=120,
        )
        try:
            for event in stream:
                self._seen(event["type"], event["object"])
        except (urllib3.exceptions.HTTPError, ApiException):
            return  # the test is over and its namespace going: nothing more to follow

    def _seen(self, kind: str, pod: Any) -> None:
        name = pod.metadata.name
        if kind == "DELETED":
            self.pods.pop(name, None)
            self.deleted.add(name)
        else:
            self.pods[name] = (_ready(pod), pod.metadata.deletion_timestamp is not None)
        self.served.append(any(ready and not going for ready, going in self.pods.values()))

    def stop(self) -> None:
        self._watch.stop()


def test_a_lone_pod_moves_by_a_restart_with_its_workload_served_throughout(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    nodes = [kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2)]
    kube.deployment("web", 1)
    ((name, source),) = kube.placement("app=web").items()
    target = next(n for n in nodes if n != source)
    timeline = Timeline(kube)
    try:
        result = actuator.carry_out([Migrate(model_pod(kube, name), target)])

        assert result.completed, result.reason
        eventually(lambda: name in timeline.deleted or None, what=f"{name} deleted")
        assert all(timeline.served), timeline.served  # a Ready pod at every event
    finally:
        timeline.stop()
    assert _moved_at(kube) is not None
    placement = kube.placement("app=web")
    assert list(placement.values()) == [target] and name not in placement
    assert kube.leftovers() == []


def _stuck(kube: ClusterHarness) -> tuple[str, str, str]:
    """web's one pod on the only node labelled for it (its node selector): a new pod of it
    fits nowhere once that node is cordoned for the move. Its name, node and another node."""
    source = kube.add_node(f"{kube.namespace}-n1", labels={"disk": "ssd"})
    other = kube.add_node(f"{kube.namespace}-n2")
    kube.deployment("web", 1, node_selector={"disk": "ssd"})
    ((name, where),) = kube.placement("app=web").items()
    assert where == source
    return name, source, other


def _only_the_old_pod_left(kube: ClusterHarness, name: str, source: str) -> None:
    eventually(
        lambda: kube.placement("app=web") == {name: source} or None,
        what=f"only {name} left, on {source}",
    )


def test_a_restart_whose_new_pod_cannot_start_is_set_back_and_the_old_pod_stays(
    kube: ClusterHarness,
) -> None:
    name, source, other = _stuck(kube)

    result = make_actuator(kube, verify_timeout_s=5).carry_out(
        [Migrate(model_pod(kube, name), other)]
    )

    assert not result.completed
    assert "set back" in result.reason, result.reason
    assert _moved_at(kube) is None
    _only_the_old_pod_left(kube, name, source)
    assert kube.leftovers() == []


def test_sigkill_mid_restart_is_set_back_by_recovery(kube: ClusterHarness, tmp_path: Path) -> None:
    name, source, other = _stuck(kube)
    _kill_child_when(
        lambda: _moved_at(kube),
        "the child to restart web's rollout",
        _transition_child(kube, tmp_path, "migrate", name, other, verify_timeout_s=600),
    )

    undone = make_actuator(kube).recover()

    assert any("set back" in line for line in undone), undone
    assert _moved_at(kube) is None
    _only_the_old_pod_left(kube, name, source)
    assert kube.leftovers() == []
