"""A simulator scenario as Kubernetes API objects (plain dicts; no I/O).

Every simulated service becomes its workload (Deployment, StatefulSet or DaemonSet) with the
service's requests, one container, no grace period, the labels ``app`` and
``replay.tuner.dev/service``, and (but DaemonSets) the tuner's onboarding: the preferred node
affinity to its ``tuner.dev/<namespace>.<name>`` label that the simulator's scheduler scores.
An HPA (``autoscaling/v2``, CPU utilisation of requests at the service's target, the
controller's default behaviour) where the service has one, a PodDisruptionBudget
(``maxUnavailable``) where it has one. DaemonSets tolerate every taint, as the simulator's do.
Fixed node pools become KWOK nodes with the simulator's capacity and allocatable and its pool
and instance-type labels. For Karpenter, the pools' node types become its KWOK provider's
instance types (allocatable matched to the simulator's, one zone, on-demand at the scenario's
price), one NodePool offering them all (the scenario's ``karpenter`` consolidation policy and
``consolidateAfter``, by default ``WhenEmptyOrUnderutilized`` and ``0s``; the default 10 %
budget; as the simulator models it), a KWOKNodeClass whose
``nodeRegistrationDelay`` is the simulator's node start-up, and one NodeClaim per initial node
(so that Karpenter owns the nodes a run starts with, as the simulated Karpenter does).
"""

from __future__ import annotations

import re
from typing import Any

from testkit.cluster_fixture import kwok_node as fixture_node
from tuner.execute.affinity import with_preference
from tuner.model.conventions import DEFAULT_PREFIX, POOL_LABEL_BY_SYSTEM, Keys
from tuner.sim.engine import Scenario
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NodeType
from tuner.sim.state import pool_labels
from tuner.sim.workloads import Service

SERVICE_LABEL = f"replay.{DEFAULT_PREFIX}/service"
"""Every replayed pod's label: ``<namespace>.<name>`` of its simulated service."""
USAGE_CPU = "kwok.x-k8s.io/usage-cpu"
"""The pod annotation KWOK's default ClusterResourceUsage reads a pod's CPU usage from."""
METRICS_PATH = "metrics.k8s.io/resource-metrics-path"
"""The node annotation metrics-server scrapes a node's resource metrics at instead of the
kubelet's ``/metrics/resource``."""
NODEPOOL = "default"
NODECLASS = "default"
ZONE = "zone-a"
KUBE_RESERVED_CPU = 100
"""Millicores Karpenter's KWOK provider subtracts from an instance type's CPU (its
``KubeReserved`` overhead), so the instance type is given that much more."""
KUBE_RESERVED_MEMORY = 10 * 2**20
KARPENTER_API = "karpenter.sh/v1"
KWOK_API = "karpenter.kwok.sh/v1alpha1"


def service_key(service: Service) -> str:
    """How the replay names a simulated service: ``namespace.name`` (a label value)."""
    return f"{service.namespace}.{service.name}"


def object_name(service: Service) -> str:
    """The workload's object name (the service's name; DNS-1123 already)."""
    return service.name


def _quantity_cpu(millis: int | float) -> str:
    return f"{round(millis)}m"


def _pod_template(service: Service, tolerate_all: bool = False) -> dict[str, Any]:
    labels = {"app": service.name, SERVICE_LABEL: service_key(service)}
    # A request of 0 is the simulator's "none set" (as the apps' manifests leave it), which
    # kube-scheduler scores at its non-zero defaults; an explicit 0 it would score as 0.
    requests = {
        name: value
        for name, value, given in (
            ("cpu", _quantity_cpu(service.cpu), service.cpu),
            ("memory", str(service.memory), service.memory),
        )
        if given
    }
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "fake", "resources": {"requests": requests}}],
        "terminationGracePeriodSeconds": 0,
    }
    if tolerate_all:
        spec["tolerations"] = [{"operator": "Exists"}]
    else:  # onboarded, as the simulator's scheduler assumes every workload is
        spec["affinity"] = with_preference(
            None, Keys().workload_label(service.namespace, service.name)
        )
    return {"metadata": {"labels": labels}, "spec": spec}


