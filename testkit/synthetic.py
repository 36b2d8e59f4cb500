"""Synthetic clusters in the exact JSON form of ``kubectl get ... -A -o json``.

For the shipped example, the benchmarks and tests: nodes with real capacities and allocatable,
Deployments (with their ReplicaSets), StatefulSets, DaemonSets, PDBs and HPAs, and pods placed
the way kube-scheduler's default LeastAllocated scoring spreads them (which is what leaves real
clusters fragmented).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from tuner.model.cluster import Cluster, Node, Pod, Workload
from tuner.model.constraints import (
    HOSTNAME_KEY,
    ZONE_KEY,
    Constraints,
    LabelSelector,
    PodAffinityTerm,
    SpreadConstraint,
    Toleration,
    freeze_labels,
)
from tuner.model.quantity import GIB, format_cpu, format_memory
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot

MIB = 2**20


@dataclass(frozen=True)
class NodeType:
    """An instance type: capacity and what the kubelet reserves."""

    name: str
    cpu: int
    memory: int
    reserved_cpu: int
    reserved_memory: int
    max_pods: int = 110


E2_STANDARD_4 = NodeType("e2-standard-4", 4000, 16 * GIB, 80, 2764 * MIB)
E2_STANDARD_8 = NodeType("e2-standard-8", 8000, 32 * GIB, 90, 3788 * MIB)
N2_STANDARD_16 = NodeType("n2-standard-16", 16000, 64 * GIB, 110, 5836 * MIB)


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload to generate: kind is Deployment, StatefulSet or DaemonSet."""

    namespace: str
    name: str
    kind: str
    replicas: int
    cpu: int
    memory: int
    hpa: bool = False
    hpa_utilization: int | None = None
    """The HPA's last measured CPU utilisation, in percent of requests (its
    ``status.currentMetrics``); None: the HPA reports none yet."""
    pdb_min_available: int | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    anti_affinity: bool = False
    spread: bool = False
    """Spread over zones (``maxSkew: 1``, ``DoNotSchedule``) and, softly, over nodes
    (``maxSkew: 1``, ``ScheduleAnyway``)."""
    volume: bool = False
    """Each pod mounts a claim bound to a zonal PersistentVolume in its node's zone."""


@dataclass(frozen=True)
class NodeSpec:
    """A node to generate."""

    name: str
    type: NodeType
    zone: str = "europe-west1-b"
    labels: dict[str, str] = field(default_factory=dict)


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{namespace or ''}-{name}"}
    if namespace:
        meta["namespace"] = namespace
    meta.update({k: v for k, v in extra.items() if v})
    return meta


def _owner(kind: str, name: str, namespace: str) -> list[dict[str, Any]]:
    api = "apps/v1"
    return [
        {
            "apiVersion": api,
            "kind": kind,
            "name": name,
            "uid": f"uid-{namespace}-{name}",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _node_labels(spec: NodeSpec) -> dict[str, str]:
    return {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": spec.type.name,
        "topology.kubernetes.io/zone": spec.zone,
        **spec.labels,
    }


def _node(spec: NodeSpec) -> dict[str, Any]:
    t = spec.type
    labels = _node_labels(spec)
    capacity = {
        "cpu": format_cpu(t.cpu),
        "memory": format_memory(t.memory),
        "pods": str(t.max_pods),
    }
    allocatable = {
        "cpu": format_cpu(t.cpu - t.reserved_cpu),
        "memory": format_memory(t.memory - t.reserved_memory),
        "pods": str(t.max_pods),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(spec.name, labels=labels),
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _template_spec(w: WorkloadSpec) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": w.name,
                "image": f"registry.example/{w.name}:1.0",
                "resources": {
                    "requests": {"cpu": format_cpu(w.cpu), "memory": format_memory(w.memory)}
                },
            }
        ]
    }
    if w.node_selector:
        spec["nodeSelector"] = dict(w.node_selector)
    if w.kind == "DaemonSet":
        spec["tolerations"] = [{"operator": "Exists"}]
    if w.spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": w.name}},
            }
            for key, when in ((ZONE_KEY, "DoNotSchedule"), (HOSTNAME_KEY, "ScheduleAnyway"))
        ]
    if w.anti_affinity:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": w.name}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return spec


class _Scheduler:
    """kube-scheduler's LeastAllocated choice among the nodes the scheduling simulation finds
    feasible (every fit rule: resources, pod slots, nodeSelector, anti-affinity, ...)."""

    def __init__(self, nodes: list[NodeSpec], workloads: list[WorkloadSpec]) -> None:
        self.templates = {(w.namespace, w.name): _template_pod(w) for w in workloads}
        cluster = Cluster(nodes=tuple(_model_node(n) for n in nodes), pods=())
        self.snapshot = Snapshot(cluster, arriving=self.templates.values())
        self.names = [n.name for n in nodes]
        self.index = {name: i for i, name in enumerate(self.names)}

    def place(self, w: WorkloadSpec, node: int | None = None) -> int | None:
        """Bind one pod of ``w`` to ``node``, or to the feasible node LeastAllocated picks."""
        snap = self.snapshot
        pod = self.templates[(w.namespace, w.name)]
        if node is None:
            mask = snap.fit_mask(pod)
            if not mask.any():
                return None
            node = self.index[snap.least_allocated(pod, mask)]
        snap.place(pod, self.names[node])
        return node


