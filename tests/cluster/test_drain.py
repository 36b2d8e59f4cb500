"""The trial on the real control plane: a plan empties a node whose workloads are not onboarded.
Asserted from the API server (its audit log, pods, Events): the node is cordoned and tainted
before the first eviction, no pod is evicted twice, a replacement that comes back to its source
fails the migration (nothing reported verified, the transition rolled back), and the Events say
what happened; a SIGKILL after the cordon leaves nothing once recovery ran."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from testkit.cluster_fixture import ClusterHarness, eventually
from tests.cluster.conftest import make_actuator, model_pod
from tests.cluster.test_safety import _kill_child_when, _pdb, _transition_child
from tuner.execute.actuator import KubeActuator
from tuner.model.conventions import Keys
from tuner.plan.actions import Action, Migrate, RemoveNode
from tuner.settings import settings_from_dict

KEYS = Keys()
AGENT = "tuner-drain-test"
CONTROLLER = "tuner.dev/deployment-tuner"
HOSTNAME = "kubernetes.io/hostname"
READY = re.compile(r"pod (\S+) is Ready on (\S+)")
"""How a verified migration names its replacement and where it landed."""
EVERY_TAINT = [{"operator": "Exists"}]
"""A pod that tolerates every taint, the cordon's included (agents often run this way)."""
EVICTING = {"surge_lone_pods": False}
"""Every pod moved by its eviction, what these tests are about (a one-replica Deployment's pod
would move by a surge: ``tests/cluster/test_surge.py``)."""


def _shop(kube: ClusterHarness, *, tolerant: bool = False) -> tuple[str, list[str]]:
    """A big node holding the workloads (none onboarded), then two small nodes, each half (or,
    ``tolerant``, three quarters) full of pods pinned there: after an eviction the big node is
    the emptiest, the scheduler's favourite. The big node and the small ones."""
    big = kube.add_node(f"{kube.namespace}-big", cpu="16", memory="32Gi")
    if tolerant:
        kube.deployment("agent", 1, onboarded=False, pod_spec={"tolerations": EVERY_TAINT})
    else:
        for name, replicas in (("report", 2), ("catalog", 2), ("cart", 1)):
            kube.deployment(name, replicas, onboarded=False)
    small = [kube.add_node(f"{kube.namespace}-s{i}") for i in (1, 2)]
    for node in small:
        fill = "3" if tolerant else "2"
        kube.deployment(f"base-{node[-2:]}", 1, cpu=fill, node_selector={HOSTNAME: node})
    return big, small


def _actuator(kube: ClusterHarness, **execute: Any) -> KubeActuator:
    """An actuator whose requests the audit log tells apart by their user agent."""
    api = kube.new_api()
    api.user_agent = AGENT
    return KubeActuator(api, settings_from_dict(kube.settings_doc(**execute)))


def _plan(kube: ClusterHarness, big: str, small: list[str]) -> list[Action]:
    """Every pod on the big node to a small one, then remove the big node."""
    on_big = sorted(n for n, node in kube.placement("").items() if node == big)
    moves = [Migrate(model_pod(kube, n), small[i % 2]) for i, n in enumerate(on_big)]
    return [*moves, RemoveNode(big)]


def _requests(kube: ClusterHarness, offset: int) -> list[dict[str, Any]]:
    """The transition's completed requests, in the audit log's order."""

    def read() -> list[dict[str, Any]]:
        with kube.audit_log.open(encoding="utf-8") as log:
            log.seek(offset)
            events = [json.loads(line) for line in log if AGENT in line]
        return [
            e for e in events if e.get("userAgent") == AGENT and e["stage"] == "ResponseComplete"
        ]

    return eventually(read, 10, what="the audit log to show the transition's requests")


def _is(
    request: dict[str, Any], verb: str, resource: str, name: str = "", subresource: str = ""
) -> bool:
    ref = request["objectRef"]
    return (
        request["verb"] == verb
        and ref.get("resource") == resource
        and (not name or ref.get("name") == name)
        and ref.get("subresource", "") == subresource
    )


def _evictions(requests: list[dict[str, Any]]) -> list[str]:
    """The pods evicted, in order."""
    return [
        r["objectRef"]["name"] for r in requests if _is(r, "create", "pods", subresource="eviction")
    ]


