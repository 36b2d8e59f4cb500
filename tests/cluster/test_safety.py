"""Failures on the real control plane: every one stops cleanly and leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testkit.cluster_fixture import REPO_ROOT, ClusterHarness, eventually
from tests.cluster.conftest import make_actuator, model_pod
from tuner.execute.actuator import KubeActuator
from tuner.execute.marks import DELETION_COST, cheapest_pod
from tuner.model.cluster import Workload
from tuner.model.conventions import Keys
from tuner.model.resources import Resources
from tuner.plan.actions import Add, Migrate, Remove, RemoveNode
from tuner.settings import settings_from_dict

KEYS = Keys()


def _nodes(kube: ClusterHarness, count: int = 3) -> list[str]:
    return [kube.add_node(f"{kube.namespace}-n{i}") for i in range(1, count + 1)]


def _pdb(kube: ClusterHarness, app: str) -> None:
    client.PolicyV1Api(kube.api).create_namespaced_pod_disruption_budget(
        kube.namespace,
        {
            "metadata": {"name": app},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
        },
    )

    def counted() -> bool:
        pdb = client.PolicyV1Api(kube.api).read_namespaced_pod_disruption_budget(
            app, kube.namespace
        )
        return pdb.status is not None and pdb.status.observed_generation == 1

    eventually(counted, what="the disruption controller to process the PDB")


def _uids(kube: ClusterHarness, selector: str) -> dict[str, tuple[str, str]]:
    return {
        p.metadata.uid: (p.metadata.name, p.spec.node_name)
        for p in kube.pods(selector)
        if not p.metadata.deletion_timestamp
    }


def test_pdb_with_max_unavailable_0_blocks_a_migration_cleanly(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    nodes = _nodes(kube)
    kube.deployment("web", 2)
    _pdb(kube, "web")
    before = _uids(kube, "app=web")
    name, source = next(iter(before.values()))
    target = next(n for n in nodes if n != source)

    result = actuator.carry_out([Migrate(model_pod(kube, name), target)])

    assert not result.completed
    assert result.done == ()
    assert "PodDisruptionBudget" in result.reason
    assert _uids(kube, "app=web") == before
    assert kube.apps.read_namespaced_deployment("web", kube.namespace).spec.replicas == 2
    assert kube.leftovers() == []


def test_replacements_a_filled_destination_sends_elsewhere_are_verified_off_their_source(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    """Mid-action the destination fills up: a pending "hog" pod that selects the tuner's
    label is scheduled there the moment the label appears, before the replacement pod. Each
    replacement lands on another node than the destination, never on its cordoned source: each
    migration is verified there and reported as landed elsewhere, and nothing is left."""
    nodes = _nodes(kube)
    kube.deployment("web", 2, cpu="1")
    kube.apps.create_namespaced_deployment(
        kube.namespace,
        {
            "metadata": {"name": "hog"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "hog"}},
                "template": {
                    "metadata": {"labels": {"app": "hog"}},
                    "spec": {
                        "nodeSelector": {KEYS.workload_label(kube.namespace, "web"): "true"},
                        "containers": [
                            {
                                "name": "a",
                                "image": "fake",
                                "resources": {"requests": {"cpu": "3500m"}},
                            }
                        ],
                    },
                },
            },
        },
    )
    eventually(lambda: kube.pods("app=hog"), what="the pending hog pod")
    placement = kube.placement("app=web")
    name = next(iter(placement))
    target = next(n for n in nodes if n not in placement.values())  # 2 pods, 3 nodes
    other = next(p for p in placement if p != name)
    plan = [Migrate(model_pod(kube, name), target), Migrate(model_pod(kube, other), target)]

    result = actuator.carry_out(plan)

    assert result.completed, result.reason
    assert [action for action, _ in result.landed_elsewhere] == plan
    after = kube.placement("app=web")
    assert name not in after and other not in after and target not in after.values()
    (first, second) = (node for _, node in result.landed_elsewhere)
    assert first == placement[other] and second == placement[name]  # each off its source
    assert kube.leftovers() == []


@pytest.mark.parametrize("op", ["migrate", "remove_node"])
def test_sigkill_mid_action_then_recover_undoes_the_leftovers(
    kube: ClusterHarness, tmp_path: Path, op: str
) -> None:
    """The child blocks on a PDB (a migrate: its destination labelled, its source cordoned
    and tainted; a remove_node: the node cordoned and tainted), is SIGKILLed, and a new
    actuator's recover() undoes what it left."""
    nodes = _nodes(kube)
    kube.deployment("web", 2)
    _pdb(kube, "web")
    name, source = next(iter(kube.placement("app=web").items()))
    target = next(n for n in nodes if n != source)
    args = [name, target] if op == "migrate" else [source]
    marked = [target, source] if op == "migrate" else [source]

    def all_marked() -> bool:
        return all(KEYS.managed in (kube.core.read_node(n).metadata.labels or {}) for n in marked)

    _kill_child_when(
        all_marked,
        f"the child to mark {', '.join(marked)}",
        _transition_child(kube, tmp_path, op, *args, eviction_retries=1000, eviction_backoff_s=0.5),
    )
    assert f"{source} cordoned" in kube.leftovers()

    undone = make_actuator(kube).recover()

    assert any("interrupted at action 1" in line for line in undone)
    assert all(any(f"node {n}" in line for line in undone) for n in marked), undone
    assert kube.leftovers() == []
    assert make_actuator(kube).recover() == []


