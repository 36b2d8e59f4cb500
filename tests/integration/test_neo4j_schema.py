"""The Neo4j graph's schema on the real server: rules, version, migrations, index use."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge import neo4j_cypher, neo4j_schema
from knowledge.base import EVERY, KnowledgeError
from knowledge.neo4j_store import Neo4jKnowledgeBase
from testkit.neo4j_fixture import Neo4jServer
from tests.integration.test_neo4j_store import synthetic


def stored_version(neo4j: Neo4jServer) -> object:
    rows = neo4j.run("MATCH (s:TunerSchema {id: 'tuner'}) RETURN s.version AS version")
    return rows[0]["version"] if rows else None


def read_only(neo4j: Neo4jServer) -> Neo4jKnowledgeBase:
    return Neo4jKnowledgeBase(neo4j.uri, neo4j.user, neo4j.password, read_only=True)


def test_opening_sets_up_constraints_indexes_and_the_version(neo4j: Neo4jServer) -> None:
    with neo4j.open() as kb:
        assert kb.schema_version == neo4j_schema.SCHEMA_VERSION
    assert stored_version(neo4j) == neo4j_schema.SCHEMA_VERSION
    constraints = {r["name"] for r in neo4j.run("SHOW CONSTRAINTS YIELD name RETURN name")}
    assert {"tuner_execution_id", "tuner_pod_key", "tuner_schema_id"} <= constraints
    indexes = {r["name"]: r["state"] for r in neo4j.run("SHOW INDEXES YIELD name, state RETURN *")}
    for name in ("tuner_execution_load", "tuner_execution_end", "tuner_pod_workload"):
        assert indexes.get(name) == "ONLINE", (name, indexes)


def name(operator: dict[str, Any]) -> str:
    """An operator's name without its database (``Top@neo4j`` -> ``Top``)."""
    return str(operator["operatorType"]).split("@")[0]


def below(plan: dict[str, Any]) -> list[str]:
    """The names of an operator and of every operator under it."""
    return [name(plan), *(n for child in plan.get("children", []) for n in below(child))]


def find(plan: dict[str, Any], operator: str) -> dict[str, Any] | None:
    """The first operator of that name, depth first."""
    if name(plan) == operator:
        return plan
    found = (find(child, operator) for child in plan.get("children", []))
    return next((tree for tree in found if tree is not None), None)


@pytest.mark.parametrize(("cheaper_than", "limit"), [(2.5, 10), (None, EVERY)])
def test_the_load_lookup_is_an_index_seek(
    neo4j: Neo4jServer, cheaper_than: float | None, limit: int
) -> None:
    """The band is a range seek on the load index; the cost filter and the top-``limit`` sort
    run on the executions alone, and only what is left is expanded into deployments."""
    with neo4j.open() as kb:
        kb.record(synthetic("a", 1))
    with neo4j.driver() as driver:
        result = driver.execute_query(
            "EXPLAIN " + neo4j_cypher.FIND_BY_LOAD,
            low=90.0,
            high=110.0,
            cheaper_than=cheaper_than,
            limit=limit,
            database_="neo4j",
        )
    plan = result.summary.plan
    text = plan["args"]["string-representation"]
    assert "NodeIndexSeekByRange" in text and "RANGE INDEX e:Execution(load)" in text, text
    top = find(plan, "Top")  # the sort with its limit, and what it sorts
    assert top is not None, text
    sorting = below(top)
    assert sorting[-1] == "NodeIndexSeekByRange", text
    assert not [op for op in sorting if op.startswith("Expand") or op == "RollUpApply"], text
    assert "RollUpApply" in below(plan), text  # the deployments, read after the sort


def test_a_duplicate_id_cannot_be_created_behind_the_tuners_back(neo4j: Neo4jServer) -> None:
    with neo4j.open() as kb:
        kb.record(synthetic("a", 1))
    with pytest.raises(Exception, match="already exists"):
        neo4j.run("CREATE (:Execution {id: 'a'})")


def test_a_newer_schema_is_refused_even_read_only(neo4j: Neo4jServer) -> None:
    neo4j.run("CREATE (:TunerSchema {id: 'tuner', version: 99})")
    for opening in (neo4j.open, lambda: read_only(neo4j)):
        with pytest.raises(KnowledgeError, match="schema 99, newer than this tuner's") as err:
            opening()
        assert "\n" not in str(err.value)
    assert stored_version(neo4j) == 99


def test_an_unreadable_version_is_refused(neo4j: Neo4jServer) -> None:
    neo4j.run("CREATE (:TunerSchema {id: 'tuner', version: 'one'})")
    with pytest.raises(KnowledgeError, match="unreadable tuner schema version 'one'"):
        neo4j.open()


def test_read_only_opening_changes_nothing(neo4j: Neo4jServer) -> None:
    with read_only(neo4j) as kb:
        assert kb.schema_version == 0
        assert kb.list() == []
    assert stored_version(neo4j) is None


def test_a_later_release_migrates_an_existing_graph_once(
    neo4j: Neo4jServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook: a release raises SCHEMA_VERSION and adds its step to MIGRATIONS."""
    current = neo4j_schema.SCHEMA_VERSION
    with neo4j.open() as kb:
        kb.record(synthetic("a", 1))
    assert stored_version(neo4j) == current
    ran: list[str] = []

    def version_2(driver: object, database: str) -> None:
        ran.append(database)
        neo4j.run("MATCH (e:Execution) WHERE e.load_vector IS NULL SET e.load_vector = [e.load]")

    monkeypatch.setattr(neo4j_schema, "SCHEMA_VERSION", current + 1)
    monkeypatch.setitem(neo4j_schema.MIGRATIONS, current + 1, version_2)
    with read_only(neo4j) as kb:  # a read-only tuner never migrates
        assert kb.schema_version == current
    assert ran == []
    with neo4j.open() as kb:
        assert kb.schema_version == current + 1
        assert kb.get("a") == synthetic("a", 1)  # older data reads as before
    with neo4j.open() as kb:
        assert kb.schema_version == current + 1
    assert ran == ["neo4j"]
    assert stored_version(neo4j) == current + 1
    assert neo4j.run("MATCH (e:Execution {id: 'a'}) RETURN e.load_vector AS v") == [
        {"v": [synthetic("a", 1).load]}
    ]
