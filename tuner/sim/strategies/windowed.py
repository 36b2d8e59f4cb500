"""The tuning loop both tuners share (thesis §3.2.2, §3.2.6): act only after a stable window.

Every ``retry_s`` the loop asks whether the last ``measure_s`` seconds were stable (the node set
and every workload's pod count unchanged, no pending pod). If so it decides, executes the plan
through the simulated executor and waits a whole window before looking again.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import Counter
from collections.abc import Sequence

from tuner.plan.actions import Action
from tuner.sim.engine import Simulation
from tuner.sim.strategy import Strategy, Tally
from tuner.sim.window_tracking import WindowSummary


class WindowedTuner(Strategy):
    """A tuner that acts on stable windows."""

    name = "windowed"
    on_target_only = False
    """Its executor verifies a new pod on its target only (the 2019 tuner's); else off its
    source and the nodes the plan empties (:meth:`tuner.sim.engine.Simulation.apply`)."""

    def __init__(self, measure_s: float, retry_s: float, node_removal: str) -> None:
        self.measure_s = measure_s
        self.retry_s = retry_s
        self.node_removal = node_removal
        self.next_check = -math.inf
        self.windows = 0
        self.stable_windows = 0
        self.decisions: Counter[str] = Counter()

    def tally(self) -> Tally:
        """Decisions by kind, windows stable and judged."""
        return Tally(self.decisions, self.stable_windows, self.windows)

    def on_tick(self, sim: Simulation) -> None:
        """Check the window when due; act on a stable one."""
        if sim.now < self.next_check:
            return
        self.windows += 1
        window = sim.window(self.measure_s)
        if not window.stable:
            self.next_check = sim.now + self.retry_s
            return
        self.stable_windows += 1
        actions = self.decide(sim, window)
        if actions:
            sim.apply(actions, self.node_removal, on_target_only=self.on_target_only)
        self.next_check = sim.now + self.measure_s

    @abstractmethod
    def decide(self, sim: Simulation, window: WindowSummary) -> Sequence[Action]:
        """The actions to take after a stable window."""
