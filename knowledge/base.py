"""The knowledge-base interface that every backend implements, and how one is opened."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol

from knowledge.records import Execution
from tuner.errors import ServiceError


class KnowledgeError(ServiceError):
    """The knowledge base cannot be reached or used (the caller decides whether to go on)."""


class KnowledgeBase(Protocol):
    """Stable deployments keyed by load. Backends: embedded (SQLite) and Neo4j."""

    def record(self, execution: Execution) -> None:
        """Store an execution; recording the same id again changes nothing (idempotent)."""

    def find_by_load(self, load: float, delta: float) -> list[Execution]:
        """Executions with load in ``load*(1±delta)``, cheapest first, ties by lower cpu_ratio."""

    def get(self, execution_id: str) -> Execution | None:
        """One execution with its full deployment, or None."""

    def delete(self, execution_id: str) -> bool:
        """Remove an execution; True when it existed."""

    def list(self, limit: int | None = None) -> list[Execution]:
        """Executions, newest (by end of window) first."""

    def prune(self, *, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete executions whose window ended before ``older_than`` and all but the newest
        ``keep``; returns how many were deleted."""

    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> KnowledgeBase: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None: ...


def load_band(load: float, delta: float) -> tuple[float, float]:
    """The inclusive load range that counts as the same load."""
    return load * (1 - delta), load * (1 + delta)
