"""The fluid lower bound: hand-computed single-pool cases, and the exact optimum of the linear
programme (checked against SciPy's solver) for mixes of pools."""

from __future__ import annotations

import random

import pytest
from scipy.optimize import linprog

from tuner.sim.bound import FluidBound
from tuner.sim.pools import NodePool
from tuner.sim.prices import NODE_TYPES
from tuner.sim.workloads import GIB, Service

E4 = NODE_TYPES["e2-standard-4"]  # 3920m, 0.13402 USD/h
E8 = NODE_TYPES["e2-standard-8"]  # 7910m, 0.26805 USD/h
HIGHMEM = NODE_TYPES["e2-highmem-4"]
PROXY = Service("proxy", 120, 0, kind="DaemonSet", namespace="kube-system")


def test_one_pool_is_the_largest_fractional_need() -> None:
    bound = FluidBound((NodePool("p", E4),), (PROXY,))
    mix = bound(3800 * 5 // 2, 1 * GIB, 10)  # 9500m over 3800m of room per node: 2.5 nodes
    assert mix.nodes == pytest.approx(2.5)
    assert mix.cost == pytest.approx(2.5 * E4.price)


def test_the_pool_minimum_is_always_paid() -> None:
    bound = FluidBound((NodePool("p", E4, min_nodes=3),), ())
    assert bound(0, 0, 0).nodes == pytest.approx(3)
    assert bound(100, 0, 1).cost == pytest.approx(3 * E4.price)


def test_memory_heavy_demand_takes_the_memory_optimised_type() -> None:
    pools = (NodePool("general", E4), NodePool("highmem", HIGHMEM))
    bound = FluidBound(pools, ())
    memory = HIGHMEM.allocatable.memory * 4
    mix = bound(1000, memory, 20)
    assert mix.nodes == pytest.approx(4)  # four e2-highmem-4 hold it; e2-standard-4 cost more
    assert mix.cost == pytest.approx(4 * HIGHMEM.price)


def test_mixes_match_the_linear_programme_optimum() -> None:
    pools = (NodePool("a", E4, min_nodes=1), NodePool("b", E8), NodePool("c", HIGHMEM))
    bound = FluidBound(pools, (PROXY,))
    rng = random.Random(5)
    for _ in range(40):
        demand = (rng.randrange(0, 80_000), rng.randrange(0, 300 * GIB), rng.randrange(0, 600))
        rooms = [
            (
                p.node_type.allocatable.cpu - PROXY.cpu,
                p.node_type.allocatable.memory,
                p.node_type.max_pods - 1,
            )
            for p in pools
        ]
        result = linprog(
            [p.node_type.price for p in pools],
            A_ub=[[-r[j] for r in rooms] for j in range(3)],
            b_ub=[-d for d in demand],
            bounds=[(p.min_nodes, None) for p in pools],
        )
        assert bound(*demand).cost == pytest.approx(result.fun, rel=1e-6)
