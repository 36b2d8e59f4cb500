"""The Cluster Autoscaler model against hand-computed timings (CA defaults: 0.5 threshold,
10 min unneeded, 10 min delay after scale-up, system pods block)."""

from __future__ import annotations

import random

from tuner.sim.autoscaler import AutoscalerConfig, ClusterAutoscaler
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.state import DELETION_CANDIDATE, SimCluster
from tuner.sim.workloads import Service

E2 = NODE_TYPES["e2-standard-4"]  # allocatable 3920m, ~13.3 GiB
POOL = NodeGroup("n", E2, min_nodes=1)


def two_nodes(first: int, second: int, namespace: str = "shop") -> SimCluster:
    cluster = SimCluster()
    for i, cpu in enumerate((first, second)):
        node = cluster.add_node(E2, 0, 0, "n")
        service = Service(f"app-{i}", cpu, 2**28, namespace=namespace if i else "shop")
        cluster.bind(cluster.create_pod(service, 0), node, 0)
    return cluster


def scan_until(ca: ClusterAutoscaler, cluster: SimCluster, end: float) -> float | None:
    """Scan every 10 s; the time the second node was deleted, or None."""
    t = 0.0
    while t <= end:
        ca.step(cluster, cluster.pending(), t)
        if "n-0002" not in cluster.nodes:
            return t
        t += 10
    return None


def test_underutilized_node_goes_after_ten_minutes_and_its_pod_moves() -> None:
    cluster = two_nodes(2500, 500)  # n-0001 at 64 %; n-0002 at 500 / 3920 = 13 % < 50 %
    ca = ClusterAutoscaler(AutoscalerConfig(), (POOL,), ())
    ca.step(cluster, [], 0)
    assert ca.unneeded_since == {"n-0002": 0}
    assert any(t.key == DELETION_CANDIDATE for t in cluster.nodes["n-0002"].taints)
    assert scan_until(ca, cluster, 1200) == 600
    assert cluster.evictions == 1  # evicted: its ReplicaSet re-creates it elsewhere


def test_scale_down_waits_ten_minutes_after_a_scale_up() -> None:
    cluster = two_nodes(2500, 500)
    ca = ClusterAutoscaler(AutoscalerConfig(), (POOL,), ())
    ca.last_scale_up = 100.0
    assert scan_until(ca, cluster, 1200) == 700


def test_node_at_half_utilization_stays() -> None:
    cluster = two_nodes(2500, 1960)  # 1960 / 3920 = 0.5, not below the threshold
    ca = ClusterAutoscaler(AutoscalerConfig(), (POOL,), ())
    assert scan_until(ca, cluster, 1200) is None


def test_kube_system_pod_blocks_scale_down() -> None:
    cluster = two_nodes(2500, 100, namespace="kube-system")
    ca = ClusterAutoscaler(AutoscalerConfig(), (POOL,), ())
    assert scan_until(ca, cluster, 1200) is None


def test_node_whose_pod_fits_nowhere_else_stays() -> None:
    cluster = two_nodes(3500, 1000)  # 1000m does not fit in 420m
    ca = ClusterAutoscaler(AutoscalerConfig(), (POOL,), ())
    assert scan_until(ca, cluster, 1200) is None


def test_scale_up_counts_nodes_already_coming() -> None:
    cluster = two_nodes(3500, 3500)
    big = Service("big", 1000, 2**28, namespace="shop")
    pending = [cluster.create_pod(big, 0), cluster.create_pod(big, 0)]
    ca = ClusterAutoscaler(AutoscalerConfig(provisioning_delay=120), (POOL,), ())
    assert ca.scale_up(cluster, pending, 0) == 1  # both fit on one new node
    assert ca.scale_up(cluster, pending, 10) == 0  # the coming node takes them
    (new,) = (n for n in cluster.nodes.values() if not n.ready(0))
    assert not new.ready(119) and new.ready(120)


def test_the_first_scan_happens_at_the_first_step_even_during_the_warm_up() -> None:
    cluster = two_nodes(3500, 3500)
    pending = [cluster.create_pod(Service("big", 1000, 2**28, namespace="shop"), -1800)]
    ca = ClusterAutoscaler(AutoscalerConfig(), (POOL,), ())
    ca.step(cluster, pending, -1800.0)  # simulations start at minus the warm-up
    assert ca.scale_ups == 1


# -- node pools and expanders -------------------------------------------------------------------

E8 = NODE_TYPES["e2-standard-8"]  # allocatable 7910m
SMALL = NodeGroup("small", E2, max_nodes=10)
BIG = NodeGroup("big", E8, max_nodes=10)


