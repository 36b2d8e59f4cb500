"""What runs next to the cluster's autoscalers in a simulation (:class:`Strategy`: nothing, a
peer, the 2019 tuner, or ours), and what adds and removes nodes (:class:`Autoscaler`: the Cluster
Autoscaler or a replacement).

Every hook the simulation reads from a strategy is declared here, with the default a strategy
that does not care inherits by subclassing :class:`Strategy`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tuner.sim.autoscaler import AutoscalerConfig, ClusterAutoscaler
from tuner.sim.scheduler import LEAST_ALLOCATED
from tuner.sim.state import SimCluster, SimPod

if TYPE_CHECKING:
    from tuner.sim.engine import Scenario, Simulation


class Autoscaler(Protocol):
    """What adds and removes nodes each tick: the Cluster Autoscaler or a replacement."""

    def step(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> list[SimPod]:
        """Act if due; returns the pods it evicted (now pending)."""


@dataclass(frozen=True)
class Tally:
    """What a strategy counted over a run, for the results: its decisions by kind, and the
    windows it judged and found stable."""

    decisions: Mapping[str, int] = field(default_factory=dict)
    stable_windows: int = 0
    windows: int = 0


class Strategy(Protocol):
    """What runs next to the autoscalers. The simulation reads ``scoring``, ``profile`` and
    ``autoscaler`` once when it starts, and calls ``on_tick`` every tick from its
    ``strategy_from`` (by default after the warm-up);
    the report reads ``tally`` at the end."""

    name: str
    scoring: str = LEAST_ALLOCATED
    """kube-scheduler's NodeResourcesFit scoring strategy."""

    def profile(self, config: AutoscalerConfig) -> AutoscalerConfig:
        """The Cluster Autoscaler's flags this strategy runs it with (by default the
        scenario's)."""
        return config

    def autoscaler(self, scenario: Scenario) -> Autoscaler | None:
        """An autoscaler that replaces the Cluster Autoscaler (Karpenter), or None."""
        return None

    def on_tick(self, sim: Simulation) -> None:
        """Called once per tick after the autoscalers; may call ``sim.apply``."""

    def tally(self) -> Tally:
        """What it counted over the run (nothing by default)."""
        return Tally()


def autoscaler_of(
    scenario: Scenario, strategy: Strategy | None, rng: random.Random, pool_label: str
) -> Autoscaler:
    """The strategy's autoscaler: its replacement, else the Cluster Autoscaler with the
    strategy's profile of flags (with no strategy, the scenario's)."""
    config = scenario.autoscaler
    if strategy is not None:
        replacement = strategy.autoscaler(scenario)
        if replacement is not None:
            return replacement
        config = strategy.profile(config)
    return ClusterAutoscaler(config, scenario.pools, scenario.daemonsets, rng, pool_label)
