"""kube-system pods on the real control plane: a PodDisruptionBudget makes one movable (the
Cluster Autoscaler's rule under ``--skip-nodes-with-system-pods=true``), read as the monitor
reads the cluster; one without a budget pins its node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from testkit.cluster_fixture import ClusterHarness, eventually
from tuner.model.movability import SYSTEM_NAMESPACE, Policy, assess
from tuner.monitor.kube import read_cluster


def _system_deployment(kube: ClusterHarness, name: str) -> None:
    kube.apps.create_namespaced_deployment(
        SYSTEM_NAMESPACE,
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "image": "fake",
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                        "terminationGracePeriodSeconds": 0,
                    },
                },
            },
        },
    )


def _running(kube: ClusterHarness, name: str) -> list[Any]:
    pods = kube.core.list_namespaced_pod(SYSTEM_NAMESPACE, label_selector=f"app={name}").items
    return [p for p in pods if p.spec.node_name and p.status.phase == "Running"]


@pytest.fixture
def system_apps(kube: ClusterHarness) -> Iterator[tuple[str, str]]:
    """Two kube-system Deployments of two pods on the test's node: the first with a
    PodDisruptionBudget (maxUnavailable 1) the disruption controller has counted."""
    kube.add_node(f"{kube.namespace}-n1")
    budgeted, bare = f"{kube.namespace}-dns", f"{kube.namespace}-heapster"
    policy = client.PolicyV1Api(kube.api)
    try:
        for name in (budgeted, bare):
            _system_deployment(kube, name)
        policy.create_namespaced_pod_disruption_budget(
            SYSTEM_NAMESPACE,
            {
                "metadata": {"name": budgeted},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": budgeted}}},
            },
        )
        for name in (budgeted, bare):
            eventually(lambda n=name: len(_running(kube, n)) == 2, what=f"{name} running")

        def counted() -> bool:
            pdb = policy.read_namespaced_pod_disruption_budget(budgeted, SYSTEM_NAMESPACE)
            return pdb.status is not None and pdb.status.disruptions_allowed == 1

        eventually(counted, what="the disruption controller to count the budget")
        yield budgeted, bare
    finally:
        for name in (budgeted, bare):
            kube.apps.delete_namespaced_deployment(name, SYSTEM_NAMESPACE)
        policy.delete_namespaced_pod_disruption_budget(budgeted, SYSTEM_NAMESPACE)


def test_a_kube_system_pod_a_budget_covers_is_movable_one_without_pins_its_node(
    kube: ClusterHarness, system_apps: tuple[str, str]
) -> None:
    budgeted, bare = system_apps
    cluster = read_cluster(kube.api)
    movability = assess(cluster, Policy())
    pods = {p.name: p for p in cluster.pods if p.namespace == SYSTEM_NAMESPACE}
    covered = [p for name, p in pods.items() if name.startswith(f"{budgeted}-")]
    pinned = [p for name, p in pods.items() if name.startswith(f"{bare}-")]
    assert len(covered) == len(pinned) == 2
    assert all(movability.movable(p) for p in covered)
    assert all(movability.pod_reasons[p.key] == "namespace kube-system is excluded" for p in pinned)
