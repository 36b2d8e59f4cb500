"""Karpenter in place of the Cluster Autoscaler (:mod:`tuner.sim.karpenter`), next to
kube-scheduler's default scoring; it may launch any instance type of the scenario's pools."""

from __future__ import annotations

from dataclasses import replace

from tuner.model.conventions import POOL_LABEL_BY_SYSTEM
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.karpenter import Karpenter
from tuner.sim.karpenter_packing import Offering
from tuner.sim.strategy import Strategy, Tally


class KarpenterStrategy(Strategy):
    """Only Karpenter acts (through the autoscaler hook)."""

    name = "karpenter"

    def __init__(self) -> None:
        self.karpenter: Karpenter | None = None

    def autoscaler(self, scenario: Scenario) -> Karpenter:
        """Karpenter over the scenario's pools with its NodePool settings, starting nodes as
        fast as the CA model's."""
        self.karpenter = Karpenter(
            tuple(Offering(p.name, p.node_type, p.max_nodes, p.zone) for p in scenario.pools),
            scenario.daemonsets,
            replace(scenario.karpenter, provisioning_delay=scenario.autoscaler.provisioning_delay),
            POOL_LABEL_BY_SYSTEM.get(scenario.system, ""),
        )
        return self.karpenter

    def tally(self) -> Tally:
        """Consolidation commands carried out, by method, and nodes launched."""
        if self.karpenter is None:
            return Tally()
        return Tally({**self.karpenter.commands, "launched": self.karpenter.launched})

    def on_tick(self, sim: Simulation) -> None:
        """Nothing beyond the autoscaler."""
