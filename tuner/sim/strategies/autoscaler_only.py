"""The Cluster Autoscaler alone: nothing else acts on the cluster."""

from __future__ import annotations

from tuner.sim.engine import Simulation
from tuner.sim.strategy import Strategy


class AutoscalerOnly(Strategy):
    """A strategy that never acts."""

    name = "autoscaler"

    def on_tick(self, sim: Simulation) -> None:
        """Nothing to do."""
