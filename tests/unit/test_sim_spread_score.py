"""kube-scheduler's PodTopologySpread score in the simulator: the system default constraints
(hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway) by hand, who gets them, and what they do
to a placement."""

from __future__ import annotations

import math
import random

from tuner.model.constraints import ZONE_KEY
from tuner.sim.prices import NODE_TYPES
from tuner.sim.scheduler import Scheduler
from tuner.sim.spread_score import spread_scores
from tuner.sim.state import SimCluster, SimNode, affinity_label
from tuner.sim.workloads import Service, Spread

E2 = NODE_TYPES["e2-standard-4"]
WEB = Service("web", 500, 2**28, namespace="shop")


def zoned(*zones: str) -> tuple[SimCluster, list[SimNode]]:
    cluster = SimCluster()
    return cluster, [cluster.add_node(E2, 0, 0, "n", zone=zone) for zone in zones]


def put(cluster: SimCluster, service: Service, node: SimNode, count: int) -> None:
    for _ in range(count):
        cluster.bind(cluster.create_pod(service, 0), node, 0)


def test_the_system_default_constraints_score_by_hand() -> None:
    cluster, (n1, n2, n3) = zoned("a", "a", "b")
    put(cluster, WEB, n1, 2)
    put(cluster, WEB, n3, 1)
    pod = cluster.create_pod(WEB, 0)
    host, zone = math.log(3 + 2), math.log(2 + 2)  # 3 feasible nodes, 2 zones
    raw = [
        round(2 * host + (3 - 1) + 2 * zone + (5 - 1)),  # 2 here, 2 in zone a: 12
        round(0 * host + (3 - 1) + 2 * zone + (5 - 1)),  # 9
        round(1 * host + (3 - 1) + 1 * zone + (5 - 1)),  # 9
    ]
    assert raw == [12, 9, 9]
    low, high = min(raw), max(raw)

    scores = spread_scores(cluster, pod, [n1, n2, n3])

    assert scores == [100 * (high + low - r) // high for r in raw] == [75, 100, 100]


def test_nodes_without_a_zone_are_scored_by_hostname_alone() -> None:
    cluster, (n1, n2) = zoned("", "")
    put(cluster, WEB, n1, 3)
    pod = cluster.create_pod(WEB, 0)
    assert round(3 * math.log(2 + 2) + (3 - 1)) == 6  # raw; the empty node's: 0 + (3 - 1)
    assert spread_scores(cluster, pod, [n1, n2]) == [100 * (6 + 2 - 6) // 6, 100]


def test_daemonset_pods_and_soft_less_own_constraints_are_not_scored() -> None:
    cluster, nodes = zoned("a", "b")
    agent = Service("agent", 100, 0, kind="DaemonSet", namespace="kube-system")
    pinned = Service("pinned", 100, 0, namespace="shop", spread=(Spread(ZONE_KEY, 1),))
    put(cluster, pinned, nodes[0], 2)
    for service in (agent, pinned):
        assert spread_scores(cluster, cluster.create_pod(service, 0), nodes) == [0, 0]


def test_a_soft_constraint_of_its_own_replaces_the_defaults() -> None:
    cluster, (n1, n2, n3) = zoned("a", "b", "")
    soft = Service("soft", 100, 0, namespace="shop", spread=(Spread(ZONE_KEY, 1, hard=False),))
    put(cluster, soft, n1, 2)
    scores = spread_scores(cluster, cluster.create_pod(soft, 0), [n1, n2, n3])
    # zone only, n3 (no zone label) ignored; raw: 2 * log(4) + 0 = 3, 0 * log(4) = 0
    assert scores == [100 * (3 + 0 - 3) // 3, 100, 0]


def test_spreading_and_fit_outweigh_the_tuners_label_on_a_node_crowded_with_the_workload() -> None:
    """Why a migration cordons its source: 30 pods of web (no requests: 100m / 200 MiB each to
    the fit score) on the labelled node, none on the other (no zones): spreading (4 against
    100, weight 2) and the fit score together beat the label's 2 * 100."""
    cluster, (crowded, empty) = zoned("", "")
    bare = Service("web", 0, 0, namespace="shop")
    put(cluster, bare, crowded, 30)
    crowded.labels[affinity_label(bare)] = "true"
    pod = cluster.create_pod(bare, 0)
    assert spread_scores(cluster, pod, [crowded, empty]) == [100 * 2 // 44, 100]

    node = Scheduler(random.Random(0)).choose(cluster, pod, 0)

    assert node is empty
