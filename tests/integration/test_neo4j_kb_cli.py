"""``tuner kb ...`` against the real Neo4j server, and moving a history between backends."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from testkit.neo4j_fixture import PASSWORD_ENV, Neo4jServer
from tests.integration.test_neo4j_store import synthetic
from tuner.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cluster-dump.json"


def tuner(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def settings_for(tmp_path: Path, uri: str, backend: str = "neo4j") -> Path:
    path = tmp_path / f"settings-{backend}.json"
    knowledge = {
        "backend": backend,
        "path": str(tmp_path / "kb.sqlite"),
        "uri": uri,
        "user": "neo4j",
        "database": "neo4j",
        "password_env": PASSWORD_ENV,
    }
    path.write_text(json.dumps({"knowledge": knowledge, "analyse": {"remove_nodes": False}}))
    return path


def test_kb_commands_on_neo4j(
    capsys: pytest.CaptureFixture[str], neo4j: Neo4jServer, tmp_path: Path
) -> None:
    settings = str(settings_for(tmp_path, neo4j.uri))
    status, out, err = tuner(
        capsys, "kb", "record", "--snapshot", str(EXAMPLE), "--load", "1200", "--settings", settings
    )
    assert status == 0, err
    entry = out.strip()
    with neo4j.open() as kb:
        kb.record_many([synthetic("old", 1), synthetic("older", 2)])

    status, out, _ = tuner(capsys, "kb", "list", "--settings", settings)
    assert [row.split()[0] for row in out.splitlines()[1:]] == [entry, "older", "old"]
    status, out, _ = tuner(capsys, "kb", "show", entry, "--settings", settings)
    shown = json.loads(out)
    assert shown["load"] == 1200.0 and len(shown["nodes"]) == 6

    dump = tmp_path / "history.json"
    assert tuner(capsys, "kb", "export", "-o", str(dump), "--settings", settings)[0] == 0
    assert tuner(capsys, "kb", "delete", entry, "--settings", settings)[1] == f"deleted {entry}\n"
    status, _, err = tuner(capsys, "kb", "delete", entry, "--settings", settings)
    assert status == 2 and f"no execution '{entry}'" in err
    status, out, _ = tuner(capsys, "kb", "import", str(dump), "--settings", settings)
    assert (status, out) == (0, "imported 3 executions\n")
    status, out, _ = tuner(capsys, "kb", "show", entry, "--settings", settings)
    assert json.loads(out) == shown  # re-added exactly

    status, out, _ = tuner(
        capsys, "kb", "prune", "--keep", "1", "--orphans", "--settings", settings
    )
    assert status == 0
    assert out.splitlines()[0] == "pruned 2 executions"
    assert out.splitlines()[1].startswith("removed ") and out.endswith(" unused pod types\n")
    status, out, _ = tuner(capsys, "kb", "list", "--format", "json", "--settings", settings)
    assert [e["id"] for e in json.loads(out)] == [entry]
    # only the pod types of the remaining execution are left
    pods = neo4j.run("MATCH (p:Pod) RETURN p.workload AS w")
    assert sorted(r["w"] for r in pods) == sorted(w["workload"] for w in shown["workloads"])
    status, out, _ = tuner(capsys, "kb", "prune", "--older-than", "0s", "--settings", settings)
    assert (status, out) == (0, "pruned 1 executions\n")


def test_migrate_copies_a_history_both_ways(
    capsys: pytest.CaptureFixture[str], neo4j: Neo4jServer, tmp_path: Path
) -> None:
    history = [synthetic(f"e{i}", i) for i in range(12)]
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        for execution in history:
            kb.record(execution)
    settings = str(settings_for(tmp_path, neo4j.uri, backend="embedded"))
    for _ in range(2):  # copying again changes nothing
        status, out, err = tuner(
            capsys, "kb", "migrate", "--from", "embedded", "--to", "neo4j", "--settings", settings
        )
        assert (status, out) == (0, "copied 12 executions from embedded to neo4j\n"), err
    with neo4j.open() as kb:
        assert sorted(kb.list(), key=lambda e: e.id) == sorted(history, key=lambda e: e.id)
        kb.record(synthetic("only-in-neo4j", 99))
    status, out, _ = tuner(
        capsys, "kb", "migrate", "--from", "neo4j", "--to", "embedded", "--settings", settings
    )
    assert (status, out) == (0, "copied 13 executions from neo4j to embedded\n")
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        assert kb.get("only-in-neo4j") == synthetic("only-in-neo4j", 99)


def test_browse_prints_queries_that_run_on_the_server(
    capsys: pytest.CaptureFixture[str], neo4j: Neo4jServer, tmp_path: Path
) -> None:
    with neo4j.open() as kb:
        kb.record_many([synthetic("a", 1), synthetic("b", 2)])
    settings = str(settings_for(tmp_path, neo4j.uri))
    assert neo4j.http_port != 7474  # a free port: what the server says, not a guess
    status, out, err = tuner(capsys, "kb", "browse", "--settings", settings)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == (
        f"Neo4j Browser: {neo4j.http}/browser/?dbms=bolt%3A%2F%2Fneo4j%40127.0.0.1%3A"
        f"{neo4j.bolt_port}"
    )
    assert lines[1] == f"Log in as neo4j with the password in ${PASSWORD_ENV}."
    queries = [
        lines[i + 1]
        for i, line in enumerate(lines)
        if line.startswith("// ") and not line.startswith("// Style")
    ]
    assert len(queries) == 6
    for query in queries:  # every printed query is valid Cypher and finds the recorded graph
        assert neo4j.run(query), query


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_is_one_line_and_plan_still_decides(tmp_path: Path) -> None:
    """Real processes, so stderr is exactly what a user sees (driver logging included)."""
    settings = str(settings_for(tmp_path, f"bolt://127.0.0.1:{_closed_port()}"))
    env = {**os.environ, PASSWORD_ENV: "whatever-pw"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tuner.cli", *args, "--settings", settings],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=False,
            timeout=120,
        )

    listing = run("kb", "list")
    assert listing.returncode == 1
    assert listing.stderr.count("\n") == 1, listing.stderr
    assert listing.stderr.startswith("tuner: error: Neo4j at bolt://127.0.0.1:")
    assert "connect failed: server unreachable" in listing.stderr

    plan = run("plan", "--snapshot", str(EXAMPLE), "--load", "1200", "--format", "json")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["decision"] in {"stay", "random_migration"}
    assert "previous-deployment option skipped" in plan.stderr
    assert "Traceback" not in plan.stderr