def test_sigkill_after_an_adds_scaling_then_recover_restores_the_replicas(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    before = _killed_after_adding(kube, tmp_path)

    undone = make_actuator(kube).recover()

    assert any("scaled Deployment" in line and "back to 2" in line for line in undone), undone
    assert _replicas(kube, "web") == 2
    kube.wait_available("web", 2)
    assert _uids(kube, "app=web") == before
    assert kube.leftovers() == []


def test_recover_leaves_a_replica_count_someone_changed_after_the_crash(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    _killed_after_adding(kube, tmp_path)
    kube.apps.patch_namespaced_deployment_scale("web", kube.namespace, {"spec": {"replicas": 4}})

    undone = make_actuator(kube).recover()

    assert any("left at 4 replicas" in line for line in undone), undone
    assert _replicas(kube, "web") == 4
    assert kube.leftovers() == []


def _killed_after_adding(kube: ClusterHarness, tmp_path: Path) -> dict[str, tuple[str, str]]:
    """A child adding a pod of ``web`` (2 replicas filling the only node) SIGKILLed after
    scaling to 3, while it verifies: the full node keeps the new pod Pending. The pods before."""
    node = kube.add_node(f"{kube.namespace}-n1", cpu="1")
    kube.deployment("web", 2)  # 2 x 500m
    before = _uids(kube, "app=web")
    _kill_child_when(
        lambda: len(_uids(kube, "app=web")) == 3,
        "the child to scale web to 3 (the new pod Pending)",
        _transition_child(kube, tmp_path, "add", "web", node, verify_timeout_s=300),
    )
    assert _replicas(kube, "web") == 3
    return before


def _replicas(kube: ClusterHarness, name: str) -> int:
    return int(kube.apps.read_namespaced_deployment(name, kube.namespace).spec.replicas)


def _transition_child(
    kube: ClusterHarness, tmp_path: Path, op: str, *args: str, **execute: Any
) -> subprocess.Popen[bytes]:
    """``tests.cluster.transition_child`` running ``op args`` with extra ``execute`` settings."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(kube.settings_doc(**execute)), encoding="utf-8")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.cluster.transition_child",
            str(settings),
            kube.namespace,
            op,
            *args,
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_child_when(probe: Any, what: str, child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child as soon as ``probe()`` holds (and in any case)."""
    try:
        eventually(probe, what=what)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()


def test_recover_restores_a_pod_deletion_cost(kube: ClusterHarness, actuator: KubeActuator) -> None:
    _nodes(kube, 1)
    kube.deployment("web", 1)
    (name,) = kube.placement("app=web")
    kube.core.patch_namespaced_pod(
        name, kube.namespace, {"metadata": {"annotations": {DELETION_COST: "5"}}}
    )
    pod = kube.core.read_namespaced_pod(name, kube.namespace)
    kube.core.patch_namespaced_pod(
        name, kube.namespace, cheapest_pod(pod, KEYS)
    )  # as a crash left it

    undone = actuator.recover()

    assert undone == [f"pod {kube.namespace}/{name}: restored its pod-deletion-cost"]
    pod = kube.core.read_namespaced_pod(name, kube.namespace)
    assert pod.metadata.annotations[DELETION_COST] == "5"
    assert KEYS.managed not in (pod.metadata.labels or {})


def test_api_server_restart_mid_transition_completes_or_stops_cleanly(kube: ClusterHarness) -> None:
    """A PDB holds the first migration (label applied, evictions refused) while the API server
    is killed and restarted; then the PDB goes and the transition carries on."""
    nodes = _nodes(kube)
    kube.deployment("web", 2)
    _pdb(kube, "web")
    placement = kube.placement("app=web")
    plan: list[Any] = []
    for name, node in placement.items():
        plan.append(Migrate(model_pod(kube, name), next(n for n in nodes if n != node)))
    actuator = make_actuator(kube, eviction_retries=1000, eviction_backoff_s=0.5)
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(actuator.carry_out(plan)))

    runner.start()
    first = plan[0].target
    eventually(lambda: KEYS.managed in (kube.core.read_node(first).metadata.labels or {}), 30)
    kube.script("restart-apiserver", "--hard", timeout=300)
    eventually(
        lambda: client.PolicyV1Api(kube.api).delete_namespaced_pod_disruption_budget(
            "web", kube.namespace
        ),
        what="the PDB deleted after the restart",
    )
    runner.join(timeout=300)

    assert not runner.is_alive()
    (result,) = results
    kube.wait_available("web", 2)
    if result.completed:
        assert len(result.done) == 2
        assert sorted(kube.placement("app=web").values()) == sorted(a.target for a in plan)
    else:
        assert "failed" in result.reason
    assert kube.leftovers() == []


def test_statefulset_pods_are_never_evicted(kube: ClusterHarness, actuator: KubeActuator) -> None:
    nodes = _nodes(kube, 2)
    kube.apps.create_namespaced_stateful_set(
        kube.namespace,
        {
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 1,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {
                    "metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "db", "image": "fake"}]},
                },
            },
        },
    )
    eventually(lambda: kube.placement("app=db"), what="the StatefulSet pod")
    before = _uids(kube, "app=db")
    name, node = next(iter(before.values()))
    other = next(n for n in nodes if n != node)

    for plan in (
        [Migrate(model_pod(kube, name), other)],
        [Remove(model_pod(kube, name))],
        [RemoveNode(node)],
    ):
        result = actuator.carry_out(plan)
        assert not result.completed
        assert "StatefulSet" in result.reason

    assert _uids(kube, "app=db") == before
    assert not kube.core.read_node(node).spec.unschedulable
    assert kube.leftovers() == []


