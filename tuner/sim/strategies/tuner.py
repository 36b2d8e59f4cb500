"""This project's tuner in the simulator: the daemon's own cycle (``tuner.cycle.run_cycle``: the
real monitor verdict rules, knowledge-base bookkeeping, ``tuner.analyse`` and ``tuner.plan``) over
the simulation's ports (``tuner.sim.ports``), with an in-memory knowledge base.

Settings (:func:`simulation_settings`): the scenario's node price table; cluster thresholds of
85 % CPU and memory requests (headroom for the next HPA scale-up); up to two nodes per plan;
candidates must stay candidates for 10 minutes; a 10-minute window re-checked every minute;
no exploration; emptied nodes are left cordoned to the Cluster Autoscaler (the default
``execute.node_removal``), which deletes them after its own unneeded time.
"""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

from knowledge.memory import MemoryKnowledge
from tuner.cycle import CycleState, Ports, run_cycle
from tuner.settings import Analyse, Execute, Load, Settings, Thresholds, Windows
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.pools import pricing
from tuner.sim.ports import SimActuator, SimObserver


def simulation_settings(scenario: Scenario, seed: int) -> Settings:
    """The settings the tuner runs with in the simulator."""
    return Settings(
        pricing=pricing(scenario.pools),
        analyse=Analyse(
            max_parallel_removals=2,
            thresholds=Thresholds(Fraction(85, 100), Fraction(85, 100)),
            candidate_delay_s=600.0,
            migration_chance=0.0,
            seed=seed,
        ),
        load=Load(delta=0.1),
        windows=Windows(measure_s=600.0, retry_s=60.0),
        execute=Execute(node_removal="autoscaler"),
    )


class ProjectTuner:
    """The daemon's cycle, run whenever the previous one said the next is due."""

    name = "tuner"

    def __init__(self, scenario: Scenario, seed: int, settings: Settings | None = None) -> None:
        self.settings = settings or simulation_settings(scenario, seed)
        self.rng = random.Random(seed)
        self.knowledge = MemoryKnowledge()
        self.state = CycleState()
        self.next_check = 0.0
        self.windows = 0
        """Windows the monitor judged."""
        self.stable_windows = 0
        self.decisions: Counter[str] = Counter()
        self._ports: Ports | None = None

    def on_tick(self, sim: Simulation) -> None:
        """Run a cycle when one is due."""
        if sim.now < self.next_check:
            return
        if self._ports is None:
            actuator = SimActuator(sim, self.settings.execute.node_removal)
            self._ports = Ports(SimObserver(sim, self.settings.windows), actuator, self.knowledge)
        report, self.state = run_cycle(sim.now, self.state, self.settings, self._ports, self.rng)
        if report.window is not None:
            self.windows += 1
            self.stable_windows += report.window.actionable
        if report.plan is not None:
            self.decisions[report.plan.analysis.decision.value] += 1
        self.next_check = sim.now + report.next_in
