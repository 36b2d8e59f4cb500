"""``tuner kb import`` on the real Neo4j server is all or nothing: an invalid entry is refused
before anything is written, and a batch the server refuses half way leaves no trace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.transfer import FORMAT, VERSION
from testkit.neo4j_fixture import Neo4jServer
from tests.integration.test_neo4j_kb_cli import settings_for, tuner
from tests.integration.test_neo4j_store import graph_counts, synthetic


def _export(tmp_path: Path, entries: list[dict[str, object]]) -> Path:
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"format": FORMAT, "version": VERSION, "executions": entries}))
    return path


def test_an_import_whose_second_entry_is_bad_writes_nothing(
    capsys: pytest.CaptureFixture[str], neo4j: Neo4jServer, tmp_path: Path
) -> None:
    bad = synthetic("bad", 2).to_json()
    bad["workloads"][0]["movable"] = "false"
    export = _export(tmp_path, [synthetic("good", 1).to_json(), bad])
    settings = str(settings_for(tmp_path, neo4j.uri))
    status, _, err = tuner(capsys, "kb", "import", str(export), "--settings", settings)
    assert status == 2 and len(err.splitlines()) == 1 and "movable is 'false'" in err
    assert graph_counts(neo4j)["executions"] == 0


@pytest.fixture
def unique_node_names(neo4j: Neo4jServer) -> Iterator[None]:
    """A constraint the tuner's graph does not have: two Node vertices may not share a name,
    so the server refuses a batch half way (a fault the tuner's own data cannot cause)."""
    neo4j.run("CREATE CONSTRAINT hostile_node_name FOR (n:Node) REQUIRE n.name IS UNIQUE")
    try:
        yield
    finally:
        neo4j.run("DROP CONSTRAINT hostile_node_name IF EXISTS")


@pytest.mark.usefixtures("unique_node_names")
def test_an_import_the_server_refuses_half_way_leaves_nothing(
    capsys: pytest.CaptureFixture[str], neo4j: Neo4jServer, tmp_path: Path
) -> None:
    export = _export(tmp_path, [synthetic("first", 1).to_json(), synthetic("second", 2).to_json()])
    settings = str(settings_for(tmp_path, neo4j.uri))
    status, _, err = tuner(capsys, "kb", "import", str(export), "--settings", settings)
    assert status == 1 and len(err.splitlines()) == 1, err
    assert graph_counts(neo4j)["executions"] == 0
    assert graph_counts(neo4j)["nodes"] == 0