def _model_node(spec: NodeSpec) -> Node:
    t = spec.type
    return Node(
        name=spec.name,
        capacity=Resources(t.cpu, t.memory),
        allocatable=Resources(t.cpu - t.reserved_cpu, t.memory - t.reserved_memory),
        max_pods=t.max_pods,
        labels=_node_labels(spec),
    )


def _template_pod(w: WorkloadSpec) -> Pod:
    """What the scheduling simulation needs of one pod of ``w``."""
    own = LabelSelector((("app", w.name),))
    anti = PodAffinityTerm(own, (w.namespace,))
    spread = (
        SpreadConstraint(1, ZONE_KEY, own),
        SpreadConstraint(1, HOSTNAME_KEY, own, hard=False),
    )
    constraints = Constraints(
        tolerations=(Toleration(operator="Exists"),) if w.kind == "DaemonSet" else (),
        node_selector=freeze_labels(w.node_selector),
        anti_affinity=(anti,) if w.anti_affinity else (),
        spread=spread if w.spread else (),
    )
    workload = Workload(w.namespace, w.kind, w.name)
    return Pod(
        w.namespace,
        w.name,
        None,
        Resources(w.cpu, w.memory),
        workload,
        w.kind,
        labels={"app": w.name},
        constraints=constraints,
    )


def _pod(w: WorkloadSpec, index: int, node: str, owner: tuple[str, str]) -> dict[str, Any]:
    suffix = f"{index}" if w.kind == "StatefulSet" else f"{index:05x}"
    labels = {"app": w.name}
    spec = {**_template_spec(w), "nodeName": node}
    if w.volume:
        claim = f"data-{owner[1]}-{suffix}"
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(
            f"{owner[1]}-{suffix}",
            w.namespace,
            labels=labels,
            annotations=dict(w.annotations),
            ownerReferences=_owner(owner[0], owner[1], w.namespace),
        ),
        "spec": spec,
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def generate(nodes: list[NodeSpec], workloads: list[WorkloadSpec], seed: int = 0) -> dict[str, Any]:
    """A kubectl ``List`` with the nodes, the workloads' objects and their placed pods."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [_node(n) for n in nodes]
    scheduler = _Scheduler(nodes, workloads)
    pods: list[dict[str, Any]] = []
    arrivals: list[tuple[WorkloadSpec, int]] = []
    for w in workloads:
        items += _controllers(w)
        if w.kind == "DaemonSet":
            for i, spec in enumerate(nodes):
                scheduler.place(w, i)
                pods.append(_pod(w, i, spec.name, ("DaemonSet", w.name)))
        else:
            arrivals += [(w, i) for i in range(w.replicas)]
    rng.shuffle(arrivals)
    for w, i in arrivals:
        placed = scheduler.place(w)
        if placed is None:
            continue
        owner = (
            ("StatefulSet", w.name)
            if w.kind == "StatefulSet"
            else ("ReplicaSet", f"{w.name}-7d4b9c")
        )
        pods.append(_pod(w, i, nodes[placed].name, owner))
        if w.volume:
            pods += _volume(pods[-1], nodes[placed].zone)
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": items + pods,
    }


def _volume(pod: dict[str, Any], zone: str) -> list[dict[str, Any]]:
    """The claim the pod mounts and the zonal PersistentVolume it is bound to."""
    namespace = pod["metadata"]["namespace"]
    claim = pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    volume = f"pv-{namespace}-{claim}"
    size = {"storage": "10Gi"}
    terms = [{"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [zone]}]}]
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(claim, namespace),
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": size},
                "storageClassName": "standard-rwo",
                "volumeName": volume,
            },
            "status": {"phase": "Bound"},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": _meta(volume, labels={ZONE_KEY: zone}),
            "spec": {
                "capacity": size,
                "accessModes": ["ReadWriteOnce"],
                "claimRef": {"namespace": namespace, "name": claim},
                "storageClassName": "standard-rwo",
                "nodeAffinity": {"required": {"nodeSelectorTerms": terms}},
            },
            "status": {"phase": "Bound"},
        },
    ]


def _controllers(w: WorkloadSpec) -> list[dict[str, Any]]:
    """The workload's controller objects (and its PDB and HPA)."""
    template = {"metadata": {"labels": {"app": w.name}}, "spec": _template_spec(w)}
    selector = {"matchLabels": {"app": w.name}}
    objects: list[dict[str, Any]] = []
    if w.kind == "Deployment":
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": _meta(w.name, w.namespace, generation=1),
                "spec": {"replicas": w.replicas, "selector": selector, "template": template},
                "status": {
                    "replicas": w.replicas,
                    "readyReplicas": w.replicas,
                    "observedGeneration": 1,
                },
            }
        )
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": _meta(
                    f"{w.name}-7d4b9c",
                    w.namespace,
                    ownerReferences=_owner("Deployment", w.name, w.namespace),
                ),
                "spec": {"replicas": w.replicas, "selector": selector, "template": template},
                "status": {"replicas": w.replicas},
            }
        )
    else:
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": w.kind,
                "metadata": _meta(w.name, w.namespace),
                "spec": {"selector": selector, "template": template}
                | ({"replicas": w.replicas} if w.kind == "StatefulSet" else {}),
                "status": {},
            }
        )
    if w.pdb_min_available is not None:
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(f"{w.name}-pdb", w.namespace),
                "spec": {"minAvailable": w.pdb_min_available, "selector": selector},
                "status": {
                    "disruptionsAllowed": max(w.replicas - w.pdb_min_available, 0),
                    "currentHealthy": w.replicas,
                    "desiredHealthy": w.pdb_min_available,
                    "expectedPods": w.replicas,
                },
            }
        )
    if w.hpa:
        objects.append(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": _meta(w.name, w.namespace),
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": w.kind, "name": w.name},
                    "minReplicas": 1,
                    "maxReplicas": max(w.replicas * 3, 10),
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 70},
                            },
                        }
                    ],
                },
                "status": _hpa_status(w),
            }
        )
    return objects


