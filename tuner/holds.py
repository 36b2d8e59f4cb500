"""What may hold a cycle's change between cycles: the :class:`Safeguards` port (the ledger of
the evictions the tuner made, for the eviction budget, and the operator's pause switch; the
daemon's in ConfigMaps, :class:`MemorySafeguards` in the simulator and tests) and the
maintenance windows, read as the reasons a cycle holds its change."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tuner.errors import ServiceError
from tuner.model.limits import DAY_S, Budget, Evictions, Spent
from tuner.model.maintenance import opening
from tuner.plan.actions import Action, evictions
from tuner.settings import Settings

log = logging.getLogger(__name__)


class Safeguards(Protocol):
    """What limits the tuner between cycles: the ledger of the evictions it made (for the
    eviction budget) and the pause switch an operator flips. Each call may raise a
    :class:`~tuner.errors.ServiceError`; the cycle then holds its change."""

    def spent(self) -> Sequence[Spent]:
        """The evictions of the transitions of (at least) the last day."""

    def begin(self, evicting: Evictions) -> None:
        """Record, before it starts, a transition that will evict ``evicting``."""

    def end(self, evicted: Evictions) -> None:
        """The transition recorded by :meth:`begin` ended having evicted ``evicted``: replace
        its record by that, stamped now."""

    def paused(self) -> str | None:
        """Why the tuner is paused, or None."""


class MemorySafeguards:
    """Safeguards kept in memory against ``clock`` (the simulator's, or the wall clock): for
    the simulator and tests. :attr:`pause` pauses the tuner."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.records: list[Spent] = []
        self.pause: str | None = None

    def spent(self) -> Sequence[Spent]:
        now = self.clock()
        self.records = [r for r in self.records if now - r.at < DAY_S]
        return tuple(self.records)

    def begin(self, evicting: Evictions) -> None:
        self.records.append(Spent.of(self.clock(), evicting))

    def end(self, evicted: Evictions) -> None:
        self.records[-1] = Spent.of(self.clock(), evicted)

    def paused(self) -> str | None:
        return self.pause


def paused_by(safeguards: Safeguards) -> str | None:
    """Why the tuner is paused; a switch that cannot be read pauses it."""
    try:
        return safeguards.paused()
    except ServiceError as err:
        return f"the pause switch cannot be read: {err}"


def budget_left(
    settings: Settings, safeguards: Safeguards, now: float
) -> tuple[Budget | None, str | None]:
    """The eviction budget left (None: no limit), or why it is unknown (then nothing is done)."""
    if not settings.limits.budgeted:
        return None, None
    try:
        return Budget.of(settings.limits, safeguards.spent(), now), None
    except ServiceError as err:
        return None, f"the eviction ledger cannot be read: {err}"


def closed_by(settings: Settings, now: float) -> str | None:
    """Why the maintenance windows keep the tuner from acting now (None: they do not)."""
    window = opening(settings.limits.maintenance_windows, now)
    return None if window.open else window.reason


def settle(safeguards: Safeguards, actions: Sequence[Action], ran: int) -> None:
    """Replace the ledger's record of the transition by what it evicted: the first ``ran``
    actions (those done and the one that failed: it may have evicted before failing)."""
    try:
        safeguards.end(evictions(actions[:ran]))
    except ServiceError as err:
        log.error("eviction ledger not updated (it keeps the plan's evictions): %s", err)
