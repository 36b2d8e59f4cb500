"""Moving a history between stores: JSON export and import, and backend-to-backend copies.

Every store's ``record`` is idempotent by execution id (ids are content hashes), so importing
or copying twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from knowledge.base import KnowledgeBase
from tuner.model.execution import Execution, shown

FORMAT = "tuner-knowledge"
VERSION = 1


def export_document(kb: KnowledgeBase) -> dict[str, Any]:
    """Every execution of ``kb``, newest first, as one JSON-able document."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "executions": [e.to_json() for e in kb.list()],
    }


def read_document(data: Any) -> list[Execution]:
    """Executions of an export document (or of a bare list, e.g. ``kb list --format json``),
    each id once (an entry repeated with the same content counts once).

    Raises ValueError naming the first bad entry, or an id given twice with two contents;
    nothing is half read.
    """
    if isinstance(data, dict):
        if data.get("format") != FORMAT:
            raise ValueError(f"not a tuner knowledge export (format {shown(data.get('format'))})")
        version = data.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"export version {shown(version)} is not a version number")
        if version > VERSION:
            raise ValueError(f"export version {shown(version)} is newer than this tuner's")
        data = data.get("executions")
    if not isinstance(data, list):
        raise ValueError("expected a list of executions")
    executions: dict[str, tuple[int, Execution]] = {}
    for index, entry in enumerate(data):
        try:
            execution = Execution.from_json(entry)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            name = entry.get("id") if isinstance(entry, dict) else None
            raise ValueError(f"execution #{index} ({shown(name)}) is malformed: {err}") from err
        first, seen = executions.setdefault(execution.id, (index, execution))
        if seen != execution:
            raise ValueError(
                f"execution #{index} ({execution.id!r}) has the id of #{first} with another content"
            )
    return [execution for _, execution in executions.values()]


@runtime_checkable
class BatchStore(Protocol):
    """A store that records many executions in one transaction (both real backends)."""

    def record_many(self, executions: Iterable[Execution]) -> None:
        """Store every execution, or (on any failure) none of them."""


def record_all(target: KnowledgeBase, executions: Iterable[Execution]) -> int:
    """Record every execution in ``target`` (all or nothing where the store can batch);
    returns how many."""
    batch = list(executions)
    if isinstance(target, BatchStore):
        target.record_many(batch)
    else:
        for execution in batch:
            target.record(execution)
    return len(batch)


def copy_history(source: KnowledgeBase, target: KnowledgeBase) -> int:
    """Copy every execution of ``source`` into ``target`` (idempotent); returns how many."""
    return record_all(target, source.list())
