"""What runs next to HPA and the Cluster Autoscaler in a simulation.

- ``autoscaler``: nothing (the Cluster Autoscaler alone);
- ``tuner2019``: a re-implementation of the 2019 thesis' tuner's decisions;
- ``tuner``: this project's tuner (the real ``tuner.analyse`` and ``tuner.plan``).

The lower bound is not a strategy: :mod:`tuner.sim.report` computes it from a run's requests.
"""

from __future__ import annotations

from collections.abc import Callable

from tuner.sim.engine import Scenario, Strategy
from tuner.sim.strategies.autoscaler_only import AutoscalerOnly
from tuner.sim.strategies.thesis2019 import Tuner2019
from tuner.sim.strategies.tuner import ProjectTuner

STRATEGIES: dict[str, Callable[[Scenario, int], Strategy]] = {
    "autoscaler": lambda scenario, seed: AutoscalerOnly(),
    "tuner2019": Tuner2019,
    "tuner": ProjectTuner,
}
LABELS = {
    "autoscaler": "CA alone",
    "tuner2019": "CA + 2019 tuner",
    "tuner": "CA + tuner",
}
