"""Behaviour every knowledge-base backend must show."""

from __future__ import annotations

from dataclasses import replace

import pytest

from knowledge.base import KnowledgeBase, KnowledgeRefused
from knowledge.transfer import BatchStore
from tuner.model.cluster import Workload
from tuner.model.execution import Execution, NodeState, WorkloadType, load_vector
from tuner.model.load import Load

WEB = Workload("shop", "Deployment", "web")
DB = Workload("shop", "StatefulSet", "db")


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
                ((WEB, 3), (DB, 1)),
            ),
            NodeState("n2", 4000, 16 * 2**30, "e2-standard-4", cost / 2, ((WEB, 1),)),
        ),
        workloads=(
            WorkloadType(WEB, 250, 2**29, True),
            WorkloadType(DB, 1000, 2**32, False),
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


def test_another_content_under_a_stored_id_is_refused(kb: KnowledgeBase) -> None:
    """Ids are content hashes: a record that reuses one with other data is a forgery or a
    corruption, never an update (issue 28: an import silently replaced load, cost, nodes)."""
    stored = execution("a", 200.0, 1.5488)
    kb.record(stored)
    forged = replace(stored, load=100.0, cost=0.0, nodes=(), workloads=())
    refused = r"execution 'a' is already stored with another content \(load 200.0, not 100.0\)"
    with pytest.raises(KnowledgeRefused, match=refused):
        kb.record(forged)
    with pytest.raises(KnowledgeRefused, match=r"\(other nodes\)"):
        kb.record(replace(stored, nodes=stored.nodes[:1]))
    kb.record(stored)  # the same again changes nothing
    assert kb.list() == [stored]


def test_a_batch_with_one_refused_execution_writes_nothing(kb: KnowledgeBase) -> None:
    if not isinstance(kb, BatchStore):
        pytest.skip("the in-memory store records one execution at a time")
    stored = execution("a", 200.0, 1.5)
    kb.record(stored)
    fresh = execution("b", 100.0, 1.0)
    with pytest.raises(KnowledgeRefused, match="execution 'a'"):
        kb.record_many([fresh, replace(stored, cost=0.0)])
    with pytest.raises(KnowledgeRefused, match="execution 'b' is given twice"):
        kb.record_many([fresh, replace(fresh, cost=0.5)])
    assert kb.list() == [stored]
    kb.record_many([fresh, stored, fresh])
    assert sorted(e.id for e in kb.list()) == ["a", "b"]


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


def band_with_ties(kb: KnowledgeBase) -> list[Execution]:
    """Seven executions in the band of load 100 ± 10 % (one outside), recorded out of order;
    returns them cheapest first: by cost, then cpu_ratio, then id."""
    ranked = [
        execution("c1", 95.0, 1.0),
        execution("c2-low-ratio", 105.0, 2.0, cpu_ratio=0.3),
        execution("c2-tie-a", 100.0, 2.0, cpu_ratio=0.6),
        execution("c2-tie-b", 92.0, 2.0, cpu_ratio=0.6),
        execution("c3", 108.0, 3.0),
        execution("c4", 100.0, 4.0, cpu_ratio=0.1),
        execution("c5", 91.0, 5.0),
    ]
    for e in [*reversed(ranked), execution("outside", 120.0, 0.1)]:
        kb.record(e)
    return ranked


def test_find_by_load_reads_only_the_cheapest_limit_in_full(kb: KnowledgeBase) -> None:
    ranked = band_with_ties(kb)
    assert kb.find_by_load(100.0, 0.1, limit=3) == ranked[:3]  # whole deployments
    assert [e.id for e in kb.find_by_load(100.0, 0.1, limit=4)] == [e.id for e in ranked[:4]]
    assert kb.find_by_load(100.0, 0.1, limit=0) == []
    assert [e.id for e in kb.find_by_load(100.0, 0.1, limit=50)] == [e.id for e in ranked]


def test_find_by_load_cheaper_than_is_a_strict_bound(kb: KnowledgeBase) -> None:
    ranked = band_with_ties(kb)
    assert [e.id for e in kb.find_by_load(100.0, 0.1, cheaper_than=2.0)] == ["c1"]
    cheaper = kb.find_by_load(100.0, 0.1, cheaper_than=3.5)
    assert [e.id for e in cheaper] == [e.id for e in ranked[:5]]
    assert kb.find_by_load(100.0, 0.1, cheaper_than=1.0) == []


def test_find_by_load_bound_and_limit_together_keep_the_tie_break(kb: KnowledgeBase) -> None:
    band_with_ties(kb)
    # the limit falls between two executions of equal cost and cpu_ratio: the lower id wins
    found = kb.find_by_load(100.0, 0.1, cheaper_than=2.5, limit=3)
    assert [e.id for e in found] == ["c1", "c2-low-ratio", "c2-tie-a"]
    assert [e.id for e in kb.find_by_load(120.0, 0.01, cheaper_than=1.0, limit=1)] == ["outside"]


def test_find_by_load_refuses_a_negative_limit(kb: KnowledgeBase) -> None:
    kb.record(execution("a", 100.0, 1.5))
    with pytest.raises(ValueError, match="limit must be >= 0"):
        kb.find_by_load(100.0, 0.1, limit=-1)


def served(id: str, load: dict[str, float], cost: float) -> Execution:
    """An execution that served ``load``, one value per dimension."""
    vector = Load.vector(load)
    return replace(execution(id, vector.total, cost), load_vector=load_vector(vector))


MIX = {'{service="web"}': 60.0, '{service="db"}': 40.0}


def test_a_load_vector_is_stored_with_its_total(kb: KnowledgeBase) -> None:
    e = served("v", MIX, 1.0)
    kb.record(e)
    assert kb.get("v") == e
    assert e.load == 100.0 and e.served == MIX


def test_a_vector_lookup_skips_another_mix_of_the_same_total(kb: KnowledgeBase) -> None:
    for e in [
        served("other-mix", {'{service="web"}': 40.0, '{service="db"}': 60.0}, 1.0),
        served("same", MIX, 2.0),
        served("near", {'{service="web"}': 65.0, '{service="db"}': 37.0}, 3.0),
        served("one-out", {'{service="web"}': 55.0, '{service="db"}': 45.0}, 4.0),
    ]:
        kb.record(e)
    assert [e.id for e in kb.find_by_load(100.0, 0.1)] == ["other-mix", "same", "near", "one-out"]
    found = kb.find_by_load(100.0, 0.1, vector=MIX)
    assert [e.id for e in found] == ["same", "near"]
    assert found[0] == served("same", MIX, 2.0)  # the whole deployment, its vector too
    assert [e.id for e in kb.find_by_load(100.0, 0.1, vector=MIX, cheaper_than=3.0)] == ["same"]


def test_the_limit_counts_only_executions_that_served_the_vector(kb: KnowledgeBase) -> None:
    for i in range(3):
        kb.record(served(f"other-{i}", {'{service="web"}': 100.0}, 0.5 + i / 10))
    for i in range(3):
        kb.record(served(f"same-{i}", MIX, 2.0 + i))
    found = kb.find_by_load(100.0, 0.1, vector=MIX, limit=2)
    assert [e.id for e in found] == ["same-0", "same-1"]
    assert kb.find_by_load(100.0, 0.1, vector=MIX, limit=0) == []


def test_scalar_records_match_a_scalar_query_only(kb: KnowledgeBase) -> None:
    kb.record(execution("scalar", 100.0, 1.0))  # as recorded before load vectors were kept
    kb.record(served("vector", MIX, 2.0))
    assert [e.id for e in kb.find_by_load(100.0, 0.1, vector={"": 95.0})] == ["scalar"]
    assert [e.id for e in kb.find_by_load(100.0, 0.1, vector=MIX)] == ["vector"]
    assert kb.find_by_load(100.0, 0.01, vector={"": 95.0}) == []


def test_a_dimension_one_side_lacks_counts_as_zero(kb: KnowledgeBase) -> None:
    web, db = '{service="web"}', '{service="db"}'
    kb.record(served("web-only", {web: 100.0}, 1.0))
    kb.record(served("web-and-idle-db", {web: 100.0, db: 0.0}, 2.0))
    kb.record(served("web-and-some-db", {web: 95.0, db: 5.0}, 3.0))
    assert [e.id for e in kb.find_by_load(100.0, 0.1, vector={web: 100.0})] == [
        "web-only",
        "web-and-idle-db",
    ]
    assert [e.id for e in kb.find_by_load(100.0, 0.1, vector={web: 100.0, db: 0.0})] == [
        "web-only",
        "web-and-idle-db",
    ]
    assert [e.id for e in kb.find_by_load(100.0, 0.1, vector={web: 97.0, db: 5.0})] == [
        "web-and-some-db"
    ]


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


def test_count_follows_records_deletes_and_prunes(kb: KnowledgeBase) -> None:
    assert kb.count() == 0
    for i in range(4):
        kb.record(execution(f"e{i}", 100.0, 1.0, end=1000.0 + i))
    kb.record(execution("e0", 100.0, 1.0, end=1000.0))  # the same again: no new execution
    assert kb.count() == 4
    assert kb.delete("e1") and kb.count() == 3
    assert kb.prune(keep=1) == 2 and kb.count() == 1


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
    assert survivor is not None and {w.workload for w in survivor.workloads} == {WEB, DB}
