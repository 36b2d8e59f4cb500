"""Data the tuner did not write (another tool, a hand edit) never crashes a lookup or a plan.

Malformed executions (a property missing or of the wrong type, anywhere in the onion) are
skipped with a warning; vertices under foreign labels are ignored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.neo4j_fixture import PASSWORD_ENV, Neo4jServer
from tests.integration.test_neo4j_store import synthetic

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cluster-dump.json"
SETTINGS = ROOT / "settings" / "example.json"

GOOD = """
CREATE (e:Execution {id: $id, start: 0.0, end: 600.0, load: 100.0, cost: 1.0, cpu_ratio: 0.5})
CREATE (e)-[:HAS_NODE {position: 0}]->(n:Node {name: 'n1', cpu: 4000, memory: 1024,
                                              type: 'e2-standard-4', price: 1.0})
MERGE (p:Pod {key: $id + '-pod'})
  ON CREATE SET p += {workload: 'shop/Deployment/web', cpu: 100, memory: 64, movable: true}
CREATE (n)-[:RAN {count: 2}]->(p)
"""
"""A well-formed execution written by hand; each case below breaks one thing in it."""

BROKEN = {
    "no-cost": "MATCH (e:Execution {id: $id}) REMOVE e.cost",
    "text-cost": "MATCH (e:Execution {id: $id}) SET e.cost = 'cheap'",
    "nan-ratio": "MATCH (e:Execution {id: $id}) SET e.cpu_ratio = 0.0 / 0.0",
    "list-start": "MATCH (e:Execution {id: $id}) SET e.start = [1, 2]",
    "node-cpu": "MATCH (:Execution {id: $id})-->(n:Node) SET n.cpu = 'lots'",
    "node-no-name": "MATCH (:Execution {id: $id})-->(n:Node) REMOVE n.name",
    "float-memory": "MATCH (:Execution {id: $id})-->(n:Node) SET n.memory = 1.5",
    "ran-no-count": "MATCH (:Execution {id: $id})-->()-[r:RAN]->() REMOVE r.count",
    "ran-negative": "MATCH (:Execution {id: $id})-->()-[r:RAN]->() SET r.count = -1",
    "pod-no-movable": "MATCH (:Execution {id: $id})-->()-->(p:Pod) REMOVE p.movable",
    "pod-text-cpu": "MATCH (:Execution {id: $id})-->()-->(p:Pod) SET p.cpu = '100m'",
    "numeric-id": "MATCH (e:Execution {id: $id}) SET e.id = 42",
}

BROKEN_LOAD_VECTORS = {
    f"load-vector-{case}": f"MATCH (e:Execution {{id: $id}}) SET {sets}"
    for case, sets in {
        "text-keys": "e.load_keys = 'web', e.load_values = [100.0]",
        "no-keys": "e.load_values = [100.0]",
        "no-values": "e.load_keys = ['web']",
        "short-values": "e.load_keys = ['web', 'db'], e.load_values = [100.0]",
        "text-values": "e.load_keys = ['web'], e.load_values = ['100']",
        "nan-value": "e.load_keys = ['web'], e.load_values = [0.0 / 0.0]",
        "negative-value": "e.load_keys = ['web', 'db'], e.load_values = [150.0, -50.0]",
        "duplicate-keys": "e.load_keys = ['web', 'web'], e.load_values = [50.0, 50.0]",
        "empty": "e.load_keys = [], e.load_values = []",
    }.items()
}
"""Load vectors (``load_keys``, ``load_values``) broken in every way a hand edit could."""

FOREIGN = """
CREATE (:Execution {name: 'a batch job', load: 100.0})
CREATE (:Execution {id: 'text-load', load: '100', start: 0.0, end: 1.0, cost: 0.1,
                    cpu_ratio: 0.1})
CREATE (:Person {name: 'ada', load: 100.0})
CREATE (:Node {name: 'orphan', cpu: 1})
CREATE (:Pod {key: 'lonely', workload: 'x/Deployment/y'})
WITH 1 AS one
MATCH (e:Execution {id: $good})
CREATE (e)-[:HAS_NODE]->(:Server {name: 'not a node'})
CREATE (e)-[:OWNED_BY]->(:Team {name: 'shop'})
"""
"""Foreign vertices and edges around a good execution: ignored, not even warned about."""


def seed(neo4j: Neo4jServer) -> None:
    """A good recorded execution, every broken case, and foreign data."""
    with neo4j.open() as kb:
        kb.record(synthetic("good", 1))
    for case, breaks in BROKEN.items():
        neo4j.run(GOOD, id=case)
        neo4j.run(breaks, id=case)
    neo4j.run(FOREIGN, good="good")


def test_malformed_executions_are_skipped_with_a_warning(
    neo4j: Neo4jServer, caplog: pytest.LogCaptureFixture
) -> None:
    seed(neo4j)
    with neo4j.open() as kb:
        assert [e.id for e in kb.find_by_load(100.0, 0.1)] == ["good"]
        assert [e.id for e in kb.list()] == ["good"]
        assert kb.get("no-cost") is None
        good = kb.get("good")
    assert good == synthetic("good", 1)  # foreign neighbours do not leak in
    for case in set(BROKEN) - {"numeric-id"}:
        assert f"skipping malformed execution {case!r}" in caplog.text, case
    assert "skipping malformed execution 42" in caplog.text
    warned = [r for r in caplog.records if "skipping malformed" in r.getMessage()]
    assert all(r.levelname == "WARNING" and "\n" not in r.getMessage() for r in warned)


def test_malformed_load_vectors_are_skipped_with_a_warning_by_a_vector_lookup(
    neo4j: Neo4jServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A lookup by load vector passes malformed vectors on to be read, so they are warned
    about like any other malformed execution instead of vanishing (or failing the query)."""
    with neo4j.open() as kb:
        kb.record(synthetic("good", 1))
    for case, breaks in BROKEN_LOAD_VECTORS.items():
        neo4j.run(GOOD, id=case)
        neo4j.run(breaks, id=case)
    with neo4j.open() as kb:
        assert [e.id for e in kb.find_by_load(100.0, 0.1, vector={"": 100.0})] == ["good"]
        assert kb.find_by_load(100.0, 0.1, vector={"web": 100.0}) == []
    for case in BROKEN_LOAD_VECTORS:
        assert f"skipping malformed execution {case!r}" in caplog.text, case


def test_a_plan_on_a_graph_with_foreign_data_still_decides(
    neo4j: Neo4jServer, tmp_path: Path
) -> None:
    """`tuner plan --load` end to end: the analysis runs on the readable entries."""
    seed(neo4j)
    document = json.loads(SETTINGS.read_text())
    document["knowledge"] = {
        "backend": "neo4j",
        "uri": neo4j.uri,
        "user": neo4j.user,
        "database": neo4j.database,
        "password_env": PASSWORD_ENV,
    }
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(document))
    result = subprocess.run(
        [
            *(sys.executable, "-m", "tuner.cli", "plan", "--snapshot", str(EXAMPLE)),
            *("--settings", str(settings), "--load", "100", "--format", "json"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, PASSWORD_ENV: neo4j.password},
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["decision"] in {
        "remove_nodes",
        "previous_deployment",
        "stay",
        "random_migration",
    }
    # the plan reads the executions cheaper than the cluster: 'text-cost' is not among them
    assert "skipping malformed execution 'node-cpu'" in result.stderr
    assert "'text-cost'" not in result.stderr
    assert "Traceback" not in result.stderr
