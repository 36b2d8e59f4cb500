"""This project's tuner in the simulator: the real ``tuner.analyse.decision.analyse`` and
``tuner.plan.planner.plan``, fed by the simulated monitor and carried out by the simulated
executor, with an in-memory knowledge base.

Settings (:func:`simulation_settings`): the scenario's node price table; cluster thresholds of
85 % CPU and memory requests (headroom for the next HPA scale-up); up to two nodes per plan;
candidates must stay candidates for 10 minutes; a 10-minute window re-checked every minute;
no exploration; emptied nodes are left cordoned to the Cluster Autoscaler (the default
``execute.node_removal``), which deletes them after its own unneeded time.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from knowledge.records import execution_of
from tuner.analyse.decision import Choice, analyse
from tuner.analyse.removal import CandidateTimers
from tuner.model.movability import Policy, assess
from tuner.plan.actions import Action
from tuner.plan.planner import plan
from tuner.plan.replay import InfeasiblePlan
from tuner.settings import Analyse, Execute, Load, Pricing, Settings, Thresholds, Windows
from tuner.sim.engine import Scenario, Simulation, Window
from tuner.sim.strategies.knowledge import MemoryKnowledge
from tuner.sim.strategies.windowed import WindowedTuner


def simulation_settings(scenario: Scenario, seed: int) -> Settings:
    """The settings the tuner runs with in the simulator."""
    node_type = scenario.autoscaler.node_type
    return Settings(
        pricing=Pricing(node_types={node_type.name: node_type.price}, currency=node_type.currency),
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


class ProjectTuner(WindowedTuner):
    """The tuner's MAPE-K loop over the simulated cluster."""

    name = "tuner"

    def __init__(self, scenario: Scenario, seed: int, settings: Settings | None = None) -> None:
        self.settings = settings or simulation_settings(scenario, seed)
        super().__init__(
            self.settings.windows.measure_s,
            self.settings.windows.retry_s,
            self.settings.execute.node_removal,
        )
        self.rng = random.Random(seed)
        self.knowledge = MemoryKnowledge()
        self.timers = CandidateTimers()
        self.decisions: Counter[str] = Counter()
        self.infeasible = 0

    def decide(self, sim: Simulation, window: Window) -> Sequence[Action]:
        """Monitor (record the stable deployment), analyse, plan."""
        settings = self.settings
        cluster = sim.cluster()
        movability = assess(cluster, Policy(settings.analyse.excluded_namespaces))
        self.knowledge.record(
            execution_of(
                cluster, movability, settings.pricing, window.load, window.start, window.end
            )
        )
        history = self.knowledge.find_by_load(window.load, settings.load.delta)
        analysis = analyse(cluster, settings, history, self.rng, self.timers, sim.now)
        self.timers = analysis.removal.timers or self.timers
        for execution_id, _ in analysis.previous.unattainable:
            self.knowledge.delete(execution_id)
        if analysis.decision is Choice.PREVIOUS and analysis.previous.execution is not None:
            self.knowledge.delete(analysis.previous.execution.id)
        self.decisions[analysis.decision.value] += 1
        if analysis.change.empty:
            return ()
        try:
            return plan(cluster, analysis.change)
        except InfeasiblePlan:
            self.infeasible += 1
            return ()
