"""Graph rows -> executions: strict types, one decoded pod type per read, order by position."""

from __future__ import annotations

import math
from typing import Any

import pytest

from knowledge.neo4j_decode import Malformed, decode, decode_rows, pod_refs, pod_types
from tuner.model.cluster import Workload

WEB = {"key": "web", "workload": "shop/Deployment/web", "cpu": 100, "memory": 64, "movable": True}
EXECUTION = {"id": "a", "start": 0.0, "end": 600, "load": 100.0, "cost": 1.0, "cpu_ratio": 0.5}


def node(position: Any, name: Any = "n1", **change: Any) -> list[Any]:
    fields = {"cpu": 4000, "memory": 1024, "type": "e2", "price": 0.5, "pods": [["ref-web", 2]]}
    fields |= change
    return [position, name, *fields.values()]


def test_a_well_formed_row_decodes_in_node_order() -> None:
    (found,) = decode_rows(
        [{"execution": EXECUTION, "nodes": [node(1, "second"), node(0, "first")]}],
        {"ref-web": WEB},
        "server",
    )
    assert [n.name for n in found.nodes] == ["first", "second"]
    assert found.nodes[0].pods == ((Workload("shop", "Deployment", "web"), 2),)
    assert found.end == 600.0 and isinstance(found.end, float)
    assert [str(w.workload) for w in found.workloads] == ["shop/Deployment/web"]


@pytest.mark.parametrize(
    ("execution", "nodes", "message"),
    [
        ({**EXECUTION, "load": True}, [], "load is True, not a finite number >= 0"),
        ({**EXECUTION, "cost": math.nan}, [], "cost is nan, not a finite number >= 0"),
        ({**EXECUTION, "cost": -5.0}, [], "cost is -5.0, not a finite number >= 0"),
        ({**EXECUTION, "id": 7}, [], "id is 7, not printable text"),
        ({**EXECUTION, "id": "a\x1b[2J"}, [], r"id is 'a\\x1b\[2J', not printable text"),
        (EXECUTION, [node(0, cpu=4000.0)], "Node 'n1': cpu is 4000.0, not a whole number"),
        (EXECUTION, [node(0, name=None)], "Node None: name is None, not printable text"),
        (EXECUTION, [node(0, name="n\u2028")], r"name is 'n\\u2028', not printable text"),
        (EXECUTION, [node(0, pods=[["ref-web", -1]])], "RAN.count is -1"),
        (EXECUTION, [node(0, pods=[["gone", 1]])], "ran a pod type that is gone"),
        (EXECUTION, [node(0, pods=[["ref-bad", 1]])], "Pod 'bad': movable is 'yes'"),
    ],
)
def test_malformed_rows_name_what_is_wrong(
    execution: dict[str, Any], nodes: list[list[Any]], message: str
) -> None:
    types = pod_types({"ref-web": WEB, "ref-bad": {**WEB, "key": "bad", "movable": "yes"}})
    with pytest.raises(Malformed, match=message):
        decode(execution, nodes, types)


def test_two_types_of_one_workload_in_one_execution_are_malformed() -> None:
    types = pod_types({"ref-web": WEB, "ref-web2": {**WEB, "key": "web2", "cpu": 200}})
    with pytest.raises(Malformed, match="two different types of shop/Deployment/web"):
        decode(EXECUTION, [node(0), node(1, "n2", pods=[["ref-web2", 1]])], types)


def test_unreadable_rows_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    rows = [
        {"execution": {**EXECUTION, "id": "bad", "load": "x"}, "nodes": []},
        {"execution": EXECUTION, "nodes": [node(0)]},
    ]
    assert [e.id for e in decode_rows(rows, {"ref-web": WEB}, "Neo4j at x")] == ["a"]
    assert "skipping malformed execution 'bad' in Neo4j at x: Execution 'bad': load" in caplog.text


def test_pod_refs_are_collected_once() -> None:
    rows = [{"execution": EXECUTION, "nodes": [node(0), node(1, pods=[["b", 1], ["ref-web", 1]])]}]
    assert pod_refs(rows) == ["b", "ref-web"]


def test_a_pod_vertex_whose_workload_is_not_namespace_kind_name_is_unreadable() -> None:
    """The stored form is the ``namespace/Kind/name`` string; it decodes to a ``Workload`` value,
    and a vertex holding anything else is unreadable, not a workload named after it."""
    (read,) = pod_types({"ref-web": WEB}).values()
    assert not isinstance(read, Malformed)
    assert read.workload == Workload("shop", "Deployment", "web")
    for text in ("web", "shop/web", "shop//web"):
        (bad,) = pod_types({"ref": {**WEB, "workload": text}}).values()
        assert isinstance(bad, Malformed) and "namespace/Kind/name" in str(bad)
