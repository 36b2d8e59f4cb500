"""The offline cluster source: kubectl List JSON into the domain model."""

import json
from pathlib import Path
from typing import Any

import pytest

from tuner.errors import InputError
from tuner.model.cluster import Workload
from tuner.model.constraints import HOSTNAME_KEY as HOSTNAME
from tuner.model.constraints import ZONE_KEY as ZONE
from tuner.model.resources import Resources
from tuner.monitor.dump import cluster_from_objects, load_dump
from tuner.monitor.pod_spec import effective_requests
from tuner.monitor.prune import pruned

EXAMPLE = Path(__file__).parents[2] / "examples" / "cluster-dump.json"


def _node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "e2-standard-4"}},
        "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3920m", "memory": "13Gi", "pods": "110"},
        },
    }


def _pod(
    name: str, node: str | None, owner: tuple[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    meta.update(extra.pop("meta", {}))
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]
    }
    if node:
        spec["nodeName"] = node
    spec.update(extra.pop("spec", {}))
    return {
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": extra.pop("status", {"phase": "Running"}),
    }


def _rs(name: str, deployment: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop"}
    if deployment:
        meta["ownerReferences"] = [{"kind": "Deployment", "name": deployment, "controller": True}]
    return {"kind": "ReplicaSet", "metadata": meta}


def test_nodes_keep_capacity_and_allocatable_apart() -> None:
    cluster = cluster_from_objects([_node("n1")])
    node = cluster.nodes[0]
    assert node.capacity == Resources(4000, 16 * 2**30)
    assert node.allocatable == Resources(3920, 13 * 2**30)
    assert node.instance_type == "e2-standard-4"
    assert node.taints[0].key == "dedicated"


def test_workloads_resolve_through_owner_references() -> None:
    items = [
        _node("n1"),
        _rs("web-abc", "web"),
        _rs("bare-rs", None),
        {
            "kind": "Job",
            "metadata": {
                "name": "nightly-123",
                "namespace": "shop",
                "ownerReferences": [{"kind": "CronJob", "name": "nightly", "controller": True}],
            },
        },
        _pod("web-abc-1", "n1", ("ReplicaSet", "web-abc")),
        _pod("bare-rs-1", "n1", ("ReplicaSet", "bare-rs")),
        _pod("db-0", "n1", ("StatefulSet", "db")),
        _pod("proxy-x", "n1", ("DaemonSet", "proxy")),
        _pod("nightly-123-x", "n1", ("Job", "nightly-123")),
        _pod(
            "static-n1",
            "n1",
            ("Node", "n1"),
            meta={"annotations": {"kubernetes.io/config.mirror": "h"}},
        ),
        _pod("lonely", "n1"),
    ]
    pods = {p.name: p for p in cluster_from_objects(items).pods}
    assert pods["web-abc-1"].workload == Workload("shop", "Deployment", "web")
    assert pods["web-abc-1"].owner_kind == "Deployment"
    assert pods["bare-rs-1"].workload == Workload("shop", "ReplicaSet", "bare-rs")
    assert pods["db-0"].workload == Workload("shop", "StatefulSet", "db")
    assert pods["proxy-x"].follows_node
    assert pods["nightly-123-x"].workload == Workload("shop", "CronJob", "nightly")
    assert pods["nightly-123-x"].owner_kind == "Job"
    assert pods["static-n1"].owner_kind == "Node" and pods["static-n1"].follows_node
    assert pods["lonely"].workload == Workload("shop", "Pod", "lonely")
    assert pods["lonely"].owner_kind == ""


def test_an_owner_that_is_not_the_controller_makes_no_workload() -> None:
    """Only the reference marked controller names the workload (Kubernetes' GetControllerOf):
    a ReplicaSet that merely owns a pod re-creates nothing, so the pod is bare."""
    adopted = _pod("adopted", "n1", meta={"ownerReferences": [{"kind": "ReplicaSet", "name": "r"}]})
    (pod,) = cluster_from_objects([_node("n1"), adopted]).pods
    assert pod.workload == Workload("shop", "Pod", "adopted")
    assert pod.owner_kind == ""


def test_finished_and_terminating_pods_are_ignored() -> None:
    items = [
        _node("n1"),
        _pod("done", "n1", status={"phase": "Succeeded"}),
        _pod("failed", "n1", status={"phase": "Failed"}),
        _pod("leaving", "n1", meta={"deletionTimestamp": "2024-01-01T00:00:00Z"}),
        _pod("pending", None, status={"phase": "Pending"}),
    ]
    pods = cluster_from_objects(items).pods
    assert [p.name for p in pods] == ["pending"]
    assert pods[0].node is None


def test_effective_requests_follow_kubernetes_rules() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}},
            {"resources": {"requests": {"cpu": "200m"}}},
            {"resources": {}},
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "1", "memory": "10Mi"}}},
            {"resources": {"requests": {"memory": "500Mi"}}},
        ],
        "overhead": {"cpu": "10m", "memory": "1Mi"},
    }
    # max(sum of containers, largest init container) per resource, plus overhead
    assert effective_requests(spec) == Resources(1000 + 10, (500 + 1) * 2**20)