def _events(kube: ClusterHarness, namespace: str, name: str) -> list[Any]:
    """The tuner's Events about an object, oldest first."""
    found = kube.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    ).items
    ours = [e for e in found if e.reporting_component == CONTROLLER]
    return sorted(ours, key=lambda e: e.event_time or e.first_timestamp)


def test_emptying_a_node_of_workloads_not_onboarded_never_bounces_a_pod(
    kube: ClusterHarness,
) -> None:
    big, small = _shop(kube)
    plan = _plan(kube, big, small)
    moved = [a.pod.name for a in plan if isinstance(a, Migrate)]
    assert len(moved) == 5
    offset = kube.audit_log.stat().st_size

    result = _actuator(kube, node_removal="autoscaler", **EVICTING).carry_out(plan)

    assert result.completed, result.reason
    assert result.eviction_only == tuple(plan[:-1])  # counted as placement not controlled
    requests = _requests(kube, offset)
    patches = [i for i, r in enumerate(requests) if _is(r, "patch", "nodes", big)]
    evictions = [
        i for i, r in enumerate(requests) if _is(r, "create", "pods", subresource="eviction")
    ]
    cordon, first_eviction = requests[patches[0]], requests[evictions[0]]
    assert patches[0] < evictions[0]
    assert cordon["stageTimestamp"] <= first_eviction["requestReceivedTimestamp"]
    evicted = Counter(_evictions(requests))
    assert sorted(evicted) == sorted(moved) and set(evicted.values()) == {1}  # each once
    landed = kube.placement("")
    assert big not in {node for name, node in landed.items() if not name.startswith("base-")}
    for name in moved:
        (event,) = _events(kube, kube.namespace, name)
        assert (event.reason, event.type) == ("Migrated", "Normal")
        assert "not onboarded: placement not controlled" in event.message
        replacement, where = READY.findall(event.message)[0]
        assert landed[replacement] == where == event.related.name != big
    reasons = [e.reason for e in _events(kube, "default", big)]
    assert reasons == ["Cordoned", "LeftForAutoscaler"]  # not NodeRemoved: it is still there
    node = kube.core.read_node(big)
    assert node.spec.unschedulable and KEYS.left_for_removal in node.metadata.annotations


def test_a_replacement_that_returns_to_its_source_fails_and_the_transition_rolls_back(
    kube: ClusterHarness,
) -> None:
    """The workload tolerates every taint, so the cordon cannot keep its replacement off the
    emptied node, which the scheduler prefers (the emptiest): the migration fails, nothing is
    reported verified, the node is given back and never drained."""
    big, small = _shop(kube, tolerant=True)
    plan = _plan(kube, big, small)
    (pod,) = [a.pod.name for a in plan if isinstance(a, Migrate)]
    offset = kube.audit_log.stat().st_size

    result = _actuator(kube, node_removal="autoscaler", **EVICTING).carry_out(plan)

    assert not result.completed and result.done == ()
    assert f"was scheduled on {big}, its source" in result.reason
    assert _evictions(_requests(kube, offset)) == [pod]  # the replacement was not evicted again
    (event,) = _events(kube, kube.namespace, pod)
    assert (event.reason, event.type) == ("MigrationFailed", "Warning")
    assert f"was scheduled on {big}, its source" in event.message
    assert [e.reason for e in _events(kube, "default", big)] == ["Cordoned", "Uncordoned"]
    assert list(kube.placement("app=agent").values()) == [big]
    assert kube.leftovers() == []


def test_sigkill_after_the_cordon_leaves_nothing_once_recovered(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    """The child cordons the node it empties, then its first migration blocks on a PDB: it is
    SIGKILLed there, and recovery undoes the cordon, the taint and the journal."""
    big, small = _shop(kube)
    _pdb(kube, "report")
    _kill_child_when(
        lambda: _drained(kube.core.read_node(big)),
        f"the child to cordon and taint {big}",
        _transition_child(
            kube,
            tmp_path,
            "empty",
            big,
            small[0],
            node_removal="autoscaler",
            eviction_retries=1000,
            eviction_backoff_s=0.5,
        ),
    )
    assert kube.leftovers() != []

    undone = make_actuator(kube).recover()

    assert any(f"node {big}" in line for line in undone), undone
    assert kube.leftovers() == []
    assert not kube.core.read_node(big).spec.unschedulable


def _drained(node: Any) -> bool:
    return bool(node.spec.unschedulable) and any(
        t.key == KEYS.taint for t in node.spec.taints or ()
    )
