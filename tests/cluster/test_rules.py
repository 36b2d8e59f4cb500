"""The scheduling rules production relies on, on the real control plane.

In each test one node (``drained``) is the only removal candidate (the others hold a bare pod,
which never moves) and its workload pod would fit elsewhere by CPU, memory and pod slots: the
analysis without the rule removes it, ``tuner plan --live`` with the rule refuses it and names
the rule. Then kube-scheduler is asked the same question: the drained node is cordoned, its pod
deleted, and the ReplicaSet's new pod stays Pending (Unschedulable).
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from testkit.cluster_fixture import REPO_ROOT, ClusterHarness, eventually
from tuner.analyse.decision import analyse
from tuner.analyse.options import Choice
from tuner.model.cluster import Cluster
from tuner.model.constraints import ZONE_KEY, Constraints
from tuner.monitor.kube import read_cluster
from tuner.settings import settings_from_dict

GPU = "nvidia.com/gpu"
TUNER = (sys.executable, "-m", "tuner.cli")
ANALYSE = {"candidate_delay_s": 0, "excluded_namespaces": ["kube-system"]}


def _settings_doc(kube: ClusterHarness) -> dict[str, Any]:
    document = kube.settings_doc()
    document["analyse"] = ANALYSE
    return document


def _plan_live(kube: ClusterHarness, tmp_path: Path) -> dict[str, Any]:
    """``tuner plan --live --format json`` on the test cluster."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(_settings_doc(kube)), encoding="utf-8")
    out = subprocess.run(
        [*TUNER, "plan", "--live", "--settings", str(settings), "--format", "json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out))


def _without(cluster: Cluster, strip: Callable[[Constraints], Constraints]) -> Cluster:
    """The cluster with ``strip`` applied to every pod's constraints (the rule taken out)."""
    pods = tuple(replace(p, constraints=strip(p.constraints)) for p in cluster.pods)
    return replace(cluster, pods=pods)


def _removed_without_the_rule(
    kube: ClusterHarness, strip: Callable[[Constraints], Constraints]
) -> list[str]:
    """The nodes the analysis removes once the rule is taken out of the live cluster."""
    settings = settings_from_dict(_settings_doc(kube))
    cluster = _without(read_cluster(kube.api), strip)
    result = analyse(cluster, settings, [], random.Random(0))
    assert result.decision is Choice.REMOVE_NODES, result.reason
    return list(result.change.remove_nodes)


def _node(kube: ClusterHarness, suffix: str, zone: str = "a", **extra: Any) -> str:
    return kube.add_node(f"{kube.namespace}-{suffix}", labels={ZONE_KEY: zone}, **extra)


def _refused(plan: dict[str, Any], drained: str, rule: str) -> None:
    assert plan["decision"] != "remove_nodes", plan["reason"]
    assert drained not in plan.get("removed_nodes", [])
    assert f"{drained}: pod " in plan["reason"], plan["reason"]
    assert "fits on no other node" in plan["reason"] and rule in plan["reason"], plan["reason"]


def _rule_holds(
    kube: ClusterHarness,
    tmp_path: Path,
    drained: str,
    app: str,
    strip: Callable[[Constraints], Constraints],
    rule: str,
) -> None:
    """Without the rule the analysis removes ``drained``; with it the live plan refuses it
    naming ``rule``; and kube-scheduler leaves ``app``'s pod from it Pending."""
    assert _removed_without_the_rule(kube, strip) == [drained]
    _refused(_plan_live(kube, tmp_path), drained, rule)
    _scheduler_agrees(kube, drained, app)


def _scheduler_agrees(kube: ClusterHarness, drained: str, app: str) -> None:
    """Cordon ``drained``, delete the workload's pod there: the new one stays Unschedulable."""
    kube.core.patch_node(drained, {"spec": {"unschedulable": True}})
    (name,) = [n for n, where in kube.placement(f"app={app}").items() if where == drained]
    kube.core.delete_namespaced_pod(name, kube.namespace, grace_period_seconds=0)

    def unschedulable() -> str | None:
        for pod in kube.pods(f"app={app}"):
            if pod.metadata.name == name or pod.metadata.deletion_timestamp:
                continue
            for condition in pod.status.conditions or []:
                if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                    return str(condition.message)
        return None

    eventually(unschedulable, what=f"a new {app} pod Unschedulable")


def _others_hold_bare_pods(kube: ClusterHarness, nodes: list[str]) -> None:
    for i, node in enumerate(nodes):
        kube.bare_pod(f"pinned-{i}", node)


@pytest.mark.parametrize(
    ("key", "zones", "replicas"),
    [
        (ZONE_KEY, ("a", "b", "b"), 2),  # the drained node is the only one of zone a
        ("kubernetes.io/hostname", ("a", "a", "a"), 3),  # one pod a node
    ],
)
def test_a_hard_topology_spread_keeps_the_node_its_pod_must_stay_on(
    kube: ClusterHarness, tmp_path: Path, key: str, zones: tuple[str, ...], replicas: int
) -> None:
    drained, *others = (_node(kube, f"n{i}", zone) for i, zone in enumerate(zones, 1))
    _others_hold_bare_pods(kube, others)
    spread = {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    pod_spec = {"topologySpreadConstraints": [spread]}
    kube.deployment("web", replicas, onboarded=False, pod_spec=pod_spec)
    assert drained in kube.placement("app=web").values()

    _rule_holds(
        kube,
        tmp_path,
        drained,
        "web",
        lambda c: replace(c, spread=()),
        f"topology spread on {key} (maxSkew 1) would be broken",
    )


def test_a_required_pod_affinity_keeps_a_pod_in_its_partners_zone(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    home = _node(kube, "a0", "a", pods=1)  # its one pod slot holds the cache
    drained = _node(kube, "a1", "a")
    others = [_node(kube, "b1", "b"), _node(kube, "b2", "b")]
    kube.bare_pod("cache", home)
    _others_hold_bare_pods(kube, others)
    near_cache = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"role": "cache"}}, "topologyKey": ZONE_KEY}
        ]
    }
    kube.deployment("web", 1, onboarded=False, pod_spec={"affinity": {"podAffinity": near_cache}})
    assert list(kube.placement("app=web").values()) == [drained]

    _rule_holds(
        kube, tmp_path, drained, "web", lambda c: replace(c, affinity=()), "required pod affinity"
    )