def test_sidecar_init_containers_add_to_the_running_sum() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "300m"}}}],
        "initContainers": [
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"resources": {"requests": {"cpu": "350m"}}},
        ],
    }
    # running: 300 + 100 (sidecar) = 400; init step: 100 (sidecar) + 350 = 450
    assert effective_requests(spec).cpu == 450


def test_constraints_are_parsed() -> None:
    spec = {
        "nodeSelector": {"pool": "a"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "topology.kubernetes.io/zone",
                    },
                ]
            },
        },
    }
    constraints = (
        cluster_from_objects([_node("n1"), _pod("p", "n1", spec=spec)]).pods[0].constraints
    )
    assert constraints.node_selector == (("pool", "a"),)
    assert constraints.tolerations[0].value == "db"
    assert constraints.node_affinity[0][0].values == ("b",)
    hostname, zone = constraints.anti_affinity
    assert (hostname.topology_key, zone.topology_key) == (HOSTNAME, ZONE)
    assert hostname.namespaces == zone.namespaces == ("shop",)


def test_pdb_and_hpa_are_read() -> None:
    items = [
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0},
        },
        {
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5},
        },
    ]
    cluster = cluster_from_objects(items)
    assert cluster.pdbs[0].disruptions_allowed == 0
    assert cluster.hpa_targets == {Workload("shop", "Deployment", "web")}


def _hpa(metrics: list[dict[str, Any]], current: list[dict[str, Any]]) -> dict[str, Any]:
    """An autoscaling/v2 HPA as ``kubectl get hpa -o json`` shows it (status trimmed)."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop", "uid": "3f1c"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 10,
            "metrics": metrics,
        },
        "status": {
            "currentReplicas": 2,
            "desiredReplicas": 2,
            "lastScaleTime": "2026-12-06T17:42:10Z",
            "currentMetrics": current,
            "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}],
        },
    }


def _resource(name: str, part: str, **value: Any) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": name, part: value}}


def test_an_hpas_current_utilisation_over_its_target_is_read() -> None:
    cpu = _resource("cpu", "target", type="Utilization", averageUtilization=60)
    memory = _resource("memory", "target", type="Utilization", averageUtilization=80)
    now = [
        _resource("cpu", "current", averageUtilization=15, averageValue="75m"),
        _resource("memory", "current", averageUtilization=40, averageValue="205Mi"),
    ]
    (hpa,) = cluster_from_objects([_hpa([cpu, memory], now)]).hpas
    assert (hpa.min_replicas, hpa.max_replicas, hpa.usage_ratio) == (2, 10, 0.5)  # memory's
    (hpa,) = cluster_from_objects([pruned("HorizontalPodAutoscaler", _hpa([cpu], now))]).hpas
    assert hpa.usage_ratio == 0.25  # pruning keeps what the ratio is read from


@pytest.mark.parametrize(
    ("metrics", "current"),
    [
        ([], []),  # no metric in the spec
        ([_resource("cpu", "target", type="Utilization", averageUtilization=60)], []),
        (  # a target in absolute units
            [_resource("cpu", "target", type="AverageValue", averageValue="500m")],
            [_resource("cpu", "current", averageValue="75m")],
        ),
        (  # a metric of another type beside the CPU's
            [
                _resource("cpu", "target", type="Utilization", averageUtilization=60),
                {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {}}},
            ],
            [_resource("cpu", "current", averageUtilization=15)],
        ),
        (  # a status that is not a list
            [_resource("cpu", "target", type="Utilization", averageUtilization=60)],
            "garbled",
        ),
    ],
)
def test_an_hpa_without_a_usable_current_utilisation_has_no_ratio(
    metrics: list[dict[str, Any]], current: Any
) -> None:
    (hpa,) = cluster_from_objects([_hpa(metrics, current)]).hpas
    assert hpa.usage_ratio is None and hpa.max_replicas == 10


def test_pods_on_unknown_nodes_are_rejected() -> None:
    with pytest.raises(InputError, match=r"pod shop/p is on unknown node 'ghost'"):
        cluster_from_objects([_node("n1"), _pod("p", "ghost")])


def test_malformed_objects_are_named() -> None:
    bad = _node("n1")
    bad["status"]["capacity"]["cpu"] = "lots"
    with pytest.raises(InputError, match=r"node 'n1': invalid quantity 'lots'"):
        cluster_from_objects([bad])
    with pytest.raises(InputError, match=r"node 'n2': status.capacity lacks cpu or memory"):
        cluster_from_objects([{"kind": "Node", "metadata": {"name": "n2"}, "status": {}}])
    with pytest.raises(InputError, match=r"item 0 has no 'kind'"):
        cluster_from_objects([{"metadata": {}}])


def test_load_dump_reports_bad_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_dump(broken)
    not_a_list = tmp_path / "obj.json"
    not_a_list.write_text(json.dumps({"kind": "Pod"}))
    with pytest.raises(InputError, match="not a Kubernetes List"):
        load_dump(not_a_list)
    with pytest.raises(InputError, match="cannot read dump"):
        load_dump(tmp_path / "missing.json")


def test_the_shipped_example_loads() -> None:
    cluster = load_dump(EXAMPLE)
    assert len(cluster.nodes) == 6
    kinds = {p.owner_kind for p in cluster.pods}
    assert {"Deployment", "StatefulSet", "DaemonSet"} <= kinds
    assert cluster.pdbs and cluster.hpas
