"""An in-memory knowledge base for simulations: stable deployments keyed by load.

The same records (``knowledge.records.Execution``) the real backends store; only the storage
is a list, so a multi-hour simulation does not touch a disk.
"""

from __future__ import annotations

from knowledge.records import Execution


class MemoryKnowledge:
    """Executions by id, queried by a load band."""

    def __init__(self) -> None:
        self.entries: dict[str, Execution] = {}

    def record(self, execution: Execution) -> None:
        """Store a stable deployment."""
        self.entries[execution.id] = execution

    def find_by_load(self, load: float, delta: float) -> list[Execution]:
        """Entries with ``load * (1 - delta) <= entry.load <= load * (1 + delta)``."""
        low, high = load * (1 - delta), load * (1 + delta)
        return [e for e in self.entries.values() if low <= e.load <= high]

    def delete(self, execution_id: str) -> None:
        """Forget an entry (chosen, or found unattainable)."""
        self.entries.pop(execution_id, None)
