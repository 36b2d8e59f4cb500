"""The Cluster Autoscaler with a bin-packing scheduler, as GKE's ``optimize-utilization``
autoscaling profile sets them up.

What is documented:

- GKE's "About cluster autoscaling" page: with ``optimize-utilization`` the cluster autoscaler
  scales down more aggressively (it removes more nodes, and removes them faster), and GKE
  schedules pods onto nodes that already have a high allocation; the pods' events name the
  scheduler ``gke.io/optimize-utilization-scheduler``. The descheduler's README says this
  profile has the same effect as the scheduler's ``MostAllocated`` scoring strategy.
- A Cluster Autoscaler maintainer (``kubernetes/autoscaler`` issue 2798): GKE runs a fork of
  the Cluster Autoscaler, and the profile "doesn't directly map to any single feature or
  configuration of CA"; no flag values are published.

What is assumed here: NodeResourcesFit with ``MostAllocated`` (CPU and memory weighted 1:1)
next to kube-scheduler's other default plugins and weights; for "removes nodes faster", a
``scale-down-unneeded-time`` of 1 minute instead of 10 (the flag's smallest round value; the
profile's real timing is unpublished); every other Cluster Autoscaler flag at its default
(utilization threshold 0.5, 10 minutes after a scale-up).
"""

from __future__ import annotations

from dataclasses import replace

from tuner.sim.autoscaler import AutoscalerConfig
from tuner.sim.engine import Simulation
from tuner.sim.scheduler import MOST_ALLOCATED
from tuner.sim.strategy import Strategy

UNNEEDED_TIME = 60.0


class BinPacking(Strategy):
    """Nothing acts but the autoscaler and the scheduler, both set up for utilization."""

    name = "binpacking"
    scoring = MOST_ALLOCATED

    @staticmethod
    def profile(config: AutoscalerConfig) -> AutoscalerConfig:
        """The Cluster Autoscaler's flags under ``optimize-utilization`` (assumed values)."""
        return replace(config, unneeded_time=UNNEEDED_TIME)

    def on_tick(self, sim: Simulation) -> None:
        """Nothing to do."""