def workload(service: Service) -> dict[str, Any]:
    """The service's Deployment, StatefulSet or DaemonSet."""
    selector = {"matchLabels": {SERVICE_LABEL: service_key(service)}}
    meta = {"name": object_name(service), "namespace": service.namespace}
    if service.kind == "DaemonSet":
        return {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta,
            "spec": {"selector": selector, "template": _pod_template(service, tolerate_all=True)},
        }
    spec: dict[str, Any] = {
        "replicas": service.replicas,
        "selector": selector,
        "template": _pod_template(service),
    }
    if service.kind == "StatefulSet":
        spec |= {"serviceName": object_name(service), "podManagementPolicy": "Parallel"}
    return {"apiVersion": "apps/v1", "kind": service.kind, "metadata": meta, "spec": spec}


def hpa(service: Service, downscale_s: float | None = None) -> dict[str, Any] | None:
    """The service's HorizontalPodAutoscaler (CPU utilisation of requests), or None; with
    ``downscale_s``, that scale-down stabilisation window instead of the default 300 s (the
    smoke test's, to keep it short)."""
    if service.hpa is None:
        return None
    behavior = (
        {}
        if downscale_s is None
        else {"behavior": {"scaleDown": {"stabilizationWindowSeconds": round(downscale_s)}}}
    )
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": object_name(service), "namespace": service.namespace},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": service.kind,
                "name": object_name(service),
            },
            "minReplicas": service.hpa.min_replicas,
            "maxReplicas": service.hpa.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {
                            "type": "Utilization",
                            "averageUtilization": round(service.hpa.target * 100),
                        },
                    },
                }
            ],
            **behavior,
        },
    }


def pdb(service: Service) -> dict[str, Any] | None:
    """The service's PodDisruptionBudget (``maxUnavailable``), or None."""
    if service.pdb_max_unavailable is None:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": object_name(service), "namespace": service.namespace},
        "spec": {
            "maxUnavailable": service.pdb_max_unavailable,
            "selector": {"matchLabels": {SERVICE_LABEL: service_key(service)}},
        },
    }


def metrics_path(node: str) -> str:
    """Where KWOK serves a node's resource metrics (its Metric ``metrics-resource``)."""
    return f"/metrics/nodes/{node}/metrics/resource"


def namespaces(scenario: Scenario) -> list[str]:
    """Every namespace the scenario's workloads use but ``kube-system``, sorted."""
    used = {s.namespace for s in (*scenario.services, *scenario.daemonsets)}
    return sorted(used - {"kube-system", "default"})


def workload_objects(scenario: Scenario, downscale_s: float | None = None) -> list[dict[str, Any]]:
    """Namespaces, then each service's workload, HPA (``downscale_s``: see :func:`hpa`) and
    PodDisruptionBudget; DaemonSets last."""
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in namespaces(scenario)
    ]
    for service in scenario.services:
        out.append(workload(service))
        out += [o for o in (hpa(service, downscale_s), pdb(service)) if o is not None]
    out += [workload(d) for d in scenario.daemonsets]
    return out


def node_labels(scenario: Scenario, pool: NodeGroup) -> dict[str, str]:
    """The labels a node of ``pool`` carries in the simulator (instance type, pool)."""
    return pool_labels(pool.node_type, pool.name, POOL_LABEL_BY_SYSTEM.get(scenario.system, ""))


def kwok_node(scenario: Scenario, pool: NodeGroup, index: int) -> dict[str, Any]:
    """A fixed pool's KWOK node: the simulator's name, labels, capacity and allocatable, and
    KWOK's resource-metrics path for metrics-server."""
    name = f"{pool.name}-{index:04d}"
    kind = pool.node_type
    alloc = kind.allocatable
    node = fixture_node(
        name,
        _quantity_cpu(alloc.cpu),
        str(alloc.memory),
        kind.max_pods,
        labels=node_labels(scenario, pool),
    )
    node["metadata"]["annotations"][METRICS_PATH] = metrics_path(name)
    node["status"]["capacity"] = {
        "cpu": _quantity_cpu(kind.cpu),
        "memory": str(kind.memory),
        "pods": str(kind.max_pods),
    }
    return {"apiVersion": "v1", "kind": "Node", **node}