def grow(expander: str, cpu: int, count: int, pools: tuple[NodeGroup, ...] = (SMALL, BIG)) -> str:
    """Which pool the expander grows for ``count`` pending pods of ``cpu`` millicores."""
    cluster = SimCluster()
    web = Service("web", cpu, 2**28, namespace="shop")
    pending = [cluster.create_pod(web, 0) for _ in range(count)]
    ca = ClusterAutoscaler(AutoscalerConfig(expander=expander), pools, (), random.Random(1))
    assert ca.scale_up(cluster, pending, 0) > 0
    (pool,) = {n.pool for n in cluster.nodes.values()}
    return pool


def test_least_waste_grows_the_pool_left_least_idle() -> None:
    # 3 x 2500m: three e2-standard-4 leave (11760 - 7500) / 11760 = 36 % CPU idle, one
    # e2-standard-8 leaves (7910 - 7500) / 7910 = 5 %; memory idles alike (97-98 %).
    assert grow("least-waste", 2500, 3) == "big"
    # 1 x 3500m: one e2-standard-4 leaves 11 % idle, one e2-standard-8 56 %.
    assert grow("least-waste", 3500, 1) == "small"


def test_price_grows_the_cheapest_pool_for_the_pods() -> None:
    # 3 x 2500m: 3 x 0.13402 = 0.402 USD/h against 1 x 0.26805: the e2-standard-8.
    assert grow("price", 2500, 3) == "big"
    assert grow("price", 3500, 1) == "small"  # 0.134 against 0.268
    n2 = NodeGroup("n2", NODE_TYPES["n2-standard-4"])  # same shape, 0.1942 USD/h
    assert grow("price", 500, 4, (n2, SMALL)) == "small"


def test_random_grows_either_pool() -> None:
    grown = set()
    for seed in range(20):
        cluster = SimCluster()
        pending = [cluster.create_pod(Service("web", 500, 2**28), 0)]
        ca = ClusterAutoscaler(AutoscalerConfig(), (SMALL, BIG), (), random.Random(seed))
        ca.scale_up(cluster, pending, 0)
        grown |= {n.pool for n in cluster.nodes.values()}
    assert grown == {"small", "big"}


def test_a_full_pool_is_not_an_option_and_the_estimate_is_capped_at_the_maximum() -> None:
    capped = NodeGroup("big", E8, max_nodes=1)
    cluster = SimCluster()
    cluster.add_node(E8, 0, 0, "big")
    pending = [cluster.create_pod(Service("web", 2500, 2**28), 0) for _ in range(3)]
    ca = ClusterAutoscaler(AutoscalerConfig(expander="least-waste"), (SMALL, capped), ())
    assert ca.scale_up(cluster, pending, 0) == 3
    assert sorted(n.pool for n in cluster.nodes.values()) == ["big", "small", "small", "small"]
    five = NodeGroup("small", E2, max_nodes=5)
    assert ca.estimate(five, pending, 3) == ca.estimate(five, pending[:2], 3)  # 2 more at most


def test_template_node_room_leaves_out_the_daemonset_pods() -> None:
    proxy = Service("proxy", 1000, 0, kind="DaemonSet", namespace="kube-system")
    ca = ClusterAutoscaler(AutoscalerConfig(), (SMALL,), (proxy,))
    assert ca.template_room(SMALL).cpu == 3920 - 1000
    cluster = SimCluster()
    pending = [cluster.create_pod(Service("web", 1500, 2**28), 0) for _ in range(2)]
    option = ca.estimate(SMALL, pending, 0)
    assert option is not None
    assert option.nodes == 2  # 2 x 1500m > 2920m: one pod per template node


def test_a_pool_at_its_minimum_is_never_scaled_down() -> None:
    cluster = SimCluster()
    for _ in range(3):
        cluster.add_node(E2, 0, 0, "small")
    ca = ClusterAutoscaler(AutoscalerConfig(), (NodeGroup("small", E2, min_nodes=2),), ())
    t = 0.0
    while t <= 3600:
        ca.step(cluster, [], t)
        t += 10
    assert len(cluster.nodes) == 2  # the three were empty; one went, the minimum stays


def test_system_pod_with_a_budget_does_not_block_but_an_exhausted_budget_does() -> None:
    dns = Service("coredns", 100, 2**26, replicas=2, namespace="kube-system", pdb_max_unavailable=1)
    cluster = two_nodes(2500, 100)
    for name in ("n-0001", "n-0002"):
        cluster.bind(cluster.create_pod(dns, 0), cluster.nodes[name], 0)
    ca = ClusterAutoscaler(AutoscalerConfig(), (POOL,), ())
    assert scan_until(ca, cluster, 1200) == 600
    strict = Service("db", 100, 2**26, namespace="shop", pdb_max_unavailable=0)
    cluster = two_nodes(2500, 100)
    cluster.bind(cluster.create_pod(strict, 0), cluster.nodes["n-0002"], 0)
    assert scan_until(ClusterAutoscaler(AutoscalerConfig(), (POOL,), ()), cluster, 1200) is None