def _hpa_status(w: WorkloadSpec) -> dict[str, Any]:
    """The HPA's status: its replicas and, when measured, its CPU utilisation."""
    status: dict[str, Any] = {"currentReplicas": w.replicas, "desiredReplicas": w.replicas}
    if w.hpa_utilization is not None:
        current = {"averageUtilization": w.hpa_utilization}
        status["currentMetrics"] = [
            {"type": "Resource", "resource": {"name": "cpu", "current": current}}
        ]
    return status


def random_cluster(
    nodes: int, pods_per_node: int = 30, seed: int = 0, spread_share: float = 0.0
) -> dict[str, Any]:
    """A large, realistic random cluster (~``pods_per_node`` pods per node, ~60 % requested).

    Mixed node types, many Deployments (some with HPAs, each measured between 40 and 90 % of
    its pods' CPU requests against a 70 % target, and PDBs), a few StatefulSets and two
    DaemonSets on every node; used by the benchmarks. With ``spread_share``, the nodes are in
    three zones and that share of the Deployments spreads over them (and softly over nodes).
    """
    rng = random.Random(seed)
    types = [E2_STANDARD_8, E2_STANDARD_8, N2_STANDARD_16]
    specs = [NodeSpec(f"node-{i:05d}", rng.choice(types)) for i in range(nodes)]
    if spread_share:
        specs = [replace(s, zone=f"europe-west1-{'bcd'[i % 3]}") for i, s in enumerate(specs)]
    spreading = random.Random(seed + 1)
    measuring = random.Random(seed + 2)
    daemonsets = [
        WorkloadSpec("kube-system", "kube-proxy", "DaemonSet", 0, 100, 64 * MIB),
        WorkloadSpec("logging", "fluent-bit", "DaemonSet", 0, 50, 100 * MIB),
    ]
    capacity = sum(s.type.cpu - s.type.reserved_cpu for s in specs)
    target_pods = nodes * (pods_per_node - len(daemonsets))
    budget = capacity * 0.6 - nodes * 150
    average = max(int(budget / max(target_pods, 1)), 20)
    workloads: list[WorkloadSpec] = list(daemonsets)
    remaining = target_pods
    index = 0
    while remaining > 0:
        replicas = min(remaining, rng.randint(20, 400))
        stateful = index % 25 == 3
        cpu = max(10, int(rng.lognormvariate(0, 0.5) * average) // 10 * 10)
        memory = max(32 * MIB, int(cpu * rng.uniform(2, 6)) * MIB // 64 * 64)
        scaled = not stateful and index % 3 == 0
        workloads.append(
            WorkloadSpec(
                namespace=f"team-{index % 12}",
                name=f"svc-{index}",
                kind="StatefulSet" if stateful else "Deployment",
                replicas=replicas,
                cpu=cpu,
                memory=memory,
                hpa=scaled,
                hpa_utilization=measuring.randint(40, 90) if scaled else None,
                pdb_min_available=replicas // 2 if index % 4 == 1 else None,
                spread=not stateful and spreading.random() < spread_share,
            )
        )
        remaining -= replicas
        index += 1
    return generate(specs, workloads, seed)
