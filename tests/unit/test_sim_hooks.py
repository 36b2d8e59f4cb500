"""The strategy hooks of the simulation: scheduler scoring, a Cluster Autoscaler profile (CA +
MostAllocated, GKE's ``optimize-utilization``), and an autoscaler that replaces the Cluster
Autoscaler."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

import pytest

from tuner.sim import engine, report
from tuner.sim.autoscaler import AutoscalerConfig, ClusterAutoscaler
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.load import Phase, Phases
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.state import SimCluster, SimPod
from tuner.sim.strategies.autoscaler_only import AutoscalerOnly
from tuner.sim.strategies.binpacking import BinPacking
from tuner.sim.strategy import Autoscaler, Strategy
from tuner.sim.workloads import Service

E2 = NODE_TYPES["e2-standard-4"]


def tiny(initial_nodes: int = 1, min_nodes: int = 0) -> Scenario:
    return Scenario(
        name="tiny",
        title="tiny",
        services=(Service("web", 500, 2**28, replicas=2, namespace="shop"),),
        daemonsets=(),
        loads={"shop": Phases(60, (Phase(1800, 1.0),))},
        pools=(NodeGroup("pool", E2, min_nodes, 5, initial_nodes),),
        duration=1800,
        warmup=0,
    )


class Plain(Strategy):
    name = "plain"

    def on_tick(self, sim: Simulation) -> None:
        """Nothing."""


class Packing(Plain):
    scoring = "MostAllocated"

    @staticmethod
    def profile(config: AutoscalerConfig) -> AutoscalerConfig:
        return replace(config, unneeded_time=60.0)


@dataclass
class Counting:
    """An autoscaler that only counts its calls."""

    calls: list[float] = field(default_factory=list)

    def step(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> list[SimPod]:
        self.calls.append(now)
        return []


class Replacing(Plain):
    def __init__(self) -> None:
        self.counting = Counting()

    def autoscaler(self, scenario: Scenario) -> Autoscaler:
        return self.counting


def test_without_hooks_the_default_scheduler_and_cluster_autoscaler_run() -> None:
    sim = Simulation(tiny(), 1, Plain())
    assert sim.scheduler.scoring == "LeastAllocated"
    assert isinstance(sim.autoscaler, ClusterAutoscaler)
    assert sim.autoscaler.config == tiny().autoscaler


def test_scoring_and_profile_hooks_are_applied() -> None:
    sim = Simulation(tiny(), 1, Packing())
    assert sim.scheduler.scoring == "MostAllocated"
    assert isinstance(sim.autoscaler, ClusterAutoscaler)
    assert sim.autoscaler.config.unneeded_time == 60.0


def test_a_replacement_autoscaler_runs_every_tick_instead() -> None:
    strategy = Replacing()
    sim = Simulation(tiny(), 1, strategy)
    sim.advance(30)
    assert sim.autoscaler is strategy.counting
    assert strategy.counting.calls == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]


def spare_node_removed_at(strategy: Strategy) -> float:
    sim = Simulation(tiny(initial_nodes=2, min_nodes=1), 1, strategy)
    while len(sim.cluster_state.nodes) == 2:
        sim.advance(5)
    return sim.now


def test_optimize_utilization_removes_a_spare_node_after_one_minute_instead_of_ten() -> None:
    assert 60 <= spare_node_removed_at(BinPacking()) <= 75  # unneeded 60 s, next 10 s scan
    assert 600 <= spare_node_removed_at(AutoscalerOnly()) <= 615


def test_optimize_utilization_changes_only_the_unneeded_time() -> None:
    config = tiny().autoscaler
    profiled = BinPacking.profile(config)
    assert profiled.unneeded_time == 60.0 and config.unneeded_time == 600.0
    assert profiled.utilization_threshold == config.utilization_threshold == 0.5
    assert profiled.delay_after_add == config.delay_after_add


class Watched(Strategy):
    """A strategy that notes every attribute the simulation reads of it."""

    name = "watched"

    def __init__(self) -> None:
        self.read: set[str] = set()

    def __getattribute__(self, attr: str) -> object:
        if not attr.startswith("__") and attr != "read":
            object.__getattribute__(self, "read").add(attr)
        return object.__getattribute__(self, attr)


def declared() -> set[str]:
    """The members of the Strategy protocol: its attributes and its methods."""
    methods = {k for k, v in vars(Strategy).items() if callable(v) and not k.startswith("_")}
    return set(Strategy.__annotations__) | methods


def test_the_simulation_reads_of_a_strategy_only_what_its_protocol_declares() -> None:
    strategy = Watched()
    Simulation(tiny(), 1, strategy).advance(60)
    assert {"scoring", "profile", "autoscaler", "on_tick"} <= strategy.read <= declared()


@pytest.mark.parametrize("module", [engine, report])
def test_the_engine_and_the_report_read_no_attribute_by_name(module: ModuleType) -> None:
    """What they read of a strategy is declared in the ``Strategy`` protocol (its hooks and
    its ``tally``)."""
    source = Path(str(module.__file__)).read_text("utf-8")
    called = {
        node.func.id
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not called & {"getattr", "hasattr", "vars"}
