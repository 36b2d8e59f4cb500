"""Embedded-store specifics: read-only opening, foreign rows, schema version."""

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from knowledge.base import KnowledgeError
from knowledge.embedded import EmbeddedKnowledgeBase
from tests.knowledge.test_contract import execution


def test_read_only_never_creates_a_file(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeError):
        EmbeddedKnowledgeBase(tmp_path / "absent.sqlite", read_only=True)
    assert not (tmp_path / "absent.sqlite").exists()


def test_malformed_rows_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "kb.sqlite"
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record(execution("good", 100.0, 1.0))
    db = sqlite3.connect(path)
    foreign = '{"id": "bad", "nodes": 3}'
    db.execute("INSERT INTO executions VALUES ('bad', 0, 1, 100, 0.5, 0.1, ?)", (foreign,))
    db.commit()
    db.close()
    with EmbeddedKnowledgeBase(path, read_only=True) as kb:
        assert [e.id for e in kb.find_by_load(100.0, 0.1)] == ["good"]
    assert "skipping malformed execution bad" in caplog.text


@pytest.mark.parametrize("vector", [{"web": -1.0}, {}, ["web", 100.0], {"web": "lots"}], ids=repr)
def test_malformed_load_vectors_are_skipped_by_a_vector_lookup(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, vector: object
) -> None:
    path = tmp_path / "kb.sqlite"
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record(execution("good", 100.0, 1.0))
    body = {**execution("bad", 100.0, 0.5).to_json(), "load_vector": vector}
    db = sqlite3.connect(path)
    db.execute("INSERT INTO executions VALUES ('bad', 0, 1, 100, 0.5, 0.1, ?)", (json.dumps(body),))
    db.commit()
    db.close()
    with EmbeddedKnowledgeBase(path, read_only=True) as kb:
        assert [e.id for e in kb.find_by_load(100.0, 0.1, vector={"": 100.0}, limit=1)] == ["good"]
    assert "skipping malformed execution bad" in caplog.text


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(KnowledgeError, match="newer than this tuner"):
        EmbeddedKnowledgeBase(path)


def test_a_store_opened_on_one_thread_serves_calls_from_others(tmp_path: Path) -> None:
    """The daemon opens the store in one cycle and uses it in later ones, each on whichever
    scheduler worker thread runs it."""
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        kb.record(execution("main", 100.0, 1.0))
        with ThreadPoolExecutor(max_workers=4) as pool:
            ids = [f"worker-{i}" for i in range(8)]
            list(pool.map(lambda i: kb.record(execution(i, 100.0, 2.0)), ids))
            found = pool.submit(kb.find_by_load, 100.0, 0.1).result()
    assert [e.id for e in found] == ["main", *sorted(ids)]


def _schema_1_store(path: Path) -> None:
    """A store as the tuner made it before the shadow account (schema 1)."""
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record(execution("old", 100.0, 1.0))
    db = sqlite3.connect(path)
    db.execute("DROP TABLE shadow_cycles")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()


def test_a_schema_1_store_reads_an_empty_account_and_gains_one_when_opened_to_write(
    tmp_path: Path,
) -> None:
    from tests.knowledge.test_shadow_account import cycle

    path = tmp_path / "kb.sqlite"
    _schema_1_store(path)
    with EmbeddedKnowledgeBase(path, read_only=True) as kb:
        assert kb.shadow_cycles(0.0, 10.0**10) == []
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record_shadow(cycle(1000.0))
        assert [e.id for e in kb.list()] == ["old"]
        assert kb.shadow_cycles(0.0, 2000.0) == [cycle(1000.0)]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    db.close()


def test_a_malformed_shadow_cycle_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.knowledge.test_shadow_account import cycle

    path = tmp_path / "kb.sqlite"
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record_shadow(cycle(1000.0))
    db = sqlite3.connect(path)
    db.execute("INSERT INTO shadow_cycles VALUES ('shadow-bad', 1500, '{\"at\": 1500}')")
    db.commit()
    db.close()
    with EmbeddedKnowledgeBase(path, read_only=True) as kb:
        assert kb.shadow_cycles(0.0, 2000.0) == [cycle(1000.0)]
    assert "skipping malformed shadow cycle shadow-bad" in caplog.text
