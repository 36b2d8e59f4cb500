"""The embedded default backend: one SQLite file, no server needed."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

from knowledge.base import (
    EVERY,
    Closing,
    KnowledgeError,
    ShadowCycles,
    decode_shadow,
    load_band,
    row_limit,
    serves,
)
from tuner.model.account import ShadowCycle
from tuner.model.execution import Execution

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS executions (
    id TEXT PRIMARY KEY,
    start REAL NOT NULL,
    end_ REAL NOT NULL,
    load REAL NOT NULL,
    cost REAL NOT NULL,
    cpu_ratio REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS executions_load ON executions (load);
CREATE INDEX IF NOT EXISTS executions_end ON executions (end_);
"""
_SHADOW_SCHEMA = """
CREATE TABLE IF NOT EXISTS shadow_cycles (
    id TEXT PRIMARY KEY,
    at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS shadow_cycles_at ON shadow_cycles (at);
"""
"""Version 2: the shadow account (``tuner run --shadow``), one row per cycle."""
_COLUMNS = "id, start, end_, load, cost, cpu_ratio, body"
_OWN_NAMES = {
    "executions",
    "executions_load",
    "executions_end",
    "shadow_cycles",
    "shadow_cycles_at",
}
Executions = list[Execution]


class EmbeddedKnowledgeBase(Closing):
    """Executions in a SQLite file; each write is one transaction."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        """Open (and create, unless ``read_only``) the store at ``path``. The store may be used
        from any thread, one call at a time (the daemon's cycles run on scheduler threads).

        A SQLite file with tables of its own is another program's and is refused before
        anything is written. ``read_only`` opens the file read-only: it changes nothing and
        creates no file. The store keeps SQLite's rollback journal (no ``-wal``/``-shm`` files
        beside it); one left in WAL mode by an older release is switched back on the next
        write.
        """
        self._lock = threading.Lock()
        if read_only and not path.exists():
            raise KnowledgeError(f"no knowledge store at {path} (nothing recorded yet)")
        if path.is_dir():
            raise KnowledgeError(f"knowledge store {path} is a folder")
        mode = "ro" if read_only else "rwc"
        try:
            self._db = sqlite3.connect(
                f"{path.absolute().as_uri()}?mode={mode}",
                uri=True,
                timeout=30,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as err:
            raise KnowledgeError(f"cannot open knowledge store {path}: {err}") from err
        try:
            version = self._check(path)
            if not read_only:
                self._db.execute("PRAGMA journal_mode=DELETE")
                if version < SCHEMA_VERSION:
                    self._db.executescript(_SCHEMA + _SHADOW_SCHEMA)
                    self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as err:
            self._db.close()
            raise KnowledgeError(f"cannot open knowledge store {path}: {err}") from err
        except KnowledgeError:
            self._db.close()
            raise

    def _check(self, path: Path) -> int:
        """The store's schema version; refuses a newer schema, or a file that holds tables
        this store does not make."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise KnowledgeError(
                f"knowledge store {path} has schema {version}, newer than this tuner's"
            )
        names = {
            row[0]
            for row in self._db.execute(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            )
        }
        foreign = sorted(names - _OWN_NAMES)
        if foreign:
            raise KnowledgeError(
                f"{path} is not a tuner knowledge store (it holds {foreign[0]!r}); refusing it"
            )
        return int(version)

    def record(self, execution: Execution) -> None:
        """Store an execution (idempotent by id)."""
        self.record_many([execution])

    def record_many(self, executions: Iterable[Execution]) -> None:
        """Store executions in one transaction: all of them or, on any failure, none."""
        rows = [
            (
                e.id,
                e.start,
                e.end,
                e.load,
                e.cost,
                e.cpu_ratio,
                json.dumps(e.to_json(), sort_keys=True),
            )
            for e in executions
        ]
        try:
            with self._lock, self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    f"INSERT OR REPLACE INTO executions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store write failed: {err}") from err

    def find_by_load(
        self,
        load: float,
        delta: float,
        *,
        cheaper_than: float | None = None,
        limit: int | None = None,
        vector: Mapping[str, float] | None = None,
    ) -> Executions:
        """Executions in the load band (cheaper than ``cheaper_than``), cheapest first, ties by
        lower cpu_ratio; only the first ``limit`` are decoded. Given ``vector`` (kept in the
        body), the band is decoded in that order until ``limit`` of them served it."""
        low, high = load_band(load, delta)
        wanted = row_limit(limit)
        sql = (
            f"SELECT {_COLUMNS} FROM executions WHERE load BETWEEN :low AND :high "
            "AND (:cheaper_than IS NULL OR cost < :cheaper_than) "
            "ORDER BY cost, cpu_ratio, id LIMIT :limit"
        )
        params: dict[str, object] = {
            "low": low,
            "high": high,
            "cheaper_than": cheaper_than,
            "limit": wanted if vector is None else EVERY,
        }
        try:
            with self._lock:  # the cursor is read only as far as the first ``wanted`` matches
                rows = self._db.execute(sql, params)
                found = (e for e in _decoded(rows) if serves(e, vector, delta))
                return list(islice(found, wanted))
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store read failed: {err}") from err

    def get(self, execution_id: str) -> Execution | None:
        """One execution or None."""
        found = self._read(f"SELECT {_COLUMNS} FROM executions WHERE id = ?", (execution_id,))
        return found[0] if found else None

    def delete(self, execution_id: str) -> bool:
        """Remove an execution."""
        return self._write("DELETE FROM executions WHERE id = ?", (execution_id,)) > 0

    def list(self, limit: int | None = None) -> Executions:
        """Newest first."""
        return self._read(
            f"SELECT {_COLUMNS} FROM executions ORDER BY end_ DESC, id LIMIT ?",
            (row_limit(limit),),
        )

    def prune(self, *, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete old executions and all but the newest ``keep``."""
        removed = 0
        try:
            with self._lock, self._db:
                self._db.execute("BEGIN IMMEDIATE")
                if older_than is not None:
                    removed += self._db.execute(
                        "DELETE FROM executions WHERE end_ < ?", (older_than,)
                    ).rowcount
                if keep is not None:
                    removed += self._db.execute(
                        "DELETE FROM executions WHERE id NOT IN "
                        "(SELECT id FROM executions ORDER BY end_ DESC, id LIMIT ?)",
                        (keep,),
                    ).rowcount
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store write failed: {err}") from err
        return removed

    def record_shadow(self, cycle: ShadowCycle) -> None:
        """Add a cycle to the shadow account (idempotent by id)."""
        body = json.dumps(cycle.to_json(), sort_keys=True)
        self._write(
            "INSERT OR REPLACE INTO shadow_cycles (id, at, body) VALUES (?, ?, ?)",
            (cycle.id, cycle.at, body),
        )

    def shadow_cycles(self, since: float, until: float) -> ShadowCycles:
        """The account's cycles in ``[since, until]``, oldest first (none in a store of schema
        1, which a read-only tuner does not migrate)."""
        sql = "SELECT id, body FROM shadow_cycles WHERE at BETWEEN ? AND ? ORDER BY at, id"
        try:
            with self._lock:
                rows = self._db.execute(sql, (since, until)).fetchall()
        except sqlite3.OperationalError as err:
            if "no such table" in str(err):
                return []
            raise KnowledgeError(f"knowledge store read failed: {err}") from err
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store read failed: {err}") from err
        return list(decode_shadow(rows))

    def close(self) -> None:
        """Close the file."""
        self._db.close()

    def _write(self, sql: str, params: tuple[object, ...]) -> int:
        try:
            with self._lock, self._db:
                return self._db.execute(sql, params).rowcount
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store write failed: {err}") from err

    def _read(self, sql: str, params: tuple[object, ...]) -> Executions:
        try:
            with self._lock:
                rows = self._db.execute(sql, params).fetchall()
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store read failed: {err}") from err
        return list(_decoded(rows))


def _decoded(rows: Iterable[Any]) -> Iterator[Execution]:
    """The executions of ``rows`` (one at a time, as they are asked for); malformed ones are
    logged and skipped."""
    for row in rows:
        try:
            yield Execution.from_json(json.loads(row[6]))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            log.warning("skipping malformed execution %s in the knowledge store: %s", row[0], err)
