"""Graph rows back into :class:`~tuner.model.execution.Execution` values, strictly.

The graph may hold data the tuner did not write (another tool, a hand edit, an older
release): a vertex with a missing property or one of the wrong type (an Execution without
``load``, a Node whose ``cpu`` is ``"lots"``) makes its execution unreadable. Such an
execution is skipped with a warning; the analysis goes on with the others.

A lookup decodes thousands of values per execution, so the checks are plain type tests and a
message is only put together when one fails.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tuner.model.cluster import Workload
from tuner.model.execution import (
    Execution,
    LoadVector,
    NodeState,
    WorkloadType,
    by_name,
    load_vector,
    workload_types,
)
from tuner.model.load import Load

log = logging.getLogger(__name__)

Where = tuple[str, object]
"""What holds a value: a label and the vertex's name, e.g. ("Node", "pool-a-1")."""


class Malformed(ValueError):
    """A vertex or edge lacks a property or holds one of the wrong type."""


def _bad(where: Where, key: str, value: object, expected: str) -> Malformed:
    return Malformed(f"{where[0]} {where[1]!r}: {key} is {value!r}, not {expected}")


def _number(value: Any, where: Where, key: str) -> float:
    if type(value) is float and math.isfinite(value) and value >= 0:
        return value
    if type(value) is int and value >= 0:
        return float(value)
    raise _bad(where, key, value, "a finite number >= 0")


def _integer(value: Any, where: Where, key: str) -> int:
    if type(value) is int and value >= 0:
        return value
    raise _bad(where, key, value, "a whole number >= 0")


def _text(value: Any, where: Where, key: str) -> str:
    if type(value) is str and value.isprintable():
        return value
    raise _bad(where, key, value, "printable text")


def workload_type(pod: Mapping[str, Any]) -> WorkloadType:
    """A Pod vertex's properties as a workload type; raises Malformed."""
    where = ("Pod", pod.get("key", pod.get("workload")))
    movable = pod.get("movable")
    if type(movable) is not bool:
        raise _bad(where, "movable", movable, "a boolean")
    text = _text(pod.get("workload"), where, "workload")
    try:
        workload = Workload.parse(text)
    except ValueError:
        raise _bad(where, "workload", text, "namespace/Kind/name") from None
    return WorkloadType(
        workload=workload,
        cpu=_integer(pod.get("cpu"), where, "cpu"),
        memory=_integer(pod.get("memory"), where, "memory"),
        movable=movable,
    )


PodTypes = Mapping[str, WorkloadType | Malformed]
"""Pod element id -> its workload type, or why it is unreadable."""


def pod_types(pods: Mapping[str, Mapping[str, Any]]) -> dict[str, WorkloadType | Malformed]:
    """Every Pod vertex of a read decoded once (many executions share them)."""
    types: dict[str, WorkloadType | Malformed] = {}
    for ref, props in pods.items():
        try:
            types[ref] = workload_type(props)
        except Malformed as err:
            types[ref] = err
    return types


def _node(entry: Sequence[Any], pods: PodTypes, types: dict[Workload, WorkloadType]) -> NodeState:
    """One node of a row (the list the reads of :mod:`knowledge.neo4j_cypher` return)."""
    _, name, cpu, memory, instance_type, price, ran = entry
    where = ("Node", name)
    counts: dict[Workload, int] = {}
    for ref, count in ran:
        workload = pods.get(ref)
        if not isinstance(workload, WorkloadType):
            raise Malformed(str(workload or f"Node {name!r} ran a pod type that is gone"))
        known = types.setdefault(workload.workload, workload)
        if known != workload:
            raise Malformed(f"Node {name!r} ran two different types of {workload.workload}")
        counts[workload.workload] = counts.get(workload.workload, 0) + _integer(
            count, where, "RAN.count"
        )
    return NodeState(
        name=_text(name, where, "name"),
        cpu=_integer(cpu, where, "cpu"),
        memory=_integer(memory, where, "memory"),
        instance_type=_text(instance_type, where, "type"),
        price=_number(price, where, "price"),
        pods=tuple(sorted(counts.items(), key=by_name)),
    )


def _order(entry: Sequence[Any]) -> tuple[int, str]:
    position, name = entry[0], entry[1]
    return (position if type(position) is int else 1 << 30, str(name))


def decode(
    execution: Mapping[str, Any], nodes: Iterable[Sequence[Any]], pods: PodTypes
) -> Execution:
    """One execution from its vertex's properties, its nodes (compact lists, see
    :mod:`knowledge.neo4j_cypher`) and the pod types they refer to.

    Raises Malformed when anything is missing or of the wrong type.
    """
    where = ("Execution", execution.get("id"))
    types: dict[Workload, WorkloadType] = {}
    states = tuple(_node(entry, pods, types) for entry in sorted(nodes, key=_order))
    return Execution(
        id=_text(execution.get("id"), where, "id"),
        start=_number(execution.get("start"), where, "start"),
        end=_number(execution.get("end"), where, "end"),
        load=_number(execution.get("load"), where, "load"),
        load_vector=_load_vector(execution, where),
        cost=_number(execution.get("cost"), where, "cost"),
        cpu_ratio=_number(execution.get("cpu_ratio"), where, "cpu_ratio"),
        nodes=states,
        workloads=workload_types(types.values()),
    )


def _load_vector(execution: Mapping[str, Any], where: Where) -> LoadVector:
    """``load_keys`` and ``load_values`` of an Execution vertex: both absent (a scalar load),
    or as many distinct strings as finite numbers >= 0."""
    keys, values = execution.get("load_keys"), execution.get("load_values")
    if keys is None and values is None:
        return ()
    if type(keys) is not list or not all(type(key) is str for key in keys):
        raise _bad(where, "load_keys", keys, "a list of strings")
    if len(set(keys)) != len(keys):
        raise _bad(where, "load_keys", keys, "distinct")
    if type(values) is not list or len(values) != len(keys):
        raise _bad(where, "load_values", values, f"a list of {len(keys)} numbers")
    numbers = [_number(value, where, "load_values") for value in values]
    try:
        return load_vector(Load.vector(dict(zip(keys, numbers, strict=True))))
    except ValueError as err:
        raise Malformed(f"{where[0]} {where[1]!r}: {err}") from None


def pod_refs(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The element ids of every pod type the rows refer to, each once."""
    return sorted({ref for row in rows for entry in row["nodes"] for ref, _ in entry[-1]})


def decode_rows(
    rows: Iterable[Mapping[str, Any]], pods: Mapping[str, Mapping[str, Any]], server: str
) -> list[Execution]:
    """Every readable execution of ``rows`` (keys ``execution``, ``nodes``), in row order;
    ``pods`` maps element ids to Pod properties. Unreadable executions are logged and
    skipped."""
    types = pod_types(pods)
    found = []
    for row in rows:
        try:
            found.append(decode(row["execution"], row["nodes"], types))
        except Malformed as err:
            log.warning(
                "skipping malformed execution %r in %s: %s",
                row["execution"].get("id"),
                server,
                err,
            )
    return found
