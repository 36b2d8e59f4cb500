"""What runs next to HPA and the Cluster Autoscaler in a simulation.

- ``autoscaler``: nothing (the Cluster Autoscaler alone);
- ``binpacking``: ``MostAllocated`` scoring and GKE's ``optimize-utilization`` scale-down;
- ``descheduler``: the descheduler's ``HighNodeUtilization`` with ``MostAllocated`` scoring;
- ``karpenter``: Karpenter instead of the Cluster Autoscaler;
- ``tuner2019``: a re-implementation of the 2019 thesis' tuner's decisions;
- ``tuner``: this project's tuner (the real cycle: ``tuner.analyse``, ``tuner.plan``) with the
  daemon's defaults and ``execute.node_removal: command`` (drained nodes deleted at once);
- ``tuner-unlimited``: the same with drained nodes left to the Cluster Autoscaler (the default
  ``execute.node_removal``);
- ``tuner-reserve``: ``tuner`` provisioning ahead of a forecast rise (up to three nodes);
- ``binpacking-tuner``: ``tuner-unlimited`` beside ``binpacking``'s scheduler and scale-down;
- ``karpenter-tuner``: ``tuner-unlimited`` beside Karpenter instead of the Cluster Autoscaler.

The lower bound is not a strategy: :mod:`tuner.sim.report` computes it from a run's requests.
"""

from __future__ import annotations

from collections.abc import Callable

from tuner.sim.engine import Scenario
from tuner.sim.strategies.autoscaler_only import AutoscalerOnly
from tuner.sim.strategies.binpacking import BinPacking
from tuner.sim.strategies.descheduler import Descheduler
from tuner.sim.strategies.karpenter import KarpenterStrategy
from tuner.sim.strategies.thesis2019 import Tuner2019
from tuner.sim.strategies.tuner import (
    KarpenterTuner,
    PackingTuner,
    ProjectTuner,
    reserve_settings,
    unlimited_settings,
)
from tuner.sim.strategy import Strategy

STRATEGIES: dict[str, Callable[[Scenario, int], Strategy]] = {
    "autoscaler": lambda scenario, seed: AutoscalerOnly(),
    "binpacking": lambda scenario, seed: BinPacking(),
    "descheduler": lambda scenario, seed: Descheduler(),
    "karpenter": lambda scenario, seed: KarpenterStrategy(),
    "tuner2019": Tuner2019,
    "tuner": ProjectTuner,
    "tuner-unlimited": lambda scenario, seed: ProjectTuner(
        scenario, seed, unlimited_settings(scenario, seed)
    ),
    "tuner-reserve": lambda scenario, seed: ProjectTuner(
        scenario, seed, reserve_settings(scenario, seed)
    ),
    "binpacking-tuner": PackingTuner,
    "karpenter-tuner": KarpenterTuner,
}
LABELS = {
    "autoscaler": "CA alone",
    "binpacking": "CA + MostAllocated",
    "descheduler": "CA + descheduler",
    "karpenter": "Karpenter",
    "tuner2019": "CA + 2019 tuner",
    "tuner": "CA + tuner",
    "tuner-unlimited": "CA + tuner, nodes left to the CA",
    "tuner-reserve": "CA + tuner, provisioning ahead",
    "binpacking-tuner": "CA + MostAllocated + tuner",
    "karpenter-tuner": "Karpenter + tuner",
}
