"""What the knowledge base stores: an execution (a stable deployment over one window)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from tuner.analyse.cost import node_price
from tuner.model.cluster import Cluster, Workload
from tuner.model.movability import Movability
from tuner.settings import Pricing


@dataclass(frozen=True, slots=True)
class WorkloadType:
    """A pod type (the thesis' Pod vertex): one per workload, shared by executions."""

    workload: str
    """``namespace/Kind/name``."""
    cpu: int
    memory: int
    movable: bool

    @property
    def ref(self) -> Workload:
        """The workload as a value."""
        return Workload.parse(self.workload)


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node of an execution and how many pods of each workload it ran."""

    name: str
    cpu: int
    memory: int
    instance_type: str
    price: float
    pods: tuple[tuple[str, int], ...]
    """(workload, count), sorted; DaemonSet and mirror pods are not listed."""

    @property
    def shape(self) -> tuple[str, int, int]:
        """Instance type and capacity: only nodes of one shape can stand for each other."""
        return (self.instance_type, self.cpu, self.memory)


@dataclass(frozen=True, slots=True)
class Execution:
    """A stable deployment, the window it was stable in (epoch seconds), its load and cost."""

    id: str
    start: float
    end: float
    load: float
    cost: float
    cpu_ratio: float
    """Average over nodes of requested/allocatable CPU (tie-break: lower is more resilient)."""
    nodes: tuple[NodeState, ...]
    workloads: tuple[WorkloadType, ...]

    @property
    def rank(self) -> tuple[float, float, str]:
        """The order of a lookup: cheapest first, ties by lower cpu_ratio, then by id."""
        return (self.cost, self.cpu_ratio, self.id)

    def to_json(self) -> dict[str, Any]:
        """A plain JSON-able form (export, embedded storage)."""
        return {
            "id": self.id,
            "start": self.start,
            "end": self.end,
            "load": self.load,
            "cost": self.cost,
            "cpu_ratio": self.cpu_ratio,
            "nodes": [
                {
                    "name": n.name,
                    "cpu": n.cpu,
                    "memory": n.memory,
                    "type": n.instance_type,
                    "price": n.price,
                    "pods": dict(n.pods),
                }
                for n in self.nodes
            ],
            "workloads": [
                {"workload": w.workload, "cpu": w.cpu, "memory": w.memory, "movable": w.movable}
                for w in self.workloads
            ],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Execution:
        """Inverse of :meth:`to_json`; raises ValueError/KeyError/TypeError on malformed data."""
        return Execution(
            id=str(data["id"]),
            start=float(data["start"]),
            end=float(data["end"]),
            load=float(data["load"]),
            cost=float(data["cost"]),
            cpu_ratio=float(data["cpu_ratio"]),
            nodes=tuple(
                NodeState(
                    name=str(n["name"]),
                    cpu=int(n["cpu"]),
                    memory=int(n["memory"]),
                    instance_type=str(n.get("type", "")),
                    price=float(n["price"]),
                    pods=tuple(sorted((str(w), int(c)) for w, c in n["pods"].items())),
                )
                for n in data["nodes"]
            ),
            workloads=tuple(
                WorkloadType(
                    str(w["workload"]), int(w["cpu"]), int(w["memory"]), bool(w["movable"])
                )
                for w in data["workloads"]
            ),
        )


def execution_of(
    cluster: Cluster,
    movability: Movability,
    pricing: Pricing,
    load: float,
    start: float,
    end: float,
) -> Execution:
    """Describe a stable cluster as an execution; its id is a hash of its content."""
    nodes = []
    types: dict[Workload, WorkloadType] = {}
    ratios = []
    for node in cluster.nodes:
        pods = [p for p in cluster.pods_by_node[node.name] if not p.follows_node]
        for pod in pods:
            known = types.get(pod.workload)
            movable = movability.movable(pod) and (known is None or known.movable)
            types[pod.workload] = WorkloadType(
                str(pod.workload), pod.requests.cpu, pod.requests.memory, movable
            )
        counts = Counter(str(p.workload) for p in pods)
        nodes.append(
            NodeState(
                name=node.name,
                cpu=node.capacity.cpu,
                memory=node.capacity.memory,
                instance_type=node.instance_type,
                price=node_price(node, pricing),
                pods=tuple(sorted(counts.items())),
            )
        )
        used = cluster.requested(node.name).cpu
        ratios.append(used / node.allocatable.cpu if node.allocatable.cpu else 0.0)
    body = {
        "start": start,
        "end": end,
        "load": load,
        "nodes": [(n.name, n.pods) for n in nodes],
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return Execution(
        id=digest,
        start=start,
        end=end,
        load=load,
        cost=sum(n.price for n in nodes),
        cpu_ratio=sum(ratios) / len(ratios) if ratios else 0.0,
        nodes=tuple(nodes),
        workloads=tuple(sorted(types.values(), key=lambda w: w.workload)),
    )
