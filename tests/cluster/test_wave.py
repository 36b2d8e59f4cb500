"""A wave on the real control plane: a node holding pods of two workloads is emptied with both
pods evicted before the executor awaits either replacement (asserted from the API server's audit
log), every replacement verified off the node, the node removed and nothing left; a SIGKILL in
the middle of a wave leaves nothing once recovered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testkit.cluster_fixture import ClusterHarness
from tests.cluster.conftest import make_actuator
from tests.cluster.test_drain import EVICTING, READY, _actuator, _events, _is, _plan, _requests
from tests.cluster.test_safety import _kill_child_when, _pdb, _transition_child
from tuner.model.conventions import Keys
from tuner.plan.actions import Migrate

KEYS = Keys()
WORKLOADS = ("api", "web")


def _two_workloads(kube: ClusterHarness) -> tuple[str, list[str]]:
    """A big node holding one pod of each of two onboarded workloads (one replica each: a
    wave may move both), then two small empty nodes. The big node and the small ones."""
    big = kube.add_node(f"{kube.namespace}-big", cpu="16", memory="32Gi")
    for name in WORKLOADS:
        kube.deployment(name, 1)
    return big, [kube.add_node(f"{kube.namespace}-s{i}") for i in (1, 2)]


def _pod_reads(requests: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The lists and watches of a namespace's pods (how the executor awaits replacements)."""
    return [
        r
        for r in requests
        if r["verb"] in ("list", "watch")
        and r["objectRef"].get("resource") == "pods"
        and r["objectRef"].get("namespace") == namespace
    ]


def test_a_wave_evicts_both_workloads_pods_before_awaiting_either_replacement(
    kube: ClusterHarness,
) -> None:
    big, small = _two_workloads(kube)
    plan = _plan(kube, big, small)
    offset = kube.audit_log.stat().st_size

    result = _actuator(kube, **EVICTING).carry_out(plan)

    assert result.completed, result.reason
    requests = _requests(kube, offset)
    evictions = [r for r in requests if _is(r, "create", "pods", subresource="eviction")]
    evicted = sorted(r["objectRef"]["name"] for r in evictions)
    assert (
        evicted == sorted(a.pod.name for a in plan if isinstance(a, Migrate)) and len(evicted) == 2
    )
    started = evictions[0]["requestReceivedTimestamp"]
    awaited = [r["requestReceivedTimestamp"] for r in _pod_reads(requests, kube.namespace)]
    waits = [stamp for stamp in awaited if stamp > started]
    assert waits, "the replacements were never awaited"
    assert max(r["stageTimestamp"] for r in evictions) <= min(waits)
    assert all(_verified_off(kube, name, big) for name in evicted)
    assert big not in {n.metadata.name for n in kube.core.list_node().items}  # removed
    assert kube.leftovers() == []


def _verified_off(kube: ClusterHarness, pod: str, node: str) -> bool:
    """The pod's one Event says its migration was verified, its replacement Ready where it
    really is, not on ``node``."""
    (event,) = _events(kube, kube.namespace, pod)
    replacement, where = READY.findall(event.message)[0]
    landed = kube.placement("")[replacement]
    return (event.reason, event.type) == ("Migrated", "Normal") and landed == where != node


def test_sigkill_mid_wave_leaves_nothing_once_recovered(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    """The child's wave labels the destination for both workloads, evicts ``api``'s pod, and
    blocks on ``web``'s PodDisruptionBudget: it is SIGKILLed there (both labels on the
    destination at once, which only a wave does), and recovery undoes everything."""
    big, small = _two_workloads(kube)
    _pdb(kube, "web")
    (api_pod,) = kube.placement("app=api")
    labels = [KEYS.workload_label(kube.namespace, name) for name in WORKLOADS]

    def mid_wave() -> bool:
        on = kube.core.read_node(small[0]).metadata.labels or {}
        return all(label in on for label in labels) and api_pod not in kube.placement("app=api")

    blocked = {"eviction_retries": 1000, "eviction_backoff_s": 0.5, **EVICTING}  # on web's PDB
    child = _transition_child(kube, tmp_path, "empty", big, small[0], **blocked)
    _kill_child_when(mid_wave, f"the child to label {small[0]} twice, evict {api_pod}", child)
    assert kube.leftovers() != []

    undone = make_actuator(kube).recover()

    assert any("interrupted at action 1" in line for line in undone), undone
    assert all(any(f"node {n}" in line for line in undone) for n in (big, small[0])), undone
    assert kube.leftovers() == []
    assert not kube.core.read_node(big).spec.unschedulable
    assert make_actuator(kube).recover() == []