def fixed_nodes(scenario: Scenario) -> list[dict[str, Any]]:
    """Every pool's initial nodes as KWOK nodes, numbered as the simulator numbers them."""
    out = []
    index = 0
    for pool in scenario.pools:
        for _ in range(pool.initial_nodes):
            index += 1
            out.append(kwok_node(scenario, pool, index))
    return out


# -- Karpenter -----------------------------------------------------------------------------------


def instance_type(kind: NodeType) -> dict[str, Any]:
    """One entry of the KWOK provider's instance-types file: the type's allocatable plus the
    provider's own kube-reserved overhead (so that its allocatable is the simulator's), its pod
    limit, and one on-demand offering in one zone at the scenario's price."""
    alloc = kind.allocatable
    return {
        "name": kind.name,
        "offerings": [
            {
                "Price": kind.price,
                "Available": True,
                "Requirements": [
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["on-demand"],
                    },
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
                ],
            }
        ],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {
            "cpu": _quantity_cpu(alloc.cpu + KUBE_RESERVED_CPU),
            "memory": str(alloc.memory + KUBE_RESERVED_MEMORY),
            "pods": str(kind.max_pods),
        },
    }


def instance_types(scenario: Scenario) -> list[dict[str, Any]]:
    """The scenario's node types as the KWOK provider's instance types."""
    kinds = {p.node_type.name: p.node_type for p in scenario.pools}
    return [instance_type(k) for _, k in sorted(kinds.items())]


def node_class(startup_s: float) -> dict[str, Any]:
    """The KWOKNodeClass: a new node registers ``startup_s`` after its launch."""
    return {
        "apiVersion": KWOK_API,
        "kind": "KWOKNodeClass",
        "metadata": {"name": NODECLASS},
        "spec": {"nodeRegistrationDelay": f"{startup_s:g}s"},
    }


def _requirements(types: list[str]) -> list[dict[str, Any]]:
    return [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
    ]


def node_pool(scenario: Scenario) -> dict[str, Any]:
    """One NodePool offering every pool's node type, the scenario's disruption settings
    (Karpenter's defaults unless its ``karpenter`` says otherwise) spelled out, no limits (the
    KWOK provider bills a node's capacity as its claim's requests, so a CPU limit would not count
    nodes; the scenarios' pool maximums are not reached)."""
    types = sorted({p.node_type.name for p in scenario.pools})
    return {
        "apiVersion": KARPENTER_API,
        "kind": "NodePool",
        "metadata": {"name": NODEPOOL},
        "spec": {
            "template": {
                "spec": {
                    "requirements": _requirements(types),
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": NODECLASS,
                    },
                    "expireAfter": "Never",
                }
            },
            "disruption": {
                "consolidationPolicy": scenario.karpenter.consolidation_policy,
                "consolidateAfter": f"{scenario.karpenter.consolidate_after:g}s",
                "budgets": [{"nodes": "10%"}],
            },
        },
    }


def node_claims(scenario: Scenario) -> list[dict[str, Any]]:
    """One NodeClaim of the NodePool per initial node of every pool (Karpenter launches them
    and owns them, as the simulated Karpenter owns the nodes a run starts with)."""
    out = []
    index = 0
    for pool in scenario.pools:
        for _ in range(pool.initial_nodes):
            index += 1
            out.append(
                {
                    "apiVersion": KARPENTER_API,
                    "kind": "NodeClaim",
                    "metadata": {
                        "name": f"{_dns(pool.name)}-initial-{index}",
                        "labels": {POOL_LABEL_BY_SYSTEM["karpenter"]: NODEPOOL},
                    },
                    "spec": {
                        # The KWOK provider gives the node its claim's requests as capacity.
                        "resources": {"requests": instance_type(pool.node_type)["resources"]},
                        "requirements": _requirements([pool.node_type.name]),
                        "nodeClassRef": {
                            "group": "karpenter.kwok.sh",
                            "kind": "KWOKNodeClass",
                            "name": NODECLASS,
                        },
                        "expireAfter": "Never",
                    },
                }
            )
    return out


def _dns(name: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-") or "pool"
