"""The strategy's turn as a process the simulation suspends and resumes, so that simulated time
passes in one place only: :meth:`Simulation.advance`'s loop of ticks.

A strategy's turn that waits (a provision waiting for its node, :mod:`tuner.sim.executor`) is
suspended where it waits, with what it waits for; the tick closes and the next ticks run their
controllers without a strategy's turn. At each of those turns the simulation checks the wait,
after the controllers, as the executor would see the cluster: once it is over (the node is
ready, or the timeout passed) the turn resumes from where it stopped, in that tick, and the
tick closes after it. A run does not end while a turn waits.

The turn runs in a greenlet (one per simulation, reused every tick): the tuner's own cycle
(:func:`tuner.cycle.run_cycle`) waits for a provision as the daemon does, in a plain call, and
is suspended without being rewritten as a generator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from greenlet import getcurrent, greenlet


@dataclass(frozen=True, slots=True)
class Wait:
    """What a suspended turn waits for: ``done()``, or the clock reaching ``deadline``."""

    done: Callable[[], bool]
    deadline: float

    def over(self, now: float) -> bool | None:
        """True when done, False when timed out, None while it still waits."""
        if self.done():
            return True
        if now >= self.deadline - 1e-9:
            return False
        return None


class Turns:
    """Runs a strategy's turn each tick, or resumes the turn that waits once its wait is over."""

    def __init__(self, turn: Callable[[], None]) -> None:
        self._turn = turn
        self._process: greenlet | None = None
        self._tick = getcurrent()
        """Where the ticks run (what a turn switches back to)."""
        self.waiting: Wait | None = None
        """What the suspended turn waits for (None: no turn is suspended)."""

    def take(self, now: float) -> None:
        """The strategy's turn in this tick: a new one, or the waiting one if its wait is over
        (then it goes on from where it stopped); nothing while it still waits."""
        self._tick = getcurrent()
        if self.waiting is None:
            if self._process is None or self._process.dead:
                self._process = greenlet(self._loop)
            self._process.switch()
            return
        over = self.waiting.over(now)
        if over is None:
            return
        self.waiting = None
        if self._process is not None:
            self._process.switch(over)

    def wait(self, done: Callable[[], bool], deadline: float) -> bool | None:
        """From inside a turn: suspend it until ``done()`` or ``deadline``; whether ``done()``
        came true. Outside any turn (a driver between ticks): None, nothing is suspended."""
        process = self._process
        if process is None or getcurrent() is not process:
            return None
        self.waiting = Wait(done, deadline)
        resumed: bool = self._tick.switch()
        return resumed

    def _loop(self) -> None:
        """The process: one turn per switch into it, then back to the tick."""
        while True:
            self._turn()
            self._tick.switch()
