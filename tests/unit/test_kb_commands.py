"""``tuner kb ...`` on the embedded backend (on Neo4j: tests/integration/test_neo4j_kb_cli.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.transfer import FORMAT
from tests.knowledge.test_contract import execution
from tuner.arguments import duration
from tuner.cli import main
from tuner.kb.command import browser_url
from tuner.settings import Knowledge

Run = tuple[int, str, str]


def tuner(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps({"knowledge": {"backend": "embedded", "path": str(tmp_path / "kb.sqlite")}})
    )
    return path


@pytest.fixture
def stored(tmp_path: Path, settings: Path) -> Path:
    """Three executions ended 3 days, 2 days and 1 hour ago."""
    now = time.time()
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        kb.record(execution("old", 100.0, 1.0, end=now - 3 * 86400))
        kb.record(execution("older-ish", 150.0, 2.0, end=now - 2 * 86400))
        kb.record(execution("new", 200.0, 3.0, end=now - 3600))
    return settings


def test_list_show_delete(capsys: pytest.CaptureFixture[str], stored: Path) -> None:
    status, out, _ = tuner(capsys, "kb", "list", "--settings", str(stored))
    assert status == 0
    rows = out.splitlines()
    assert rows[0].split()[:3] == ["id", "end", "(UTC)"]
    assert [r.split()[0] for r in rows[1:]] == ["new", "older-ish", "old"]
    status, out, _ = tuner(
        capsys, "kb", "list", "--limit", "1", "--format", "json", "--settings", str(stored)
    )
    assert [e["id"] for e in json.loads(out)] == ["new"]
    status, out, _ = tuner(capsys, "kb", "show", "old", "--settings", str(stored))
    assert status == 0 and json.loads(out)["load"] == 100.0
    assert tuner(capsys, "kb", "delete", "old", "--settings", str(stored))[:2] == (
        0,
        "deleted old\n",
    )
    status, _, err = tuner(capsys, "kb", "show", "old", "--settings", str(stored))
    assert status == 2 and err == "tuner: error: no execution 'old' in the knowledge base\n"


def test_export_then_import_elsewhere_is_idempotent(
    capsys: pytest.CaptureFixture[str], stored: Path, tmp_path: Path
) -> None:
    dump = tmp_path / "history.json"
    status, _, err = tuner(capsys, "kb", "export", "-o", str(dump), "--settings", str(stored))
    assert status == 0 and "exported to" in err
    document = json.loads(dump.read_text())
    assert document["format"] == FORMAT and len(document["executions"]) == 3
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"knowledge": {"path": str(tmp_path / "copy.sqlite")}}))
    for _ in range(2):
        status, out, _ = tuner(capsys, "kb", "import", str(dump), "--settings", str(other))
        assert (status, out) == (0, "imported 3 executions\n")
    with (
        EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as source,
        EmbeddedKnowledgeBase(tmp_path / "copy.sqlite") as copy,
    ):
        assert copy.list() == source.list()


def test_export_to_stdout_reads_back(capsys: pytest.CaptureFixture[str], stored: Path) -> None:
    status, out, _ = tuner(capsys, "kb", "export", "--settings", str(stored))
    assert status == 0 and json.loads(out)["executions"][0]["id"] == "new"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "Expecting property name"),
        ('{"format": "something-else"}', "not a tuner knowledge export"),
        ('{"format": "tuner-knowledge", "version": 9, "executions": []}', "newer than this"),
        ('[{"id": "x", "load": "lots"}]', "execution #0 ('x') is malformed"),
    ],
)
def test_a_bad_import_is_one_line_and_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    settings: Path,
    tmp_path: Path,
    content: str,
    fragment: str,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    status, out, err = tuner(capsys, "kb", "import", str(bad), "--settings", str(settings))
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("tuner: error:") and fragment in err
    assert not (tmp_path / "kb.sqlite").exists()


def test_import_of_a_missing_file(capsys: pytest.CaptureFixture[str], settings: Path) -> None:
    status, _, err = tuner(capsys, "kb", "import", "/nonexistent.json", "--settings", str(settings))
    assert status == 2 and "cannot read export /nonexistent.json" in err


def test_prune_by_age_then_count(capsys: pytest.CaptureFixture[str], stored: Path) -> None:
    status, out, _ = tuner(capsys, "kb", "prune", "--older-than", "60h", "--settings", str(stored))
    assert (status, out) == (0, "pruned 1 executions\n")
    status, out, _ = tuner(capsys, "kb", "prune", "--keep", "1", "--settings", str(stored))
    assert (status, out) == (0, "pruned 1 executions\n")
    status, out, _ = tuner(capsys, "kb", "list", "--format", "json", "--settings", str(stored))
    assert [e["id"] for e in json.loads(out)] == ["new"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["prune"], "kb prune needs --older-than, --keep or --orphans"),
        (["prune", "--orphans"], "--orphans applies to the neo4j backend only"),
        (["migrate", "--from", "embedded", "--to", "embedded"], "two different backends"),
    ],
)
def test_kb_argument_errors(
    capsys: pytest.CaptureFixture[str], stored: Path, args: list[str], fragment: str
) -> None:
    status, _, err = tuner(capsys, "kb", *args, "--settings", str(stored))
    assert status == 2 and fragment in err and "Traceback" not in err


def test_migrate_to_neo4j_without_its_password_is_one_line(
    capsys: pytest.CaptureFixture[str], stored: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TUNER_NEO4J_PASSWORD", raising=False)
    status, _, err = tuner(
        capsys, "kb", "migrate", "--from", "embedded", "--to", "neo4j", "--settings", str(stored)
    )
    assert status == 1
    assert err == (
        "tuner: error: Neo4j at bolt://127.0.0.1:7687: the password variable "
        "TUNER_NEO4J_PASSWORD (knowledge.password_env) is not set\n"
    )


def test_browse_prints_the_url_style_and_ready_queries(
    capsys: pytest.CaptureFixture[str], stored: Path
) -> None:
    status, out, err = tuner(capsys, "kb", "browse", "--settings", str(stored))
    assert status == 0
    assert "kb migrate --from embedded --to neo4j" in err  # the history is not in Neo4j yet
    assert out.startswith(
        "Neo4j Browser: http://127.0.0.1:7474/browser/?dbms=bolt%3A%2F%2Fneo4j%40127.0.0.1%3A7687\n"
    )
    assert "\n:style node {" in out
    # The newest execution's load and first workload fill in the queries.
    assert "WHERE 180.0 <= e.load <= 220.0" in out
    assert "WHERE w.workload = 'shop/Deployment/web' WITH DISTINCT e, w" in out
    titles = [line for line in out.splitlines() if line.startswith("// ")]
    assert len(titles) == 7  # the style line and six queries


def test_browser_url_and_durations() -> None:
    assert browser_url("neo4j+s://db.example.com", "me", None) == (
        "http://db.example.com:7474/browser/?dbms=neo4j%2Bs%3A%2F%2Fme%40db.example.com%3A7687"
    )
    assert browser_url("bolt://h:1", "neo4j", "https://h/").startswith("https://h/browser/?dbms=")
    assert browser_url("bolt://h:1", "neo4j", "http://admin:BrowsePW@h:7474").startswith(
        "http://***@h:7474/browser/?dbms="
    )
    assert [duration(t) for t in ("90", "30m", "12h", "2d", "1w")] == [
        90,
        1800,
        43200,
        172800,
        604800,
    ]
    with pytest.raises(argparse.ArgumentTypeError):
        duration("soon")


@pytest.mark.parametrize("command", [("list",), ("show", "some-id"), ("export",)])
def test_reading_commands_never_create_a_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, settings: Path, command: tuple[str, ...]
) -> None:
    status, out, err = tuner(capsys, "kb", *command, "--settings", str(settings))
    assert status == 1
    assert err.strip().splitlines() == [
        f"tuner: error: no knowledge store at {tmp_path / 'kb.sqlite'} (nothing recorded yet)"
    ]
    assert out == ""
    assert list(tmp_path.iterdir()) == [settings]


def test_neo4j_script_env_exports_what_the_tuner_reads() -> None:
    """``eval "$(scripts/neo4j.sh env)"`` sets the password variable the tuner reads by
    default (knowledge.password_env), not only the script's own NEO4J_PASSWORD."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "neo4j.sh"
    shell = f'eval "$(bash {script} env)" && echo "$TUNER_NEO4J_PASSWORD|$NEO4J_PASSWORD"'
    result = subprocess.run(
        ["bash", "-c", shell],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "NEO4J_PASSWORD": "pw with 'quotes'"},
    )
    assert result.stdout == "pw with 'quotes'|pw with 'quotes'\n"
    assert Knowledge().password_env == "TUNER_NEO4J_PASSWORD"


def test_documented_kb_command_lines_are_not_pipes_between_kb_commands() -> None:
    """Issue 27: ``tuner kb list | show ID | delete ID`` in the docs read as a shell pipe."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    commands = {"record", "list", "show", "delete", "export", "import", "prune", "migrate"}
    for page in docs.rglob("*.md"):
        for line in page.read_text(encoding="utf-8").splitlines():
            if "tuner kb " not in line:
                continue
            piped = [part.split()[0] for part in line.split("|")[1:] if part.split()]
            assert not commands & set(piped), f"{page.name}: {line}"
