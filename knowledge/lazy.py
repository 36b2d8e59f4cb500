"""The daemon's knowledge base: connected on demand, so an unreachable store never stops it.

:class:`LazyKnowledge` implements :class:`knowledge.base.KnowledgeBase`. It opens the configured
backend at the first call and again after a failed open; every failure is a
:class:`~knowledge.base.KnowledgeError`, which the cycle turns into "previous-deployment option
skipped for this window". It also keeps the number of stored executions for the metrics,
counted once per connection (one aggregate, no execution read) and then followed through this
daemon's own writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

from knowledge.base import Closing, KnowledgeBase, KnowledgeError, ShadowCycles
from tuner.model.account import ShadowCycle
from tuner.model.execution import Execution

log = logging.getLogger(__name__)
T = TypeVar("T")


class LazyKnowledge(Closing):
    """A knowledge base opened through ``opener`` when first needed."""

    def __init__(self, opener: Callable[[], KnowledgeBase]) -> None:
        self._opener = opener
        self._kb: KnowledgeBase | None = None
        self._size: int | None = None

    def size(self) -> int | None:
        """How many executions are stored, or None when the store cannot be reached."""
        if self._size is None:
            try:
                self._size = self.count()
            except KnowledgeError as err:
                log.debug("knowledge-base size unknown: %s", err)
        return self._size

    def record(self, execution: Execution) -> None:
        self._call(lambda kb: kb.record(execution))
        self._count(+1)

    def find_by_load(
        self,
        load: float,
        delta: float,
        *,
        cheaper_than: float | None = None,
        limit: int | None = None,
        vector: Mapping[str, float] | None = None,
    ) -> list[Execution]:
        return self._call(
            lambda kb: kb.find_by_load(
                load, delta, cheaper_than=cheaper_than, limit=limit, vector=vector
            )
        )

    def get(self, execution_id: str) -> Execution | None:
        return self._call(lambda kb: kb.get(execution_id))

    def delete(self, execution_id: str) -> bool:
        deleted = self._call(lambda kb: kb.delete(execution_id))
        if deleted:
            self._count(-1)
        return deleted

    def list(self, limit: int | None = None) -> list[Execution]:
        return self._call(lambda kb: kb.list(limit))

    def count(self) -> int:
        return self._call(lambda kb: kb.count())

    def prune(self, *, older_than: float | None = None, keep: int | None = None) -> int:
        pruned = self._call(lambda kb: kb.prune(older_than=older_than, keep=keep))
        self._size = None
        return pruned

    def record_shadow(self, cycle: ShadowCycle) -> None:
        self._call(lambda kb: kb.record_shadow(cycle))

    def shadow_cycles(self, since: float, until: float) -> ShadowCycles:
        return self._call(lambda kb: kb.shadow_cycles(since, until))

    def close(self) -> None:
        if self._kb is not None:
            self._kb.close()
            self._kb = None

    def _call(self, work: Callable[[KnowledgeBase], T]) -> T:
        if self._kb is None:
            self._kb = self._opener()
            log.info("knowledge base connected")
        try:
            return work(self._kb)
        except KnowledgeError:
            self._size = None
            raise

    def _count(self, change: int) -> None:
        if self._size is not None:
            self._size += change
