"""Behaviour every knowledge-base backend must show."""

from __future__ import annotations

from dataclasses import replace

from knowledge.base import KnowledgeBase
from knowledge.records import Execution, NodeState, WorkloadType


def execution(
    id: str, load: float, cost: float, cpu_ratio: float = 0.5, end: float = 1000.0
) -> Execution:
    return Execution(
        id=id,
        start=end - 600,
        end=end,
        load=load,
        cost=cost,
        cpu_ratio=cpu_ratio,
        nodes=(
            NodeState(
                "n1",
                4000,
                16 * 2**30,
                "e2-standard-4",
                cost / 2,
                (("shop/Deployment/web", 3), ("shop/StatefulSet/db", 1)),
            ),
            NodeState(
                "n2", 4000, 16 * 2**30, "e2-standard-4", cost / 2, (("shop/Deployment/web", 1),)
            ),
        ),
        workloads=(
            WorkloadType("shop/Deployment/web", 250, 2**29, True),
            WorkloadType("shop/StatefulSet/db", 1000, 2**32, False),
        ),
    )


def test_record_and_get_round_trip(kb: KnowledgeBase) -> None:
    e = execution("a", 100.0, 1.5)
    kb.record(e)
    assert kb.get("a") == e
    assert kb.get("missing") is None


def test_recording_twice_is_idempotent(kb: KnowledgeBase) -> None:
    e = execution("a", 100.0, 1.5)
    kb.record(e)
    kb.record(e)
    assert [x.id for x in kb.list()] == ["a"]


def test_find_by_load_uses_the_relative_band_cheapest_first(kb: KnowledgeBase) -> None:
    for e in [
        execution("in-low", 90.0, 3.0),
        execution("in-high", 110.0, 1.0),
        execution("tie-a", 100.0, 2.0, cpu_ratio=0.7),
        execution("tie-b", 100.0, 2.0, cpu_ratio=0.4),
        execution("below", 89.0, 0.5),
        execution("above", 111.0, 0.5),
    ]:
        kb.record(e)
    found = [e.id for e in kb.find_by_load(100.0, 0.1)]
    assert found == ["in-high", "tie-b", "tie-a", "in-low"]


def test_delete_and_readd(kb: KnowledgeBase) -> None:
    e = execution("a", 100.0, 1.5)
    kb.record(e)
    assert kb.delete("a") is True
    assert kb.delete("a") is False
    assert kb.find_by_load(100.0, 0.1) == []
    kb.record(e)
    assert kb.get("a") == e


def test_list_is_newest_first_and_limited(kb: KnowledgeBase) -> None:
    for i in range(5):
        kb.record(execution(f"e{i}", 100.0, 1.0, end=1000.0 + i))
    assert [e.id for e in kb.list(limit=3)] == ["e4", "e3", "e2"]


def test_prune_by_age_and_count(kb: KnowledgeBase) -> None:
    for i in range(6):
        kb.record(execution(f"e{i}", 100.0, 1.0, end=1000.0 + i))
    assert kb.prune(older_than=1002.0) == 2
    assert kb.prune(keep=3) == 1
    assert [e.id for e in kb.list()] == ["e5", "e4", "e3"]


def test_shared_workload_types_survive_deleting_one_execution(kb: KnowledgeBase) -> None:
    kb.record(execution("a", 100.0, 1.0))
    kb.record(replace(execution("b", 100.0, 2.0)))
    kb.delete("a")
    survivor = kb.get("b")
    assert survivor is not None and {w.workload for w in survivor.workloads} == {
        "shop/Deployment/web",
        "shop/StatefulSet/db",
    }
