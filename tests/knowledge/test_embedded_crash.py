"""A ``kb import`` or ``kb prune`` killed while it writes (real processes, real signals), then
every reader: the store keeps its last committed state and no reader loses it.

SQLite writes pages of a big transaction into the file before the commit (its page cache
spills) and keeps the original pages in ``kb.sqlite-journal``. A writer killed then leaves that
"hot" journal; a read-only connection cannot roll it back and SQLite refuses it every read
("attempt to write a readonly database"), so ``kb list``/``export``/``show`` failed and
``plan --load`` and a dry-run daemon silently lost the previous-deployment option. Readers now
roll the interrupted write back first, as the next writer would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.lazy import LazyKnowledge
from knowledge.open import open_knowledge
from tests.knowledge.test_contract import execution
from tuner.model.execution import Execution
from tuner.settings import Knowledge

ROOT = Path(__file__).resolve().parents[2]
DUMP = ROOT / "examples" / "cluster-dump.json"
BULK = 6_000
"""Executions written by the killed command: enough that SQLite spills pages into the file
long before it commits (the window this test kills it in)."""
BASE = ["cheap", "kept"]


def _tuner(*args: str, **options: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def _run(*args: str) -> tuple[int, str, str]:
    process = _tuner(*args)
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def _bulk() -> list[dict[str, Any]]:
    return [
        execution(f"bulk-{i}", 100.0 + i % 50, 1.0 + i % 7, end=10_000.0 + i).to_json()
        for i in range(BULK)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with the two base executions (the newest ones); ``settings.json`` beside it."""
    path = tmp_path / "kb.sqlite"
    now = time.time()
    base = [execution("cheap", 1200.0, 0.01, end=now - 60), execution("kept", 500.0, 2.0, end=now)]
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record_many(base)
    (tmp_path / "settings.json").write_text(json.dumps({"knowledge": {"path": str(path)}}))
    return path


def _journal(store: Path) -> Path:
    return store.with_name(store.name + "-journal")


def _kill_mid_write(store: Path, how: signal.Signals, *command: str) -> tuple[int, str]:
    """Run ``tuner kb COMMAND`` and send it ``how`` once it has written into the store file
    (its journal exists and the file changed); its exit status and stderr."""
    before = store.stat().st_mtime_ns
    settings = str(store.with_name("settings.json"))
    writer = _tuner("kb", *command, "--settings", settings)
    deadline = time.monotonic() + 300
    while not (_journal(store).exists() and store.stat().st_mtime_ns != before):
        assert writer.poll() is None, f"the writer ended before it wrote: {writer.stderr}"
        assert time.monotonic() < deadline, "the writer never started writing"
        time.sleep(0.002)  # polling a file: no event to wait on
    writer.send_signal(how)
    _, err = writer.communicate(timeout=300)
    return writer.returncode, err


def _readers_see(store: Path, ids: list[str]) -> None:
    """Every reader reads the committed state ``ids``: kb list, show, export, plan --load and
    the dry-run daemon's store."""
    settings = str(store.with_name("settings.json"))
    status, out, err = _run(
        "kb", "list", "--format", "json", "--limit", "100000", "--settings", settings
    )
    assert status == 0, err
    assert sorted(e["id"] for e in json.loads(out)) == sorted(ids)
    status, out, err = _run("kb", "show", "cheap", "--settings", settings)
    assert status == 0 and json.loads(out)["load"] == 1200.0, err
    status, out, err = _run("kb", "export", "--settings", settings)
    assert status == 0 and len(json.loads(out)["executions"]) == len(ids), err
    with LazyKnowledge(lambda: open_knowledge(Knowledge(path=str(store)), read_only=True)) as kb:
        assert [e.id for e in kb.find_by_load(1200.0, 0.1)] == ["cheap"]
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    assert not _journal(store).exists()


