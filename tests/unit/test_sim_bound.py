"""The lower bounds: the whole-node bound (hand-computed cases, and the exact optimum of its
integer programme against enumerating every mix) and the rule bound (the spread's forced share
against every spread placement, hand-made cases whose optimum is known, and tiny random
instances against the cheapest placement found by brute force, which it never exceeds)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from tuner.model.constraints import HOSTNAME_KEY, ZONE_KEY
from tuner.sim.bound import Held, RuleBound, held, least_in, pinned, ruled
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.report import comparison, run
from tuner.sim.scenario_file import build
from tuner.sim.workloads import GIB, Service, Spread

E2 = NODE_TYPES["e2-standard-2"]  # 1930m, 0.06701 USD/h
E4 = NODE_TYPES["e2-standard-4"]  # 3920m, 0.13402 USD/h
E8 = NODE_TYPES["e2-standard-8"]  # 7910m, 0.26805 USD/h
HIGHMEM = NODE_TYPES["e2-highmem-4"]  # 3920m, 0.1808 USD/h
PROXY = Service("proxy", 120, 0, kind="DaemonSet", namespace="kube-system")
ZONE_SPREAD = (Spread(ZONE_KEY, 1, True),)


def whole(pools: tuple[NodeGroup, ...], daemonsets: tuple[Service, ...] = (PROXY,)) -> Any:
    return RuleBound(pools, daemonsets).whole


# -- the whole-node bound ---------------------------------------------------------------------


def test_one_pool_rounds_the_largest_need_up_to_whole_nodes() -> None:
    bound = whole((NodeGroup("p", E4),))
    mix = bound(3800 * 5 // 2, 1 * GIB, 10)  # 9500m over 3800m of room per node: 2.5, so 3
    assert mix.nodes == 3
    assert mix.cost == pytest.approx(3 * E4.price)
    assert bound(3800 * 2, 1 * GIB, 10).nodes == 2  # exactly two nodes' room needs no third


def test_the_pool_minimum_is_always_paid() -> None:
    bound = whole((NodeGroup("p", E4, min_nodes=3),), ())
    assert bound(0, 0, 0).nodes == 3
    assert bound(100, 0, 1).cost == pytest.approx(3 * E4.price)


def test_memory_heavy_demand_takes_the_memory_optimised_type() -> None:
    bound = whole((NodeGroup("general", E4), NodeGroup("highmem", HIGHMEM)), ())
    memory = HIGHMEM.allocatable.memory * 4
    mix = bound(1000, memory, 20)
    assert mix.nodes == 4  # four e2-highmem-4 hold it; e2-standard-4 cost more
    assert mix.cost == pytest.approx(4 * HIGHMEM.price)


def test_a_smaller_node_closes_the_last_gap() -> None:
    bound = whole((NodeGroup("small", E4), NodeGroup("big", E8)))
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
    bound = whole(pools)
    rng = random.Random(5)
    for _ in range(40):
        demand = (rng.randrange(0, 40_000), rng.randrange(0, 150 * GIB), rng.randrange(0, 300))
        assert bound(*demand).cost == pytest.approx(_cheapest(pools, demand), rel=1e-9)


# -- the spread's forced share ----------------------------------------------------------------


def _spread_placements(pods: int, skew: int, zones: int) -> list[tuple[int, ...]]:
    """Every count per zone the scheduler can reach by placing ``pods`` pods one at a time
    (a pod goes where its zone then holds at most ``skew`` above the minimum)."""
    reached = {(0,) * zones}
    for _ in range(pods):
        reached = {
            tuple(c + (i == z) for i, c in enumerate(counts))
            for counts in reached
            for z in range(zones)
            if counts[z] + 1 - min(counts) <= skew
        }
    return sorted(reached)


def test_the_forced_share_is_the_fewest_any_spread_placement_puts_in_the_zones() -> None:
    for zones, skew, pods in itertools.product(range(1, 5), range(1, 4), range(0, 13)):
        placements = _spread_placements(pods, skew, zones)
        for inside in range(zones + 1):
            fewest = min(
                sum(c[z] for z in chosen)
                for c in placements
                for chosen in itertools.combinations(range(zones), inside)
            )
            assert least_in(pods, skew, zones, inside) == fewest, (pods, skew, zones, inside)


def test_the_forced_share_of_the_docstring() -> None:
    assert [least_in(5, 1, 3, t) for t in range(4)] == [0, 1, 3, 5]
    assert least_in(7, 2, 3, 1) == 1  # (1, 3, 3)
    assert least_in(3, 1, 1, 1) == 3


# -- the rule bound: hand-made cases ----------------------------------------------------------


def test_a_spread_over_a_capped_cheap_zone_is_dearer_than_the_whole_node_bound() -> None:
    """Zone a: one e2-standard-8 at most; zone b: e2-highmem-4. Ten 900m pods spread over the
    zones (maxSkew 1): with both zones, b holds five (4500m, two highmem nodes: 0.630/h); in b
    alone, three highmem nodes (0.542/h) — the cheapest placement. Without the spread, the
    e2-standard-8 and one highmem hold them (0.449/h); the whole-node bound, which ignores the
    cap too, says the same."""
    pools = (NodeGroup("a", E8, 0, 1, zone="a"), NodeGroup("b", HIGHMEM, 0, 10, zone="b"))
    web = Service("web", 900, 0, spread=ZONE_SPREAD)
    bound = RuleBound(pools, (), (web,))
    mix = bound(9000, 0, 10, (10,))
    assert mix.cost == pytest.approx(3 * HIGHMEM.price)
    assert mix.nodes == 3
    assert bound.whole(9000, 0, 10).cost == pytest.approx(E8.price + HIGHMEM.price)
    free = RuleBound(pools, (), (Service("web", 900, 0),))
    assert free(9000, 0, 10).cost == pytest.approx(E8.price + HIGHMEM.price)
    assert mix.cost == pytest.approx(_brute(pools, [(900, 0, web)] * 10))


def test_the_zones_without_a_ready_node_only_pay_their_minimum() -> None:
    """Zone b's pool keeps a node (its minimum), which may be one still starting: the spread
    then has one domain, zone a, and everything fits there."""
    pools = (NodeGroup("a", E8, 1, 1, zone="a"), NodeGroup("b", E2, 1, 3, zone="b"))
    web = Service("web", 1000, 0, spread=ZONE_SPREAD)
    bound = RuleBound(pools, (), (web,))
    assert bound(4000, 0, 4, (4,)).cost == pytest.approx(E8.price + E2.price)


def test_a_node_anti_affinity_needs_a_node_per_pod() -> None:
    """Three 1000m pods, one per node: three e2-standard-2 where the whole-node bound has two
    (3000m and 6 GiB in two nodes' room)."""
    elastic = Service("es", 1000, 2 * GIB, kind="StatefulSet", anti_affinity=HOSTNAME_KEY)
    pools = (NodeGroup("big", E8), NodeGroup("small", E2))
    bound = RuleBound(pools, (PROXY,), (elastic,))
    assert bound.whole(3000, 6 * GIB, 3).cost == pytest.approx(2 * E2.price)
    assert bound(3000, 6 * GIB, 3, (3,)).cost == pytest.approx(3 * E2.price)


def test_a_zone_anti_affinity_needs_a_zone_per_pod_and_falls_back_past_the_zones() -> None:
    one_per_zone = Service("lock", 100, 0, anti_affinity=ZONE_KEY)
    pools = tuple(NodeGroup(z, E2, 0, 5, zone=z) for z in "abc")
    bound = RuleBound(pools, (), (one_per_zone,))
    assert bound(300, 0, 3, (3,)).nodes == 3
    assert bound(400, 0, 4, (4,)).nodes == 1  # no placement holds four: bounded without rules


def test_spread_pods_never_count_on_nodes_without_the_zone_label() -> None:
    """A node without the zone label fails a hard zone spread's filter: the four pods need two
    e2-highmem-4 in zone a, not the cheaper e2-standard-8 without a zone."""
    pools = (NodeGroup("zoneless", E8), NodeGroup("a", HIGHMEM, 0, 5, zone="a"))
    web = Service("web", 1000, 0, spread=ZONE_SPREAD)
    bound = RuleBound(pools, (), (web,))
    assert bound.whole(4000, 0, 4).cost == pytest.approx(E8.price)
    assert bound(4000, 0, 4, (4,)).cost == pytest.approx(2 * HIGHMEM.price)


def test_only_hard_rules_of_workloads_are_counted() -> None:
    soft = Service("soft", 100, 0, spread=(Spread(ZONE_KEY, 1, False),))
    by_host = Service("host", 100, 0, spread=(Spread(HOSTNAME_KEY, 1, True),))
    hard = Service("hard", 100, 0, spread=ZONE_SPREAD)
    daemon = Service("d", 100, 0, kind="DaemonSet", anti_affinity=HOSTNAME_KEY)
    assert ruled((soft, by_host, hard, daemon)) == (hard,)
    with pytest.raises(ValueError, match="1 ruled services"):
        RuleBound((NodeGroup("p", E4),), (), (hard,))(100, 0, 1)


# -- the rule bound against brute force ------------------------------------------------------

Pod = tuple[int, int, Service | None]
"""CPU, memory and the service whose rules it carries (None: none)."""


def _keeps_rules(nodes: Sequence[NodeGroup], where: Sequence[int], pods: Sequence[Pod]) -> bool:
    zones = sorted({n.zone for n in nodes if n.zone})
    services = {p[2] for p in pods if p[2] is not None}
    for service in services:
        mine = [where[i] for i, p in enumerate(pods) if p[2] is service]
        if service.anti_affinity == HOSTNAME_KEY and len(set(mine)) < len(mine):
            return False
        placed = [nodes[n].zone for n in mine]
        if service.anti_affinity == ZONE_KEY:
            zoned = [z for z in placed if z]
            if len(set(zoned)) < len(zoned):
                return False
        skews = [s.max_skew for s in service.spread if s.hard and s.topology_key == ZONE_KEY]
        if skews:
            if not all(placed):
                return False
            counts = [placed.count(z) for z in zones]
            if max(counts) - min(counts) > min(skews):
                return False
    return True


def _fits(nodes: Sequence[NodeGroup], pods: Sequence[Pod], fixed: Sequence[int] = ()) -> bool:
    """Some assignment of the pods to the nodes (all ready) keeps room and rules; the first
    pods are on the nodes ``fixed`` gives (by index)."""
    used = [[0, 0, 0] for _ in nodes]
    where: list[int] = []

    def place(i: int) -> bool:
        if i == len(pods):
            return _keeps_rules(nodes, where, pods)
        cpu, memory, _ = pods[i]
        for n, group in enumerate(nodes):
            if i < len(fixed) and n != fixed[i]:
                continue
            room = group.node_type
            if (
                used[n][0] + cpu <= room.allocatable.cpu
                and used[n][1] + memory <= room.allocatable.memory
                and used[n][2] < room.max_pods
            ):
                used[n][0] += cpu
                used[n][1] += memory
                used[n][2] += 1
                where.append(n)
                if place(i + 1):
                    return True
                where.pop()
                used[n][0] -= cpu
                used[n][1] -= memory
                used[n][2] -= 1
        return False

    return place(0)


def _brute(
    pools: tuple[NodeGroup, ...], pods: Sequence[Pod], pinned: Sequence[tuple[int, Pod]] = ()
) -> float:
    """The cheapest node counts (within the pools' limits) some placement fits, all nodes ready;
    each ``pinned`` pod (pool index, pod) alone on a node of its pool that must stay."""
    held = [sum(1 for at, _ in pinned if at == i) for i in range(len(pools))]
    mixes = sorted(
        itertools.product(
            *(range(max(p.min_nodes, h), p.max_nodes + 1) for p, h in zip(pools, held, strict=True))
        ),
        key=lambda c: sum(n * p.node_type.price for n, p in zip(c, pools, strict=True)),
    )
    for counts in mixes:
        nodes = [p for n, p in zip(counts, pools, strict=True) for _ in range(n)]
        first = list(itertools.accumulate(counts, initial=0))
        fixed = [
            first[at] + sum(1 for a, _ in pinned[:k] if a == at) for k, (at, _) in enumerate(pinned)
        ]
        if _fits(nodes, [p for _, p in pinned] + list(pods), fixed):
            return sum(n * p.node_type.price for n, p in zip(counts, pools, strict=True))
    return math.inf


def _random_pools(rng: random.Random) -> tuple[NodeGroup, ...]:
    """One to three pools of a random node type, minimum 0 or 1, maximum 2, each in its own
    zone (or none)."""
    zones = rng.sample(["a", "b", "c", ""], rng.randrange(1, 4))
    return tuple(
        NodeGroup(f"p{i}", rng.choice((E2, E4, HIGHMEM)), rng.randrange(0, 2), 2, zone=z)
        for i, z in enumerate(zones)
    )


def test_the_rule_bound_never_exceeds_the_cheapest_placement_nor_undercuts_the_whole_bound() -> (
    None
):
    rng = random.Random(11)
    checked = strict = 0
    for _ in range(60):
        pools = _random_pools(rng)
        services = (
            Service(
                "spread",
                rng.choice((600, 1200)),
                0,
                spread=(Spread(ZONE_KEY, rng.randrange(1, 3), True),),
            ),
            Service("host", rng.choice((500, 1500)), 1 * GIB, anti_affinity=HOSTNAME_KEY),
            Service("zone", 300, 0, anti_affinity=ZONE_KEY),
        )
        counts = [rng.randrange(0, 4), rng.randrange(0, 3), rng.randrange(0, 2)]
        pods: list[Pod] = [
            (s.cpu, s.memory, s) for s, n in zip(services, counts, strict=True) for _ in range(n)
        ]
        pods += [(rng.choice((700, 1900, 2500)), 0, None) for _ in range(rng.randrange(0, 3))]
        cpu, memory = sum(p[0] for p in pods), sum(p[1] for p in pods)
        best = _brute(pools, pods)
        bound = RuleBound(pools, (), services)
        try:
            floor = bound.whole(cpu, memory, len(pods)).cost
        except ValueError:
            continue  # no mix holds the requests
        rule = bound(cpu, memory, len(pods), counts).cost
        assert floor <= rule + 1e-9
        if best < math.inf:
            assert rule <= best + 1e-9, (pools, counts, pods)
            checked += 1
            strict += rule > floor + 1e-9
    assert checked >= 30
    assert strict >= 3  # the rules raised the bound on some instances


# -- the pinned bound -------------------------------------------------------------------------


def test_a_pinned_dear_node_is_paid_and_its_room_left_used() -> None:
    """A 900m pod pins a highmem node (3920m): two 1000m pods fit in its room left and cost
    nothing more, where the rule bound takes two e2-standard-2 (1930m each) for the 2900m; five
    take two e2-standard-2 beside it, as the cheapest placement does."""
    pools = (NodeGroup("small", E2, 0, 3), NodeGroup("highmem", HIGHMEM, 0, 3))
    bound = RuleBound(pools, ())
    assert bound(2900, 0, 3).cost == pytest.approx(2 * E2.price)
    assert bound(2900, 0, 3, (), (Held(0), Held(1, 900, 0, 1))).pools == (0, 1)
    more = bound(5900, 0, 6, (), (Held(0), Held(1, 900, 0, 1)))
    assert more.pools == (2, 1)
    assert more.cost == pytest.approx(2 * E2.price + HIGHMEM.price)
    assert more.cost == pytest.approx(_brute(pools, [(1000, 0, None)] * 5, [(1, (900, 0, None))]))


def test_a_pinned_node_keeps_its_zone_among_the_spread_domains() -> None:
    """Zone a's e2-standard-8 (its pool's minimum) holds everything when zone b has no ready
    node. A 3500m pod pinning an e2-highmem-4 in zone b makes b a domain of the spread, so b
    holds one of the two 1000m spread pods, which the pinned node's room left (420m) does not:
    a second highmem node (0.630/h, as the cheapest placement), not the pinned node idle beside
    the e2-standard-8 (0.449/h)."""
    pools = (NodeGroup("a", E8, 1, 2, zone="a"), NodeGroup("b", HIGHMEM, 0, 3, zone="b"))
    web = Service("web", 1000, 0, spread=ZONE_SPREAD)
    bound = RuleBound(pools, (), (web,))
    assert bound(5500, 0, 3, (2,)).cost == pytest.approx(E8.price)
    mix = bound(5500, 0, 3, (2,), (Held(0), Held(1, 3500, 0, 1)))
    assert mix.pools == (1, 2)
    assert mix.cost == pytest.approx(E8.price + 2 * HIGHMEM.price)
    assert mix.cost == pytest.approx(_brute(pools, [(1000, 0, web)] * 2, [(1, (3500, 0, None))]))


def test_which_services_are_pinned() -> None:
    from tuner.sim.workloads import HpaSpec

    kept = (
        Service("db", 100, 0, kind="StatefulSet", namespace="data"),
        Service("dns", 100, 0, namespace="kube-system"),
    )
    others = (
        Service("dns-budgeted", 100, 0, namespace="kube-system", pdb_max_unavailable=1),
        Service("proxy", 100, 0, kind="DaemonSet", namespace="kube-system"),
        Service("web", 100, 0),
        Service("scaled", 100, 0, kind="StatefulSet", hpa=HpaSpec(1, 3, 0.5)),
    )
    assert pinned((*others, *kept)) == kept
    with pytest.raises(ValueError, match="1 pinned pools for 2 pools"):
        RuleBound((NodeGroup("p", E4), NodeGroup("q", E8)), ())(100, 0, 1, (), (Held(1),))


def test_what_pinned_pods_hold_per_pool() -> None:
    """Nodes once each; the requests of the pods no zone rule counts (a zone-spread pod is
    among its spread's share already)."""
    db = Service("db", 100, 10, kind="StatefulSet")
    spread = Service("spread-db", 300, 30, kind="StatefulSet", spread=ZONE_SPREAD)
    placed = [("p", "n1", db), ("p", "n1", db), ("p", "n2", spread), ("r", "n3", db)]
    assert held(("p", "q", "r"), placed) == (Held(2, 200, 20, 2), Held(0), Held(1, 100, 10, 1))


def test_the_pinned_bound_is_between_the_rule_bound_and_the_cheapest_placement() -> None:
    """Tiny random instances, pinned pods each alone on a node that stays: the pinned bound
    never goes below the rule bound nor above the cheapest placement that keeps them."""
    rng = random.Random(23)
    checked = strict = 0
    for _ in range(60):
        pools = _random_pools(rng)
        services = (
            Service("spread", rng.choice((600, 1200)), 0, spread=(Spread(ZONE_KEY, 1, True),)),
            Service("host", rng.choice((500, 1500)), 1 * GIB, anti_affinity=HOSTNAME_KEY),
        )
        counts = [rng.randrange(0, 4), rng.randrange(0, 3)]
        pods: list[Pod] = [
            (s.cpu, s.memory, s) for s, n in zip(services, counts, strict=True) for _ in range(n)
        ]
        pods += [(rng.choice((700, 1900)), 0, None) for _ in range(rng.randrange(0, 2))]
        pinned_pods = [
            (rng.randrange(len(pools)), (rng.choice((300, 1500)), 0, None))
            for _ in range(rng.randrange(1, 3))
        ]
        nodes = [sum(1 for at, _ in pinned_pods if at == i) for i in range(len(pools))]
        if any(n > p.max_nodes for n, p in zip(nodes, pools, strict=True)):
            continue
        fixed = held(
            [p.name for p in pools],
            (
                (pools[at].name, f"n{k}", Service("db", pod[0], 0))
                for k, (at, pod) in enumerate(pinned_pods)
            ),
        )
        every = [p for _, p in pinned_pods] + pods
        cpu, memory = sum(p[0] for p in every), sum(p[1] for p in every)
        bound = RuleBound(pools, (), services)
        try:
            rule = bound(cpu, memory, len(every), counts).cost
        except ValueError:
            continue  # no mix holds the requests
        safe = bound(cpu, memory, len(every), counts, fixed).cost
        best = _brute(pools, pods, pinned_pods)
        assert rule <= safe + 1e-9
        if best < math.inf:
            assert safe <= best + 1e-9, (pools, counts, pods, pinned_pods)
            checked += 1
            strict += safe > rule + 1e-9
    assert checked >= 30
    assert strict >= 3  # the pinned nodes raised the bound on some instances


# -- in the evaluation ------------------------------------------------------------------------


def test_a_run_records_the_ruled_pods_and_its_comparison_carries_both_bounds() -> None:
    scenario = build(
        {
            "name": "spread",
            "hours": 0.1,
            "system_pods": False,
            "pools": [
                {
                    "name": "p",
                    "node_type": "e2-standard-2",
                    "min": 1,
                    "max": 4,
                    "initial": 1,
                    "zones": ["a", "b"],
                }
            ],
            "services": [
                {
                    "name": "web",
                    "namespace": "n",
                    "cpu": "1500m",
                    "memory": "256Mi",
                    "replicas": 2,
                    "spread": [{"topology_key": "zone", "max_skew": 1}],
                },
                {"name": "db", "namespace": "n", "cpu": "100m", "memory": "256Mi"},
            ],
        }
    )
    outcome = run(scenario, "autoscaler", 1)
    assert set(outcome.series.ruled) == {(2,)}
    compared = comparison(scenario, 1, (outcome,))
    assert all(
        r >= w - 1e-12 for r, w in zip(compared.lower_bound, compared.whole_bound, strict=True)
    )
    assert compared.lower_bound_cost == pytest.approx(compared.whole_bound_cost)


def test_a_run_records_what_its_pinned_pods_hold_and_the_pinned_bound_pays_for_it() -> None:
    """The StatefulSet's pod starts on the only node, an e2-highmem-4, and stays: the pinned
    bound pays for it where the rule bound takes two e2-standard-2."""
    scenario = build(
        {
            "name": "pinned",
            "hours": 0.1,
            "system_pods": False,
            "pools": [
                {"name": "cheap", "node_type": "e2-standard-2", "min": 0, "max": 4},
                {"name": "dear", "node_type": "e2-highmem-4", "min": 0, "max": 2, "initial": 1},
            ],
            "services": [
                {"name": "web", "namespace": "n", "cpu": "1500m", "memory": "0", "replicas": 2},
                {
                    "name": "db",
                    "namespace": "n",
                    "kind": "StatefulSet",
                    "cpu": "100m",
                    "memory": "0",
                },
            ],
        }
    )
    outcome = run(scenario, "autoscaler", 1)
    assert set(outcome.series.pinned) == {(Held(0), Held(1, 100, 0, 1))}
    assert [pod.split("-")[0] for pod, _ in outcome.series.pinned_start] == ["db"]
    compared = comparison(scenario, 1, (outcome,))
    assert compared.lower_bound == pytest.approx([2 * E2.price] * len(compared.lower_bound))
    assert compared.pinned_bound == pytest.approx([HIGHMEM.price] * len(compared.pinned_bound))
    assert compared.keeps_pinned("autoscaler")
