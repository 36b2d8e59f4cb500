"""The knowledge-base interface that every backend implements, and how one is opened."""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Protocol, Self

from tuner.errors import InputError, ServiceError
from tuner.model.account import ShadowCycle
from tuner.model.execution import Execution, shown
from tuner.model.load import dimensions_outside

log = logging.getLogger(__name__)
ShadowCycles = list[ShadowCycle]


class KnowledgeError(ServiceError):
    """The knowledge base cannot be reached or used (the caller decides whether to go on)."""


class KnowledgeRefused(KnowledgeError, InputError):
    """The knowledge base refuses what it was given: another program's file as the store, or
    an execution whose id is stored with another content. Bad input on the command line
    (exit status 2); to the daemon a KnowledgeError like any other (the window goes on)."""


def distinct(executions: Iterable[Execution]) -> dict[str, Execution]:
    """``executions`` by id, each once; raises KnowledgeRefused for an id given twice with two
    contents (ids are content hashes)."""
    batch: dict[str, Execution] = {}
    for execution in executions:
        first = batch.setdefault(execution.id, execution)
        if first != execution:
            raise KnowledgeRefused(
                f"execution {execution.id!r} is given twice with two contents "
                f"({_difference(first, execution)}); nothing was written"
            )
    return batch


def check_same(stored: Execution | ValueError, given: Execution) -> None:
    """Raise KnowledgeRefused unless ``given`` is what is ``stored`` under its id (or why the
    stored one cannot be read): an id names one content, so recording it again may only
    repeat it."""
    if stored == given:
        return
    detail = (
        f"unreadable: {stored}" if isinstance(stored, ValueError) else _difference(stored, given)
    )
    raise KnowledgeRefused(
        f"execution {given.id!r} is already stored with another content ({detail}); nothing "
        f"was written (`tuner kb delete {given.id}` first to replace it)"
    )


def _difference(old: Execution, new: Execution) -> str:
    """The first field in which two executions differ, e.g. ``cost 1.5488, not 0.0``."""
    before, after = old.to_json(), new.to_json()
    key = next((k for k in (*before, *after) if before.get(k) != after.get(k)), "content")
    if key in ("nodes", "workloads", "content"):
        return f"other {key}"
    return f"{key} {shown(before.get(key))}, not {shown(after.get(key))}"


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

    def count(self) -> int:
        """How many executions are stored (none of them read)."""

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
