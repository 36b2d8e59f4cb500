"""What the knowledge base stores: an execution (a stable deployment over one window)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuner.model.cluster import Cluster, Workload
from tuner.model.load import SCALAR, Load, load_from_json
from tuner.model.movability import Movability
from tuner.model.price import node_price
from tuner.settings import Pricing

LoadVector = tuple[tuple[str, float], ...]
"""A load per dimension, sorted by key; empty for a scalar load."""


def load_vector(load: Load) -> LoadVector:
    """What an execution keeps of the load it served besides the total: ``()`` for a scalar
    load, every dimension (sorted) for a vector."""
    return () if load.is_scalar else tuple(sorted(load.values.items()))


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
    load_vector: LoadVector = ()
    """The load per dimension when the monitor measured a vector (sorted by key, ``load`` is
    its total); empty when the load was a scalar, which then is ``load`` itself. Executions
    recorded before vectors were kept have none: they served a scalar load."""

    @property
    def served(self) -> Mapping[str, float]:
        """The load served per dimension: ``{"": load}`` for a scalar load."""
        return dict(self.load_vector) if self.load_vector else {SCALAR: self.load}

    @property
    def rank(self) -> tuple[float, float, str]:
        """The order of a lookup: cheapest first, ties by lower cpu_ratio, then by id."""
        return (self.cost, self.cpu_ratio, self.id)

    def to_json(self) -> dict[str, Any]:
        """A plain JSON-able form (export, embedded storage); ``load_vector`` (an object, one
        number per dimension) only for a vector load."""
        vector = {"load_vector": dict(self.load_vector)} if self.load_vector else {}
        return {
            "id": self.id,
            "start": self.start,
            "end": self.end,
            "load": self.load,
            **vector,
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
            load_vector=_load_vector_from_json(data.get("load_vector")),
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


def _load_vector_from_json(data: Any) -> LoadVector:
    """``load_vector`` of :meth:`Execution.to_json` (absent: a scalar load)."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise TypeError(f"load_vector is {data!r}, not an object")
    return load_vector(load_from_json(data))


def execution_of(
    cluster: Cluster,
    movability: Movability,
    pricing: Pricing,
    load: Load | float,
    start: float,
    end: float,
) -> Execution:
    """Describe a stable cluster as an execution; its id is a hash of its content.

    A number is a scalar load. The id covers the load vector only when there is one, so an
    execution of a scalar load gets the id it got before load vectors were kept.
    """
    served = load if isinstance(load, Load) else Load.scalar(load)
    vector = load_vector(served)
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
        "load": served.total,
        "nodes": [(n.name, n.pods) for n in nodes],
        **({"load_vector": dict(vector)} if vector else {}),
    }
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return Execution(
        id=digest,
        start=start,
        end=end,
        load=served.total,
        load_vector=vector,
        cost=sum(n.price for n in nodes),
        cpu_ratio=sum(ratios) / len(ratios) if ratios else 0.0,
        nodes=tuple(nodes),
        workloads=tuple(sorted(types.values(), key=lambda w: w.workload)),
    )
