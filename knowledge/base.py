"""The knowledge-base interface that every backend implements, and how one is opened."""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Protocol, Self

from tuner.errors import ServiceError
from tuner.model.account import ShadowCycle
from tuner.model.execution import Execution
from tuner.model.load import dimensions_outside

log = logging.getLogger(__name__)
ShadowCycles = list[ShadowCycle]


class KnowledgeError(ServiceError):
    """The knowledge base cannot be reached or used (the caller decides whether to go on)."""


class KnowledgeBase(Protocol):
    """Stable deployments keyed by load. Backends: embedded (SQLite) and Neo4j."""

    def record(self, execution: Execution) -> None:
        """Store an execution; recording the same id again changes nothing (idempotent)."""

    def find_by_load(
        self,
        load: float,
        delta: float,
        *,
        cheaper_than: float | None = None,
        limit: int | None = None,
        vector: Mapping[str, float] | None = None,
    ) -> list[Execution]:
        """Executions with load in ``load*(1±delta)`` (and, given ``cheaper_than``, a cost
        below it), cheapest first, ties by lower cpu_ratio, then id (:attr:`Execution.rank`).

        Given ``vector`` (the load per dimension, ``load`` being its total; ``{"": load}``
        for a scalar load), only executions that served the same load per dimension
        (:func:`serves`) count, and ``limit`` counts only those. A scalar query never matches
        an execution recorded with a vector, nor the other way round (unless the dimensions
        they lack are 0).

        Only the first ``limit`` are read in full (the order and the limit apply in the store,
        before the deployments are read); an unreadable one among them is skipped, so fewer
        may come back. Raises ValueError for a negative ``limit``.
        """

    def get(self, execution_id: str) -> Execution | None:
        """One execution with its full deployment, or None."""

    def delete(self, execution_id: str) -> bool:
        """Remove an execution; True when it existed."""

    def list(self, limit: int | None = None) -> list[Execution]:
        """Executions, newest (by end of window) first."""

    def prune(self, *, older_than: float | None = None, keep: int | None = None) -> int:
        """Delete executions whose window ended before ``older_than`` and all but the newest
        ``keep``; returns how many were deleted."""

    def record_shadow(self, cycle: ShadowCycle) -> None:
        """Add a cycle to the shadow account (``tuner run --shadow``); recording the same
        cycle (:attr:`ShadowCycle.id`) again changes nothing."""

    def shadow_cycles(self, since: float, until: float) -> ShadowCycles:
        """The shadow account's cycles with ``since <= at <= until``, oldest first; malformed
        ones are skipped with a warning."""

    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> KnowledgeBase: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None: ...


def serves(execution: Execution, vector: Mapping[str, float] | None, delta: float) -> bool:
    """True when ``execution`` served the load ``vector`` (None: any load), within ``delta``
    per dimension: :meth:`tuner.model.load.Load.within`, a missing dimension being 0.

    Within per dimension implies the total within ``delta`` of ``vector``'s total, so the
    load band (:func:`load_band`) stays a valid first narrowing."""
    return vector is None or not dimensions_outside(vector, execution.served, delta)


def load_band(load: float, delta: float) -> tuple[float, float]:
    """The inclusive load range that counts as the same load."""
    return load * (1 - delta), load * (1 + delta)


def decode_shadow(rows: Iterable[tuple[str, str]]) -> Iterator[ShadowCycle]:
    """The shadow cycles of ``(id, JSON body)`` rows; malformed ones are logged and skipped."""
    for cycle_id, body in rows:
        try:
            yield ShadowCycle.from_json(json.loads(body))
        except (ValueError, KeyError, TypeError) as err:
            log.warning(
                "skipping malformed shadow cycle %s in the knowledge store: %s", cycle_id, err
            )


EVERY = 1 << 62
"""A row limit no store reaches: "no limit" as a number that SQL and Cypher both take."""


def row_limit(limit: int | None) -> int:
    """``limit`` as the number a query takes (None: :data:`EVERY`); raises ValueError when
    it is negative (SQLite would read that as "no limit", Cypher as an error)."""
    if limit is None:
        return EVERY
    if limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")
    return limit


class Closing(ABC):
    """``with`` support for a knowledge base: :meth:`close` when the block ends."""

    @abstractmethod
    def close(self) -> None:
        """Release what the backend holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
