"""Embedded-store specifics: read-only opening, foreign rows, schema version."""

import sqlite3
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


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(KnowledgeError, match="newer than this tuner"):
        EmbeddedKnowledgeBase(path)