def _plan_reads_the_history(store: Path) -> None:
    """``plan --load`` reads the entry for its load (holds it or finds it unattainable)."""
    settings = str(store.with_name("settings.json"))
    status, out, err = _run(
        "plan",
        "--snapshot",
        str(DUMP),
        "--load",
        "1200",
        "--format",
        "json",
        "--settings",
        settings,
    )
    assert status == 0, err
    report = json.loads(out)
    read = [report["previous_deployment"], *(u["id"] for u in report["unattainable"])]
    assert "cheap" in read, (report, err)
    assert "previous-deployment option skipped" not in err


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_a_killed_import_leaves_the_store_readable(
    store: Path, tmp_path: Path, how: signal.Signals
) -> None:
    export = tmp_path / "export.json"
    export.write_text(
        json.dumps({"format": "tuner-knowledge", "version": 1, "executions": _bulk()})
    )
    assert _kill_mid_write(store, how, "import", str(export)) == (-how, "")
    assert _journal(store).exists(), "killed mid-write: the journal stays"
    _plan_reads_the_history(store)  # the first reader rolls the import back
    _readers_see(store, BASE)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_a_killed_prune_leaves_the_store_readable(store: Path, how: signal.Signals) -> None:
    with EmbeddedKnowledgeBase(store) as kb:
        kb.record_many(Execution.from_json(e) for e in _bulk())
    assert _kill_mid_write(store, how, "prune", "--keep", "2") == (-how, "")
    assert _journal(store).exists()
    _readers_see(store, BASE + [f"bulk-{i}" for i in range(BULK)])
    _plan_reads_the_history(store)


def test_a_store_open_read_only_reads_on_after_a_writer_is_killed(
    store: Path, tmp_path: Path
) -> None:
    """The dry-run daemon keeps its read-only store open from cycle to cycle."""
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_bulk()))
    with LazyKnowledge(lambda: open_knowledge(Knowledge(path=str(store)), read_only=True)) as kb:
        assert [e.id for e in kb.find_by_load(1200.0, 0.1)] == ["cheap"]
        _kill_mid_write(store, signal.SIGKILL, "import", str(export))
        assert _journal(store).exists()
        assert [e.id for e in kb.find_by_load(1200.0, 0.1)] == ["cheap"]
        assert sorted(e.id for e in kb.list()) == BASE


@pytest.mark.parametrize("command", ["import", "prune"])
def test_ctrl_c_mid_write_is_one_line_and_writes_nothing(
    store: Path, tmp_path: Path, command: str
) -> None:
    """SIGINT (Ctrl-C) while the command writes: exit status 130, one line, no traceback, the
    transaction rolled back (no journal left behind)."""
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_bulk()))
    if command == "prune":
        with EmbeddedKnowledgeBase(store) as kb:
            kb.record_many(Execution.from_json(e) for e in _bulk())
    ids = sorted(e.id for e in EmbeddedKnowledgeBase(store, read_only=True).list())
    argv = ["import", str(export)] if command == "import" else ["prune", "--keep", "2"]
    assert _kill_mid_write(store, signal.SIGINT, *argv) == (130, "tuner: error: interrupted\n")
    assert not _journal(store).exists()
    _readers_see(store, ids)


def test_a_reader_that_may_not_write_says_so(store: Path, tmp_path: Path) -> None:
    """On a read-only mount the journal cannot be rolled back: one line naming it, exit 1,
    and ``plan --load`` warns that it skipped the option (it does not lose it silently)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) for a read-only bind mount")
    export = tmp_path / "export.json"
    export.write_text(json.dumps(_bulk()))
    _kill_mid_write(store, signal.SIGKILL, "import", str(export))
    folder = str(tmp_path)
    script = (
        f"mount --bind -o ro {folder} {folder} && "
        f"{sys.executable} -m tuner.cli kb list --settings {folder}/settings.json"
    )
    result = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [line for line in result.stderr.splitlines() if "WARNING" not in line]
    assert result.returncode == 1, result.stderr
    assert (
        len(lines) == 1 and "kb.sqlite-journal" in lines[0] and "cannot be rolled back" in lines[0]
    )
    assert _journal(store).exists()
