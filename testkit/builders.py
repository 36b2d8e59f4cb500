"""Terse builders of domain values for tests."""

from __future__ import annotations

from types import MappingProxyType

from tuner.model.cluster import Cluster, Node, Pdb, Pod, Workload
from tuner.model.constraints import Constraints, Taint
from tuner.model.quantity import cpu_millis, memory_bytes
from tuner.model.resources import Resources

OWNER_OF_KIND = {"Deployment": "Deployment", "ReplicaSet": "ReplicaSet"}


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    *,
    allocatable: tuple[str, str] | None = None,
    max_pods: int = 110,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    unschedulable: bool = False,
    instance_type: str | None = None,
) -> Node:
    """A node; allocatable defaults to capacity."""
    capacity = Resources(cpu_millis(cpu), memory_bytes(memory))
    alloc = (
        Resources(cpu_millis(allocatable[0]), memory_bytes(allocatable[1]))
        if allocatable
        else capacity
    )
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if instance_type:
        all_labels["node.kubernetes.io/instance-type"] = instance_type
    return Node(
        name=name,
        capacity=capacity,
        allocatable=alloc,
        max_pods=max_pods,
        labels=MappingProxyType(all_labels),
        annotations=MappingProxyType(annotations or {}),
        taints=taints,
        unschedulable=unschedulable,
    )


def pod(
    name: str,
    on: str | None,
    cpu: str = "100m",
    memory: str = "128Mi",
    *,
    workload: str | None = None,
    kind: str = "Deployment",
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    constraints: Constraints | None = None,
) -> Pod:
    """A pod of ``namespace/kind/workload`` (workload defaults to the name before the last '-')."""
    workload_name = workload or name.rsplit("-", 1)[0]
    return Pod(
        namespace=namespace,
        name=name,
        node=on,
        requests=Resources(cpu_millis(cpu), memory_bytes(memory)),
        workload=Workload(namespace, kind if kind != "ReplicaSet" else "ReplicaSet", workload_name),
        owner_kind=kind,
        labels=MappingProxyType({"app": workload_name, **(labels or {})}),
        annotations=MappingProxyType(annotations or {}),
        constraints=constraints or Constraints(),
    )


def cluster(nodes: list[Node], pods: list[Pod], pdbs: tuple[Pdb, ...] = ()) -> Cluster:
    """A cluster value."""
    return Cluster(nodes=tuple(nodes), pods=tuple(pods), pdbs=pdbs)
