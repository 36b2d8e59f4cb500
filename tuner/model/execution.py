"""What the knowledge base stores: an execution (a stable deployment over one window)."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.model.cluster import Cluster, Workload
from tuner.model.load import SCALAR, Load
from tuner.model.movability import Movability
from tuner.model.price import node_price
from tuner.settings import Pricing

MAX_NUMBER = 1e15
"""Largest time, load, cost or ratio an execution may hold (epoch seconds reach 1e15 in
about 30 million years)."""
MAX_WHOLE = 2**63 - 1
"""Largest CPU, memory or count (the integers Neo4j and SQLite hold)."""

LoadVector = tuple[tuple[str, float], ...]
"""A load per dimension, sorted by key; empty for a scalar load."""


def load_vector(load: Load) -> LoadVector:
    """What an execution keeps of the load it served besides the total: ``()`` for a scalar
    load, every dimension (sorted) for a vector."""
    return () if load.is_scalar else tuple(sorted(load.values.items()))


@dataclass(frozen=True, slots=True)
class WorkloadType:
    """A pod type (the thesis' Pod vertex): one per workload, shared by executions."""

    workload: Workload
    cpu: int
    memory: int
    movable: bool


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node of an execution and how many pods of each workload it ran."""

    name: str
    cpu: int
    memory: int
    instance_type: str
    price: float
    pods: tuple[tuple[Workload, int], ...]
    """(workload, count), sorted by ``namespace/Kind/name``; DaemonSet and mirror pods are not
    listed."""

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
                    "pods": {str(w): c for w, c in n.pods},
                }
                for n in self.nodes
            ],
            "workloads": [
                {
                    "workload": str(w.workload),
                    "cpu": w.cpu,
                    "memory": w.memory,
                    "movable": w.movable,
                }
                for w in self.workloads
            ],
        }

    @staticmethod
    def from_json(data: Any) -> Execution:
        """Inverse of :meth:`to_json`, strictly: raises ValueError naming the first field that
        is missing or wrong (a number that is not finite and within 0..:data:`MAX_NUMBER`, a
        window that ends before it starts, a name that is not one line of printable text, a
        workload that is not ``namespace/Kind/name`` or is listed twice, a node that runs a
        workload the execution does not list or a listed workload no node runs, a count that
        is not a whole number, ``movable`` that is not a boolean, a ``load_vector`` whose
        total is not ``load``). Workloads come back sorted, as every store returns them."""
        data = _object(data, "execution")
        start, end = _number(data, "start"), _number(data, "end")
        if end < start:
            raise ValueError(f"end {end!r} is before start {start!r}")
        load = _number(data, "load")
        nodes = tuple(_node_state(n) for n in _array(data, "nodes"))
        return Execution(
            id=_text(data, "id"),
            start=start,
            end=end,
            load=load,
            load_vector=_load_vector_from_json(data.get("load_vector"), load),
            cost=_number(data, "cost"),
            cpu_ratio=_number(data, "cpu_ratio"),
            nodes=nodes,
            workloads=_workload_types(_array(data, "workloads"), nodes),
        )


def shown(value: Any) -> str:
    """``value`` as an error message shows it: its repr, at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:39]}…"


def _object(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} is {shown(data)}, not an object")
    return data


