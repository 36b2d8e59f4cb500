"""The whole-node lower bound: hand-computed cases, and the exact optimum of the integer
programme (checked against enumerating every mix) for mixes of pools."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from tuner.sim.bound import WholeBound
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.workloads import GIB, Service

E4 = NODE_TYPES["e2-standard-4"]  # 3920m, 0.13402 USD/h
E8 = NODE_TYPES["e2-standard-8"]  # 7910m, 0.26805 USD/h
HIGHMEM = NODE_TYPES["e2-highmem-4"]
PROXY = Service("proxy", 120, 0, kind="DaemonSet", namespace="kube-system")


def test_one_pool_rounds_the_largest_need_up_to_whole_nodes() -> None:
    bound = WholeBound((NodeGroup("p", E4),), (PROXY,))
    mix = bound(3800 * 5 // 2, 1 * GIB, 10)  # 9500m over 3800m of room per node: 2.5, so 3
    assert mix.nodes == 3
    assert mix.cost == pytest.approx(3 * E4.price)
    assert bound(3800 * 2, 1 * GIB, 10).nodes == 2  # exactly two nodes' room needs no third


def test_the_pool_minimum_is_always_paid() -> None:
    bound = WholeBound((NodeGroup("p", E4, min_nodes=3),), ())
    assert bound(0, 0, 0).nodes == 3
    assert bound(100, 0, 1).cost == pytest.approx(3 * E4.price)


def test_memory_heavy_demand_takes_the_memory_optimised_type() -> None:
    pools = (NodeGroup("general", E4), NodeGroup("highmem", HIGHMEM))
    bound = WholeBound(pools, ())
    memory = HIGHMEM.allocatable.memory * 4
    mix = bound(1000, memory, 20)
    assert mix.nodes == 4  # four e2-highmem-4 hold it; e2-standard-4 cost more
    assert mix.cost == pytest.approx(4 * HIGHMEM.price)


def test_a_smaller_node_closes_the_last_gap() -> None:
    bound = WholeBound((NodeGroup("small", E4), NodeGroup("big", E8)), (PROXY,))
    room4, room8 = E4.allocatable.cpu - PROXY.cpu, E8.allocatable.cpu - PROXY.cpu
    mix = bound(room8 + room4 - 10, 1 * GIB, 10)  # one of each, not two big ones
    assert mix.nodes == 2
    assert mix.cost == pytest.approx(E4.price + E8.price)


def _cheapest(pools: tuple[NodeGroup, ...], demand: tuple[int, int, int]) -> float:
    rooms = [
        (
            p.node_type.allocatable.cpu - PROXY.cpu,
            p.node_type.allocatable.memory,
            p.node_type.max_pods - 1,
        )
        for p in pools
    ]
    most = [max(math.ceil(d / r[j]) for j, d in enumerate(demand)) for r in rooms]
    best = math.inf
    for counts in itertools.product(
        *(range(p.min_nodes, max(p.min_nodes, n) + 1) for p, n in zip(pools, most, strict=True))
    ):
        if all(
            sum(c * r[j] for c, r in zip(counts, rooms, strict=True)) >= demand[j] for j in range(3)
        ):
            best = min(best, sum(c * p.node_type.price for c, p in zip(counts, pools, strict=True)))
    return best


def test_mixes_match_the_integer_programme_optimum() -> None:
    pools = (NodeGroup("a", E4, min_nodes=1), NodeGroup("b", E8), NodeGroup("c", HIGHMEM))
    bound = WholeBound(pools, (PROXY,))
    rng = random.Random(5)
    for _ in range(40):
        demand = (rng.randrange(0, 40_000), rng.randrange(0, 150 * GIB), rng.randrange(0, 300))
        assert bound(*demand).cost == pytest.approx(_cheapest(pools, demand), rel=1e-9)
