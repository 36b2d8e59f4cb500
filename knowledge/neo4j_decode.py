"""Graph rows back into :class:`~knowledge.records.Execution` values, strictly.

The graph may hold data the tuner did not write (another tool, a hand edit, an older
release): a vertex with a missing property or one of the wrong type (an Execution without
``load``, a Node whose ``cpu`` is ``"lots"``) makes its execution unreadable. Such an
execution is skipped with a warning; the analysis goes on with the others.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from knowledge.records import Execution, NodeState, WorkloadType

log = logging.getLogger(__name__)


class Malformed(ValueError):
    """A vertex or edge lacks a property or holds one of the wrong type."""


def _number(props: Mapping[str, Any], key: str, where: str) -> float:
    value = props.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Malformed(f"{where}.{key} is {value!r}, not a number")
    return float(value)


def _integer(props: Mapping[str, Any], key: str, where: str) -> int:
    value = props.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Malformed(f"{where}.{key} is {value!r}, not a whole number >= 0")
    return value


def _text(props: Mapping[str, Any], key: str, where: str) -> str:
    value = props.get(key)
    if not isinstance(value, str):
        raise Malformed(f"{where}.{key} is {value!r}, not a string")
    return value


def _flag(props: Mapping[str, Any], key: str, where: str) -> bool:
    value = props.get(key)
    if not isinstance(value, bool):
        raise Malformed(f"{where}.{key} is {value!r}, not a boolean")
    return value


def _workload(pod: Mapping[str, Any]) -> WorkloadType:
    where = f"Pod {pod.get('key', pod.get('workload'))!r}"
    return WorkloadType(
        workload=_text(pod, "workload", where),
        cpu=_integer(pod, "cpu", where),
        memory=_integer(pod, "memory", where),
        movable=_flag(pod, "movable", where),
    )


def _node(entry: Mapping[str, Any], types: dict[str, WorkloadType]) -> NodeState:
    props = entry["node"]
    where = f"Node {props.get('name')!r}"
    counts: dict[str, int] = {}
    for ran in entry["pods"]:
        workload = _workload(ran["pod"])
        known = types.setdefault(workload.workload, workload)
        if known != workload:
            raise Malformed(f"{where} ran two different types of {workload.workload}")
        count = _integer(ran, "count", f"{where}-[:RAN]")
        counts[workload.workload] = counts.get(workload.workload, 0) + count
    return NodeState(
        name=_text(props, "name", where),
        cpu=_integer(props, "cpu", where),
        memory=_integer(props, "memory", where),
        instance_type=_text(props, "type", where),
        price=_number(props, "price", where),
        pods=tuple(sorted(counts.items())),
    )


def _order(entry: Mapping[str, Any]) -> tuple[int, str]:
    position = entry.get("position")
    name = entry["node"].get("name")
    return (position if isinstance(position, int) else 1 << 30, str(name))


def decode(execution: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> Execution:
    """One execution from its vertex's properties and its nodes (see neo4j_cypher's reads).

    Raises Malformed when anything is missing or of the wrong type.
    """
    where = f"Execution {execution.get('id')!r}"
    types: dict[str, WorkloadType] = {}
    states = tuple(_node(entry, types) for entry in sorted(nodes, key=_order))
    return Execution(
        id=_text(execution, "id", where),
        start=_number(execution, "start", where),
        end=_number(execution, "end", where),
        load=_number(execution, "load", where),
        cost=_number(execution, "cost", where),
        cpu_ratio=_number(execution, "cpu_ratio", where),
        nodes=states,
        workloads=tuple(sorted(types.values(), key=lambda w: w.workload)),
    )


def decode_rows(rows: Iterable[Mapping[str, Any]], server: str) -> list[Execution]:
    """Every readable execution of ``rows`` (keys ``execution``, ``nodes``), in row order;
    unreadable ones are logged and skipped."""
    found = []
    for row in rows:
        try:
            found.append(decode(row["execution"], row["nodes"]))
        except Malformed as err:
            log.warning(
                "skipping malformed execution %r in %s: %s",
                row["execution"].get("id"),
                server,
                err,
            )
    return found
