"""The Cluster Autoscaler model against hand-computed timings (CA defaults: 0.5 threshold,
10 min unneeded, 10 min delay after scale-up, system pods block)."""

from __future__ import annotations

from tuner.sim.autoscaler import AutoscalerConfig, ClusterAutoscaler
from tuner.sim.prices import NODE_TYPES
from tuner.sim.state import DELETION_CANDIDATE, SimCluster
from tuner.sim.workloads import Service

E2 = NODE_TYPES["e2-standard-4"]  # allocatable 3920m, ~13.3 GiB


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
    ca = ClusterAutoscaler(AutoscalerConfig(E2), ())
    ca.step(cluster, [], 0)
    assert ca.unneeded_since == {"n-0002": 0}
    assert any(t.key == DELETION_CANDIDATE for t in cluster.nodes["n-0002"].taints)
    assert scan_until(ca, cluster, 1200) == 600
    assert len(cluster.pending()) == 1  # evicted, for the scheduler to place


def test_scale_down_waits_ten_minutes_after_a_scale_up() -> None:
    cluster = two_nodes(2500, 500)
    ca = ClusterAutoscaler(AutoscalerConfig(E2), ())
    ca.last_scale_up = 100.0
    assert scan_until(ca, cluster, 1200) == 700


def test_node_at_half_utilization_stays() -> None:
    cluster = two_nodes(2500, 1960)  # 1960 / 3920 = 0.5, not below the threshold
    ca = ClusterAutoscaler(AutoscalerConfig(E2), ())
    assert scan_until(ca, cluster, 1200) is None


def test_kube_system_pod_blocks_scale_down() -> None:
    cluster = two_nodes(2500, 100, namespace="kube-system")
    ca = ClusterAutoscaler(AutoscalerConfig(E2), ())
    assert scan_until(ca, cluster, 1200) is None


def test_node_whose_pod_fits_nowhere_else_stays() -> None:
    cluster = two_nodes(3500, 1000)  # 1000m does not fit in 420m
    ca = ClusterAutoscaler(AutoscalerConfig(E2, min_nodes=1), ())
    assert scan_until(ca, cluster, 1200) is None


def test_scale_up_counts_nodes_already_coming() -> None:
    cluster = two_nodes(3500, 3500)
    big = Service("big", 1000, 2**28, namespace="shop")
    pending = [cluster.create_pod(big, 0), cluster.create_pod(big, 0)]
    ca = ClusterAutoscaler(AutoscalerConfig(E2, provisioning_delay=120), ())
    assert ca.scale_up(cluster, pending, 0) == 1  # both fit on one new node
    assert ca.scale_up(cluster, pending, 10) == 0  # the coming node takes them
    (new,) = (n for n in cluster.nodes.values() if not n.ready(0))
    assert not new.ready(119) and new.ready(120)