def test_hpa_workloads_are_migrated_but_never_scaled(
    kube: ClusterHarness, actuator: KubeActuator
) -> None:
    nodes = _nodes(kube, 2)
    kube.deployment("web", 1)
    kube.hpa("web", 1, 1)
    workload = Workload(kube.namespace, "Deployment", "web")
    refused = actuator.carry_out([Add(workload, nodes[0], Resources(500, 0))])
    ((name, node),) = kube.placement("app=web").items()
    target = next(n for n in nodes if n != node)

    moved = actuator.carry_out([Migrate(model_pod(kube, name), target)])

    assert not refused.completed and "HPA" in refused.reason
    assert moved.completed, moved.reason
    assert list(kube.placement("app=web").values()) == [target]
    assert kube.apps.read_namespaced_deployment("web", kube.namespace).spec.replicas == 1
    assert kube.leftovers() == []


def test_dry_run_makes_no_mutating_request(kube: ClusterHarness) -> None:
    nodes = _nodes(kube)
    kube.deployment("web", 2)
    placement = kube.placement("app=web")
    name, node = next(iter(placement.items()))
    api = kube.new_api()
    api.user_agent = "tuner-dry-run-test"
    lines: list[str] = []
    actuator = KubeActuator(api, settings_from_dict(kube.settings_doc()), echo=lines.append)
    plan = [
        Migrate(model_pod(kube, name), next(n for n in nodes if n != node)),
        Add(Workload(kube.namespace, "Deployment", "web"), nodes[0], Resources(500, 0)),
        Remove(model_pod(kube, name)),
        RemoveNode(node),
    ]
    start = kube.audit_log.stat().st_size

    result = actuator.check(plan)
    actuator.read()

    assert result.done == ()
    drain, *steps = lines  # the node removed is cordoned before the first move
    assert drain.startswith(f"dry run: before action 1: would cordon node(s) {node} and taint")
    assert len(steps) == 4 and all("would" in line for line in steps)
    events = _audit_events(kube.audit_log, start, "tuner-dry-run-test")
    verbs = {e["verb"] for e in events}
    assert verbs and verbs <= {"get", "list", "watch"}, verbs
    assert kube.placement("app=web") == placement
    assert kube.leftovers() == []


def _audit_events(path: Path, offset: int, agent: str) -> list[dict[str, Any]]:
    def read() -> list[dict[str, Any]]:
        with path.open(encoding="utf-8") as log:
            log.seek(offset)
            events = [json.loads(line) for line in log if agent in line]
        return [e for e in events if e.get("userAgent") == agent]

    return eventually(read, 10, what="the audit log to show the dry run's requests")


def test_a_stop_request_rolls_back_the_action_in_flight_and_starts_no_other(
    kube: ClusterHarness,
) -> None:
    """SIGTERM sets the flag: the migration blocked by a PDB gives up, its label goes, and
    the second action never starts."""
    nodes = _nodes(kube)
    kube.deployment("web", 2)
    _pdb(kube, "web")
    placement = kube.placement("app=web")
    first, second = (model_pod(kube, name) for name in placement)
    target = next(n for n in nodes if n != first.node)
    actuator = make_actuator(kube, eviction_retries=1000, eviction_backoff_s=0.5)
    plan = [Migrate(first, target), Migrate(second, target)]
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(actuator.carry_out(plan)))

    runner.start()
    eventually(lambda: KEYS.managed in (kube.core.read_node(target).metadata.labels or {}), 30)
    actuator.stop_requested.set()
    runner.join(timeout=60)

    assert not runner.is_alive()
    (result,) = results
    assert not result.completed and result.done == ()
    assert "stop requested" in result.reason
    assert kube.placement("app=web") == placement
    assert kube.leftovers() == []