@pytest.fixture
def zonal_volume(kube: ClusterHarness) -> Iterator[str]:
    """A PersistentVolume reachable from zone ``a`` only, bound to the claim ``data``."""
    name = f"{kube.namespace}-disk"
    terms = [{"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["a"]}]}]
    kube.core.create_persistent_volume(
        {
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/tuner-test"},
                "storageClassName": "",
                "nodeAffinity": {"required": {"nodeSelectorTerms": terms}},
                "claimRef": {"namespace": kube.namespace, "name": "data"},
            },
        }
    )
    kube.core.create_namespaced_persistent_volume_claim(
        kube.namespace,
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    eventually(
        lambda: (
            kube.core.read_namespaced_persistent_volume_claim("data", kube.namespace).status.phase
            == "Bound"
        ),
        what="claim data bound",
    )
    try:
        yield name
    finally:
        with contextlib.suppress(ApiException):
            kube.core.delete_persistent_volume(name)


def test_a_zonal_volume_keeps_its_pod_in_its_zone(
    kube: ClusterHarness, zonal_volume: str, tmp_path: Path
) -> None:
    drained = _node(kube, "a1", "a")
    others = [_node(kube, "b1", "b"), _node(kube, "b2", "b")]
    _others_hold_bare_pods(kube, others)
    volume = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    kube.deployment("db", 1, onboarded=False, pod_spec=volume)
    assert list(kube.placement("app=db").values()) == [drained]

    _rule_holds(
        kube,
        tmp_path,
        drained,
        "db",
        lambda c: replace(c, volumes=()),
        f"PersistentVolume {zonal_volume} (claim {kube.namespace}/data) is reachable from none",
    )


def _with_port(port: int) -> list[dict[str, Any]]:
    return [
        {
            "name": "c",
            "image": "fake",
            "ports": [{"containerPort": port, "hostPort": port}],
            "resources": {"requests": {"cpu": "100m"}},
        }
    ]


def test_a_host_port_in_use_elsewhere_keeps_its_pod(kube: ClusterHarness, tmp_path: Path) -> None:
    drained = _node(kube, "n1")
    others = [_node(kube, "n2"), _node(kube, "n3")]
    for i, node in enumerate(others):
        kube.bare_pod(f"proxy-{i}", node, containers=_with_port(8080))
    kube.deployment("web", 1, onboarded=False, pod_spec={"containers": _with_port(8080)})
    assert list(kube.placement("app=web").values()) == [drained]

    _rule_holds(
        kube,
        tmp_path,
        drained,
        "web",
        lambda c: replace(c, host_ports=()),
        "host port TCP 0.0.0.0:8080 in use",
    )


def _with_gpu() -> list[dict[str, Any]]:
    resources = {"requests": {"cpu": "100m", GPU: "1"}, "limits": {GPU: "1"}}
    return [{"name": "c", "image": "fake", "resources": resources}]


def test_a_gpu_request_keeps_its_pod_on_a_node_with_a_free_gpu(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    drained = _node(kube, "g1", extended={GPU: "1"})
    busy = _node(kube, "g2", extended={GPU: "1"})
    plain = _node(kube, "n3")
    kube.bare_pod("training", busy, containers=_with_gpu())
    kube.bare_pod("pinned", plain)
    kube.deployment("train", 1, onboarded=False, pod_spec={"containers": _with_gpu()})
    assert list(kube.placement("app=train").values()) == [drained]

    _rule_holds(
        kube,
        tmp_path,
        drained,
        "train",
        lambda c: replace(c, extended=()),
        f"not enough free {GPU}",
    )
