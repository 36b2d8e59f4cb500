"""kube-scheduler's default scoring in the simulator: spreading, the tuner's preferred
affinity label, PreferNoSchedule taints, filters."""

from __future__ import annotations

import random

import pytest

from tuner.model.scheduling import Taint
from tuner.sim.prices import NODE_TYPES
from tuner.sim.scheduler import Scheduler
from tuner.sim.state import SimCluster, affinity_label
from tuner.sim.workloads import Service

E2 = NODE_TYPES["e2-standard-4"]  # allocatable 3920m
WEB = Service("web", 500, 2**28, namespace="shop")
BIG = Service("big", 3000, 2**28, namespace="shop")


def cluster_of(*used_cpu: int) -> SimCluster:
    cluster = SimCluster()
    for used in used_cpu:
        node = cluster.add_node(E2, 0, 0, "n")
        if used:
            filler = Service(f"fill-{node.name}", used, 0, namespace="shop")
            cluster.bind(cluster.create_pod(filler, 0), node, 0)
    return cluster


def place(cluster: SimCluster, service: Service) -> str | None:
    pod = cluster.create_pod(service, 0)
    node = Scheduler(random.Random(0)).choose(cluster, pod, 0)
    return None if node is None else node.name


def test_least_allocated_spreads_to_the_emptiest_node() -> None:
    cluster = cluster_of(2000, 0, 1000)
    assert place(cluster, WEB) == "n-0002"


def test_preferred_affinity_label_wins_when_the_pod_fits() -> None:
    cluster = cluster_of(2000, 0)
    cluster.nodes["n-0001"].labels[affinity_label(WEB)] = "true"
    assert place(cluster, WEB) == "n-0001"


def test_labelled_node_without_room_is_filtered_out() -> None:
    cluster = cluster_of(3500, 0)
    cluster.nodes["n-0001"].labels[affinity_label(WEB)] = "true"
    assert place(cluster, WEB) == "n-0002"


def test_prefer_no_schedule_taint_is_avoided() -> None:
    cluster = cluster_of(0, 0)
    cluster.nodes["n-0002"].taints = (Taint("x", "", "PreferNoSchedule"),)
    assert place(cluster, WEB) == "n-0001"


def test_cordoned_and_not_ready_nodes_are_filtered() -> None:
    cluster = cluster_of(0, 3000)
    cluster.nodes["n-0001"].unschedulable = True
    assert place(cluster, WEB) == "n-0002"
    late = SimCluster()
    late.add_node(E2, 0, 120, "n")
    assert place(late, WEB) is None


def test_a_pod_that_fits_nowhere_stays_pending() -> None:
    cluster = cluster_of(1000, 1000)
    assert place(cluster, BIG) is None


def test_scores_match_kube_schedulers_formulas_by_hand() -> None:
    # e2-standard-4 allocatable: 4000m - (60 + 10 + 2 * 5)m = 3920m; memory 16 GiB minus
    # 25 % of 4 GiB, 20 % of 4 GiB, 10 % of 8 GiB and a 100 MiB eviction threshold.
    alloc_cpu, alloc_mem = 3920, 16 * 2**30 - 2791728742 - 100 * 2**20
    cluster = cluster_of(2000, 0)
    pod = cluster.create_pod(WEB, 0)  # 500m, 256 MiB
    nodes = [cluster.nodes["n-0001"], cluster.nodes["n-0002"]]
    scores = Scheduler(random.Random(0)).scores(pod, nodes)
    expected = []
    for used in (2000, 0):
        cpu, mem = (used + 500) / alloc_cpu, 2**28 / alloc_mem
        least = ((1 - cpu) + (1 - mem)) / 2 * 100  # NodeResourcesFit, LeastAllocated
        balanced = (1 - abs(cpu - mem) / 2) * 100  # BalancedAllocation: 1 - std of 2 shares
        expected.append(1 * least + 1 * balanced + 2 * 0 + 3 * 100)  # no affinity, no taints
    assert scores == pytest.approx(expected)
    # 2000m more is 51 % of the node's CPU; each of the two scores loses half of that
    assert scores[1] - scores[0] == pytest.approx(2 * (2000 / alloc_cpu / 2 * 100))
