"""A failed add or remove leaves no replica drift on the real control plane: the replica count
goes back, taking the pod the add created, and no mark stays behind; an add whose pod lands off
its destination is no failure and keeps its pod."""

from __future__ import annotations

import threading

import pytest

from testkit.cluster_fixture import ClusterHarness, eventually
from tests.cluster.conftest import make_actuator, model_pod
from tuner.execute.actuator import KubeActuator
from tuner.model.cluster import Workload
from tuner.model.resources import Resources
from tuner.plan.actions import Add, Remove

HOSTNAME = "kubernetes.io/hostname"


def _replicas(kube: ClusterHarness, name: str) -> int:
    return int(kube.apps.read_namespaced_deployment(name, kube.namespace).spec.replicas)


def _add_web(kube: ClusterHarness, target: str) -> Add:
    return Add(Workload(kube.namespace, "Deployment", "web"), target, Resources(500, 256 << 20))


def test_an_add_whose_destination_is_full_lands_elsewhere_and_is_kept(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    """The destination is full: the onboarded workload's new pod is scheduled on another node.
    That is no failure (the add's claim is one more Ready pod off the nodes being emptied): it
    is verified there, reported as landed elsewhere, and nothing is scaled back."""
    full, *others = [kube.add_node(f"{kube.namespace}-n{i}", cpu="2") for i in (1, 2, 3)]
    kube.deployment("hog", 1, cpu="2", onboarded=False, node_selector={HOSTNAME: full})
    kube.deployment("web", 2)
    before = kube.placement("app=web")
    assert full not in before.values()
    add = _add_web(kube, full)

    result = actuator.carry_out([add])

    assert result.completed, result.reason
    ((landed_add, landed),) = result.landed_elsewhere
    assert landed_add == add and landed in others
    assert _replicas(kube, "web") == 3
    kube.wait_available("web", 3)
    after = kube.placement("app=web")
    assert set(before) < set(after) and set(after.values()) <= set(others)
    assert kube.leftovers() == []


@pytest.mark.parametrize("end", ["timeout", "stop"])
def test_an_add_whose_pod_stays_pending_is_scaled_back(kube: ClusterHarness, end: str) -> None:
    """The only node is full: the new pod stays Pending until the verification times out, or
    until a stop request (SIGTERM) ends the wait: the rollback runs to its end either way."""
    (node,) = [kube.add_node(f"{kube.namespace}-n1", cpu="1")]
    kube.deployment("web", 2)
    before = kube.placement("app=web")
    actuator = make_actuator(kube, verify_timeout_s=5 if end == "timeout" else 60)
    if end == "stop":

        def stop_once_pending() -> None:
            eventually(lambda: len(kube.pods("app=web")) == 3, what="the new pod")
            actuator.stop_requested.set()

        threading.Thread(target=stop_once_pending, daemon=True).start()

    result = actuator.carry_out([_add_web(kube, node)])

    assert not result.completed
    assert ("timed out" if end == "timeout" else "stop requested") in result.reason
    assert "back to 2, removing the new pod" in result.reason
    assert _replicas(kube, "web") == 2
    kube.wait_available("web", 2)
    assert kube.placement("app=web") == before
    assert kube.leftovers() == []


def test_a_remove_that_took_another_pod_is_scaled_back(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    """A Pending pod goes first on scale-down, whatever the deletion cost says: the remove
    fails its verification and the replica count is restored."""
    kube.add_node(f"{kube.namespace}-n1", cpu="1")
    kube.deployment("web", 2)
    (chosen, *_) = sorted(kube.placement("app=web"))
    kube.apps.patch_namespaced_deployment_scale("web", kube.namespace, {"spec": {"replicas": 3}})
    pending = eventually(
        lambda: [p.metadata.name for p in kube.pods("app=web") if not p.spec.node_name],
        what="the third pod Pending",
    )

    result = actuator.carry_out([Remove(model_pod(kube, chosen))])

    assert not result.completed
    assert f"removed {pending[0]} instead" in result.reason
    assert "back to 3" in result.reason
    assert _replicas(kube, "web") == 3
    live = [p for p in kube.pods("app=web") if not p.metadata.deletion_timestamp]
    assert len(live) == 3
    assert chosen in {p.metadata.name for p in live}
    assert kube.leftovers() == []
