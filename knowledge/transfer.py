"""Moving a history between stores: JSON export and import, and backend-to-backend copies.

Every store's ``record`` is idempotent by execution id (ids are content hashes), so importing
or copying twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from knowledge.base import KnowledgeBase
from tuner.model.execution import Execution

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
    """Executions of an export document (or of a bare list, e.g. ``kb list --format json``).

    Raises ValueError naming the first bad entry; nothing is half read.
    """
    if isinstance(data, dict):
        if data.get("format") != FORMAT:
            raise ValueError(f"not a tuner knowledge export (format {data.get('format')!r})")
        if not isinstance(data.get("version"), int) or data["version"] > VERSION:
            raise ValueError(f"export version {data.get('version')!r} is newer than this tuner's")
        data = data.get("executions")
    if not isinstance(data, list):
        raise ValueError("expected a list of executions")
    executions = []
    for index, entry in enumerate(data):
        try:
            executions.append(Execution.from_json(entry))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            name = entry.get("id") if isinstance(entry, dict) else None
            raise ValueError(f"execution #{index} ({name!r}) is malformed: {err!r}") from err
    return executions


def record_all(target: KnowledgeBase, executions: Iterable[Execution]) -> int:
    """Record every execution in ``target``; returns how many."""
    count = 0
    for execution in executions:
        target.record(execution)
        count += 1
    return count


def copy_history(source: KnowledgeBase, target: KnowledgeBase) -> int:
    """Copy every execution of ``source`` into ``target`` (idempotent); returns how many."""
    return record_all(target, source.list())
