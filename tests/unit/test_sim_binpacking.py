"""CA + MostAllocated (GKE's ``optimize-utilization`` profile): the scheduler packs, and the
Cluster Autoscaler removes an unneeded node after 1 minute instead of 10."""

from __future__ import annotations

from tuner.sim.engine import Scenario, Simulation, Strategy
from tuner.sim.load import Phase, Phases
from tuner.sim.pools import NodePool
from tuner.sim.prices import NODE_TYPES
from tuner.sim.strategies.autoscaler_only import AutoscalerOnly
from tuner.sim.strategies.binpacking import BinPacking
from tuner.sim.workloads import Service

E4 = NODE_TYPES["e2-standard-4"]


def two_nodes_one_needed() -> Scenario:
    return Scenario(
        name="spare",
        title="spare",
        services=(Service("web", 500, 2**28, replicas=2, namespace="shop"),),
        daemonsets=(),
        loads={"shop": Phases(60, (Phase(1800, 1.0),))},
        pools=(NodePool("pool", E4, min_nodes=1, initial_nodes=2),),
        duration=1800,
        warmup=0,
    )


def removed_at(strategy: Strategy) -> float:
    sim = Simulation(two_nodes_one_needed(), 1, strategy)
    while len(sim.cluster_state.nodes) == 2:
        sim.advance(5)
    return sim.now


def test_the_profile_removes_the_spare_node_after_one_minute_instead_of_ten() -> None:
    assert 60 <= removed_at(BinPacking()) <= 75  # unneeded for 60 s, next 10 s scan
    assert 600 <= removed_at(AutoscalerOnly()) <= 615


def test_the_profile_changes_only_the_unneeded_time() -> None:
    config = two_nodes_one_needed().autoscaler
    profiled = BinPacking.profile(config)
    assert profiled.unneeded_time == 60.0 and config.unneeded_time == 600.0
    assert profiled.utilization_threshold == config.utilization_threshold == 0.5
    assert profiled.delay_after_add == config.delay_after_add
