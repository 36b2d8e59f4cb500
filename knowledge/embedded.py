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
    KnowledgeRefused,
    ShadowCycles,
    check_same,
    decode_shadow,
    distinct,
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
_IDS_PER_QUERY = 500
"""Ids looked up per statement (SQLite's oldest builds take at most 999 parameters)."""
Executions = list[Execution]


class EmbeddedKnowledgeBase(Closing):
    """Executions in a SQLite file; each write is one transaction."""

    def __init__(self, path: Path, *, read_only: bool = False, create: bool = True) -> None:
        """Open (and create, when ``create`` and not ``read_only``) the store at ``path``. The
        store may be used from any thread, one call at a time (the daemon's cycles run on
        scheduler threads).

        A SQLite file with tables of its own is another program's and is refused
        (KnowledgeRefused) before anything is written. ``read_only`` opens the file read-only:
        it creates no file and writes nothing, except that a write a killed writer left half
        done is rolled back first (see :meth:`_roll_back`). The store keeps SQLite's rollback
        journal (no ``-wal``/``-shm`` files beside it); one left in WAL mode by an older
        release is switched back on the next write.
        """
        self._lock = threading.Lock()
        self._path = path
        if (read_only or not create) and not path.exists():
            raise KnowledgeError(f"no knowledge store at {path} (nothing recorded yet)")
        if path.is_dir():
            raise KnowledgeRefused(f"knowledge store {path} is a folder")
        mode = "ro" if read_only else "rwc" if create else "rw"
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
            version = self._check()
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

    def _check(self) -> int:
        """The store's schema version; refuses a newer schema, or a file that holds tables
        this store does not make."""
        version = self._query("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise KnowledgeError(
                f"knowledge store {self._path} has schema {version}, newer than this tuner's"
            )
        names = {
            row[0]
            for row in self._db.execute(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            )
        }
        foreign = sorted(names - _OWN_NAMES)
        if foreign:
            raise KnowledgeRefused(
                f"{self._path} is not a tuner knowledge store (it holds {foreign[0]!r}); "
                "refusing it"
            )
        return int(version)

    def _query(self, sql: str, params: Mapping[str, object] | tuple[object, ...] = ()) -> Any:
        """The cursor of ``sql``. On a read-only connection, a hot journal (a write whose
        writer was killed) first makes SQLite refuse every read; it is rolled back
        (:meth:`_roll_back`) and ``sql`` run again."""
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as err:
            if getattr(err, "sqlite_errorcode", None) != sqlite3.SQLITE_READONLY_ROLLBACK:
                raise
        self._roll_back()
        return self._db.execute(sql, params)

    def _roll_back(self) -> None:
        """Roll back the write a killed ``kb import``, ``kb prune`` or daemon left half done,
        as the next writer would: a read-write connection that reads the header restores the
        store to its last committed state from the journal and deletes the journal. Nothing
        is added or lost; only the interrupted write is undone.

        Raises KnowledgeError when this user may not write the store or its folder (a
        read-only mount): any command that writes, run by someone who may, rolls it back.
        """
        log.warning(
            "knowledge store %s: rolling back a write that was interrupted (%s-journal)",
            self._path,
            self._path.name,
        )
        try:
            writer = sqlite3.connect(
                f"{self._path.absolute().as_uri()}?mode=rw", uri=True, timeout=30
            )
            try:
                writer.execute("PRAGMA user_version").fetchone()
            finally:
                writer.close()
        except sqlite3.Error as err:
            raise KnowledgeError(
                f"knowledge store {self._path}: a write was interrupted and its journal "
                f"({self._path.name}-journal) cannot be rolled back by this user ({err}); run a "
                "command that writes the store as a user who may write it and its folder"
            ) from err

    def record(self, execution: Execution) -> None:
        """Store an execution (idempotent by id)."""
        self.record_many([execution])

    def record_many(self, executions: Iterable[Execution]) -> None:
        """Store executions in one transaction: all of them or, on any failure, none. One
        already stored must be the same (it is left as it is); another content under a stored
        id is refused (KnowledgeRefused) before anything is written."""
        batch = distinct(executions)
        try:
            with self._lock, self._db:
                self._db.execute("BEGIN IMMEDIATE")
                for execution_id, stored in self._stored(list(batch)):
                    check_same(stored, batch.pop(execution_id))
                self._db.executemany(
                    f"INSERT INTO executions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (_row(e) for e in batch.values()),
                )
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store write failed: {err}") from err

    def _stored(self, ids: list[str]) -> Iterator[tuple[str, Execution | ValueError]]:
        """What the store holds under ``ids`` (inside the caller's transaction): each id with
        its execution, or why that cannot be read."""
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT id, body FROM executions WHERE id IN ({marks})", chunk)
            for execution_id, body in rows.fetchall():
                try:
                    yield execution_id, Execution.from_json(json.loads(body))
                except (ValueError, KeyError, TypeError, AttributeError) as err:
                    yield execution_id, ValueError(str(err))

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
                rows = self._query(sql, params)
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

    def count(self) -> int:
        """One aggregate, no row decoded."""
        try:
            with self._lock:
                return int(self._query("SELECT COUNT(*) FROM executions").fetchone()[0])
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store read failed: {err}") from err

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
                rows = self._query(sql, params).fetchall()
        except sqlite3.Error as err:
            raise KnowledgeError(f"knowledge store read failed: {err}") from err
        return list(_decoded(rows))


def _row(e: Execution) -> tuple[str, float, float, float, float, float, str]:
    """An execution as a row of the ``executions`` table."""
    body = json.dumps(e.to_json(), sort_keys=True)
    return (e.id, e.start, e.end, e.load, e.cost, e.cpu_ratio, body)


def _decoded(rows: Iterable[Any]) -> Iterator[Execution]:
    """The executions of ``rows`` (one at a time, as they are asked for); malformed ones are
    logged and skipped."""
    for row in rows:
        try:
            yield Execution.from_json(json.loads(row[6]))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            log.warning("skipping malformed execution %s in the knowledge store: %s", row[0], err)