def _array(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{key} is {shown(value)}, not a list")
    return value


def _text(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    """A string of printable characters only: no control character (ESC, U+0085), line or
    paragraph separator (U+2028, U+2029) or other invisible character that could rewrite a
    terminal line when ``kb list`` prints it."""
    value = data.get(key, default)
    if not isinstance(value, str) or not value.isprintable():
        raise ValueError(f"{key} is {shown(value)}, not one line of printable text")
    return value


def _number(data: Mapping[str, Any], key: str) -> float:
    return _bounded(data.get(key), key)


def _bounded(value: Any, key: str) -> float:
    """A finite number within 0..MAX_NUMBER (an integer of any size is compared as it is,
    never converted first)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} is {shown(value)}, not a number")
    if not 0 <= value <= MAX_NUMBER:  # NaN fails both comparisons
        raise ValueError(f"{key} is {shown(value)}, not a number in 0..{MAX_NUMBER:g}")
    return float(value)


def _whole(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WHOLE:
        raise ValueError(f"{key} is {shown(value)}, not a whole number in 0..{MAX_WHOLE}")
    return value


def _workload_key(value: Any, key: str) -> Workload:
    try:
        if isinstance(value, str) and value.isprintable():
            return Workload.parse(value)
    except ValueError:
        pass
    raise ValueError(f"{key} is {shown(value)}, not namespace/Kind/name")


def by_name(item: tuple[Workload, int]) -> str:
    """The stored order of a node's (workload, count) pairs: by ``namespace/Kind/name``."""
    return str(item[0])


def _node_state(data: Any) -> NodeState:
    data = _object(data, "node")
    pods = _object(data.get("pods"), "pods")
    return NodeState(
        name=_text(data, "name"),
        cpu=_whole(data.get("cpu"), "cpu"),
        memory=_whole(data.get("memory"), "memory"),
        instance_type=_text(data, "type", ""),
        price=_number(data, "price"),
        pods=tuple(
            sorted(
                (
                    (_workload_key(w, "pods"), _whole(c, f"pods[{shown(w)}]"))
                    for w, c in pods.items()
                ),
                key=by_name,
            )
        ),
    )


def _workload_type(data: Any) -> WorkloadType:
    data = _object(data, "workload")
    movable = data.get("movable")
    if not isinstance(movable, bool):
        raise ValueError(f"movable is {shown(movable)}, not true or false")
    return WorkloadType(
        _workload_key(data.get("workload"), "workload"),
        _whole(data.get("cpu"), "cpu"),
        _whole(data.get("memory"), "memory"),
        movable,
    )


def _workload_types(entries: list[Any], nodes: tuple[NodeState, ...]) -> tuple[WorkloadType, ...]:
    """``workloads`` of an execution, sorted: each listed once, and exactly those its nodes
    ran (a store keeps a workload type only through the nodes that ran it)."""
    types: dict[Workload, WorkloadType] = {}
    for entry in entries:
        workload = _workload_type(entry)
        if workload.workload in types:
            raise ValueError(f"workload {shown(str(workload.workload))} is listed twice")
        types[workload.workload] = workload
    ran = {w for node in nodes for w, _ in node.pods}
    for name in sorted(ran ^ types.keys(), key=str):
        if name in ran:
            raise ValueError(f"pods: {shown(str(name))} is run by a node but not in workloads")
        raise ValueError(f"workload {shown(str(name))} is run by no node")
    return workload_types(types.values())


def workload_types(types: Iterable[WorkloadType]) -> tuple[WorkloadType, ...]:
    """An execution's workload types in their stored order (by ``namespace/Kind/name``)."""
    return tuple(sorted(types, key=lambda w: str(w.workload)))


def _load_vector_from_json(data: Any, load: float) -> LoadVector:
    """``load_vector`` of :meth:`Execution.to_json` (absent: a scalar load): one number within
    0..MAX_NUMBER per printable dimension, totalling ``load``."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise ValueError(f"load_vector is {shown(data)}, not an object")
    if not data:
        raise ValueError("load_vector is {}, an object without dimensions")
    values = {}
    for key, value in data.items():
        if not key.isprintable():
            raise ValueError(f"load_vector key {shown(key)} is not one line of printable text")
        values[key] = _bounded(value, f"load_vector[{shown(key)}]")
    served = Load.vector(values)
    if not math.isclose(served.total, load, rel_tol=1e-9, abs_tol=1e-9):
        raise ValueError(f"load {load!r} is not the total of load_vector ({served.total!r})")
    return load_vector(served)


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
                pod.workload, pod.requests.cpu, pod.requests.memory, movable
            )
        counts = Counter(p.workload for p in pods)
        nodes.append(
            NodeState(
                name=node.name,
                cpu=node.capacity.cpu,
                memory=node.capacity.memory,
                instance_type=node.instance_type,
                price=node_price(node, pricing),
                pods=tuple(sorted(counts.items(), key=by_name)),
            )
        )
        used = cluster.requested(node.name).cpu
        ratios.append(used / node.allocatable.cpu if node.allocatable.cpu else 0.0)
    body = {
        "start": start,
        "end": end,
        "load": served.total,
        "nodes": [(n.name, [(str(w), c) for w, c in n.pods]) for n in nodes],
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
        workloads=workload_types(types.values()),
    )
