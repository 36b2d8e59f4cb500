"""Named regressions of issue 15 for ``tuner kb`` on the embedded store: writes that cannot
destroy (export, import, prune, a foreign SQLite file) and read-only commands that create
nothing. On Neo4j: tests/integration/test_neo4j_kb_safety.py."""

from __future__ import annotations

import copy
import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from tests.knowledge.test_contract import execution
from tuner.cli import main


def _tuner(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "kb.sqlite"
    now = time.time()
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record(execution("old", 100.0, 1.0, end=now - 86400))
        kb.record(execution("new", 200.0, 3.0, end=now - 3600))
    return path


@pytest.fixture
def settings(tmp_path: Path, store: Path) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"knowledge": {"backend": "embedded", "path": str(store)}}))
    return path


def _one_line_error(status: int, err: str, fragment: str) -> None:
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("tuner: error:") and fragment in err, err


def test_export_onto_the_store_is_refused(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path
) -> None:
    before = _digest(store)
    for extra in ((), ("--force",)):
        status, _, err = _tuner(
            capsys, "kb", "export", "-o", str(store), "--settings", str(settings), *extra
        )
        _one_line_error(status, err, "is the knowledge store itself")
    assert _digest(store) == before


def test_export_over_a_file_that_is_not_an_export_needs_force(
    capsys: pytest.CaptureFixture[str], settings: Path, tmp_path: Path
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("keep me\n")
    status, _, err = _tuner(capsys, "kb", "export", "-o", str(other), "--settings", str(settings))
    _one_line_error(status, err, "exists and is not an export")
    assert other.read_text() == "keep me\n"
    status, _, _ = _tuner(
        capsys, "kb", "export", "-o", str(other), "--force", "--settings", str(settings)
    )
    assert status == 0 and json.loads(other.read_text())["format"] == "tuner-knowledge"
    status, _, _ = _tuner(capsys, "kb", "export", "-o", str(other), "--settings", str(settings))
    assert status == 0  # a previous export is replaced without --force
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.sqlite", "notes.txt", "settings.json"]


@pytest.mark.parametrize(
    ("target", "fragment"), [("missing/x.json", "does not exist"), (".", "is a folder")]
)
def test_export_into_a_missing_folder_or_onto_a_folder(
    capsys: pytest.CaptureFixture[str], settings: Path, tmp_path: Path, target: str, fragment: str
) -> None:
    status, _, err = _tuner(
        capsys, "kb", "export", "-o", str(tmp_path / target), "--settings", str(settings)
    )
    _one_line_error(status, err, fragment)


def _export(capsys: pytest.CaptureFixture[str], settings: Path) -> dict[str, Any]:
    status, out, _ = _tuner(capsys, "kb", "export", "--settings", str(settings))
    assert status == 0
    document: dict[str, Any] = json.loads(out)
    return document


def _broken(entry: dict[str, Any], case: str) -> dict[str, Any]:
    entry = copy.deepcopy(entry)
    entry["id"] = "broken"
    if case == "negative load":
        entry["load"] = -1
    elif case == "negative cost":
        entry["cost"] = -0.5
    elif case == "start after end":
        entry["start"] = entry["end"] + 1
    elif case == "movable as a string":
        entry["workloads"][0]["movable"] = "false"
    elif case == "workload without slashes":
        entry["workloads"][0]["workload"] = "web"
    elif case == "negative pod count":
        pods = entry["nodes"][0]["pods"]
        pods[next(iter(pods))] = -3
    return entry


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("negative load", "load is -1"),
        ("negative cost", "cost is -0.5"),
        ("start after end", "is before start"),
        ("movable as a string", "movable is 'false'"),
        ("workload without slashes", "not namespace/Kind/name"),
        ("negative pod count", "is -3"),
    ],
)
def test_an_import_whose_second_entry_is_bad_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    settings: Path,
    store: Path,
    tmp_path: Path,
    case: str,
    fragment: str,
) -> None:
    document = _export(capsys, settings)
    good = copy.deepcopy(document["executions"][0])
    good["id"], good["end"] = "fresh", good["end"] + 1
    document["executions"] = [good, _broken(document["executions"][0], case)]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    before = _digest(store)
    status, _, err = _tuner(capsys, "kb", "import", str(path), "--settings", str(settings))
    _one_line_error(status, err, fragment)
    assert "execution #1 ('broken')" in err
    assert _digest(store) == before


def test_an_import_is_one_transaction(store: Path) -> None:
    """A write that fails half way (a row SQLite refuses) leaves the store as it was."""
    good = execution("a", 1.0, 1.0)
    with EmbeddedKnowledgeBase(store) as kb:
        before = [e.id for e in kb.list()]
        bad = execution("b", 1.0, 1.0)
        with sqlite3.connect(store) as db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON executions WHEN NEW.id = 'b' "
                "BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        with pytest.raises(Exception, match="refused"):
            kb.record_many([good, bad])
        assert [e.id for e in kb.list()] == before


def test_prune_checks_its_options_before_deleting(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path
) -> None:
    before = _digest(store)
    status, out, err = _tuner(
        capsys, "kb", "prune", "--keep", "1", "--orphans", "--settings", str(settings)
    )
    _one_line_error(status, err, "--orphans applies to the neo4j backend only")
    assert out == "" and _digest(store) == before


def test_a_foreign_sqlite_file_is_refused_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    foreign = tmp_path / "app.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE customers (name TEXT)")
        db.execute("INSERT INTO customers VALUES ('ada')")
    db.close()
    before = _digest(foreign)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"knowledge": {"path": str(foreign)}}))
    dump = Path(__file__).parents[2] / "examples" / "cluster-dump.json"
    status, _, err = _tuner(
        capsys, "kb", "record", "--snapshot", str(dump), "--load", "1", "--settings", str(settings)
    )
    _one_line_error(status, err, "is not a tuner knowledge store")
    assert _digest(foreign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.sqlite", "settings.json"]


@pytest.mark.parametrize(
    "argv",
    [
        ["kb", "list"],
        ["kb", "show", "new"],
        ["kb", "export"],
        ["kb", "browse", "--load", "100", "--workload", "a/Deployment/b"],
    ],
)
def test_read_only_commands_create_and_change_nothing(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path, argv: list[str]
) -> None:
    before = (_digest(store), sorted(p.name for p in store.parent.iterdir()))
    status, _, _ = _tuner(capsys, *argv, "--settings", str(settings))
    assert status == 0
    assert (_digest(store), sorted(p.name for p in store.parent.iterdir())) == before
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_an_import_from_stdin_is_checked_like_a_file(
    settings: Path, store: Path, tmp_path: Path
) -> None:
    """``kb import -`` in a real process: a bad entry on stdin is one line, nothing written."""
    before = _digest(store)
    bad = execution("x", 1.0, 1.0).to_json()
    bad["load"] = -1
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "kb", "import", "-", "--settings", str(settings)],
        input=json.dumps([bad]),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    _one_line_error(result.returncode, result.stderr, "load is -1")
    assert _digest(store) == before
