"""An in-memory knowledge base for simulations: stable deployments keyed by load.

The same records (``tuner.model.execution.Execution``) and the same contract
(``knowledge.base.KnowledgeBase``) as the real backends; only the storage is a dict, so a
multi-hour simulation does not touch a disk.
"""

from __future__ import annotations

from collections.abc import Mapping

from knowledge.base import Closing, ShadowCycles, check_same, load_band, row_limit, serves
from tuner.model.account import ShadowCycle
from tuner.model.execution import Execution


class MemoryKnowledge(Closing):
    """Executions by id, queried by a load band."""

    def __init__(self) -> None:
        self.entries: dict[str, Execution] = {}
        self.shadow: dict[str, ShadowCycle] = {}

    def record(self, execution: Execution) -> None:
        """Store a stable deployment (idempotent by id; another content under a stored id is
        refused)."""
        stored = self.entries.setdefault(execution.id, execution)
        check_same(stored, execution)

    def find_by_load(
        self,
        load: float,
        delta: float,
        *,
        cheaper_than: float | None = None,
        limit: int | None = None,
        vector: Mapping[str, float] | None = None,
    ) -> list[Execution]:
        """Entries with load in ``load * (1 +- delta)`` (cheaper than ``cheaper_than``; given
        ``vector``, the same load per dimension), cheapest first, ties by lower cpu_ratio; the
        first ``limit``."""
        low, high = load_band(load, delta)
        found = [
            e
            for e in self.entries.values()
            if low <= e.load <= high
            and (cheaper_than is None or e.cost < cheaper_than)
            and serves(e, vector, delta)
        ]
        return sorted(found, key=lambda e: e.rank)[: row_limit(limit)]

    def get(self, execution_id: str) -> Execution | None:
        """One entry, or None."""
        return self.entries.get(execution_id)

    def delete(self, execution_id: str) -> bool:
        """Forget an entry (chosen, or found unattainable); True when it existed."""
        return self.entries.pop(execution_id, None) is not None

    def list(self, limit: int | None = None) -> list[Execution]:
        """Entries, newest first."""
        newest = sorted(self.entries.values(), key=lambda e: (-e.end, e.id))
        return newest[: row_limit(limit)]

    def count(self) -> int:
        """How many entries there are."""
        return len(self.entries)

    def prune(self, *, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete entries older than ``older_than`` and all but the newest ``keep``."""
        doomed: set[str] = set()
        if older_than is not None:
            doomed = {e.id for e in self.entries.values() if e.end < older_than}
        if keep is not None:
            doomed |= {e.id for e in self.list()[keep:]}
        for execution_id in doomed:
            del self.entries[execution_id]
        return len(doomed)

    def record_shadow(self, cycle: ShadowCycle) -> None:
        """Add a cycle to the shadow account (idempotent by id)."""
        self.shadow[cycle.id] = cycle

    def shadow_cycles(self, since: float, until: float) -> ShadowCycles:
        """The account's cycles in ``[since, until]``, oldest first."""
        found = (c for c in self.shadow.values() if since <= c.at <= until)
        return sorted(found, key=lambda c: c.at)

    def close(self) -> None:
        """Nothing to release."""
