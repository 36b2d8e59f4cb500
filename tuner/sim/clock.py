"""The simulation's clock: the time now, the length of a tick, and timed events.

An event is a callable due at a time; :meth:`Clock.fire_due` runs those due by now, earliest
first and, at the same instant, in the order they were scheduled.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable


class Clock:
    """Simulated time, advanced tick by tick, with a queue of timed events."""

    __slots__ = ("_events", "_scheduled", "now", "tick")

    def __init__(self, start: float, tick: float) -> None:
        self.now = start
        self.tick = tick
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._scheduled = 0

    def schedule(self, at: float, event: Callable[[], None]) -> None:
        """Run ``event`` at the first :meth:`fire_due` at or after ``at``."""
        self._scheduled += 1
        heapq.heappush(self._events, (at, self._scheduled, event))

    def fire_due(self) -> None:
        """Run the events due by now, in time order, then in the order they were scheduled."""
        events = self._events
        while events and events[0][0] <= self.now:
            heapq.heappop(events)[2]()

    def advance(self) -> None:
        """One tick later."""
        self.now += self.tick
