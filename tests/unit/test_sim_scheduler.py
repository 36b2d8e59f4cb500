"""kube-scheduler's default scoring in the simulator: spreading, the tuner's preferred
affinity label, PreferNoSchedule taints, filters; the queue's priority order and the preemption
of the tuner's placeholders."""

from __future__ import annotations

import random

import pytest

from tuner.model.constraints import Constraints, Taint
from tuner.sim.prices import NODE_TYPES
from tuner.sim.scheduler import MOST_ALLOCATED, Scheduler
from tuner.sim.state import SimCluster, SimPod, affinity_label
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


def place(cluster: SimCluster, service: Service, scoring: str = "LeastAllocated") -> str | None:
    pod = cluster.create_pod(service, 0)
    node = Scheduler(random.Random(0), scoring).choose(cluster, pod, 0)
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
    cluster = cluster_of(2000, 0)  # the filler of n-0001 sets no memory request
    pod = cluster.create_pod(WEB, 0)  # 500m, 256 MiB
    nodes = [cluster.nodes["n-0001"], cluster.nodes["n-0002"]]
    scores = Scheduler(random.Random(0)).scores(pod, nodes)
    expected = []
    for used, unset in ((2000, 200 * 2**20), (0, 0)):
        # NodeResourcesFit, LeastAllocated: a pod without a memory request counts 200 MiB
        cpu, mem = (used + 500) / alloc_cpu, (unset + 2**28) / alloc_mem
        least = ((1 - cpu) + (1 - mem)) / 2 * 100
        # BalancedAllocation: 1 - std of the 2 shares of the requests as they are
        mem = 2**28 / alloc_mem
        balanced = (1 - abs(cpu - mem) / 2) * 100
        expected.append(1 * least + 1 * balanced + 2 * 0 + 3 * 100)  # no affinity, no taints
    assert scores == pytest.approx(expected)
    # 2000m more is 51 % of the node's CPU; each of the two scores loses half of that, and
    # the fit score half of the filler's 200 MiB share
    cpu_part = 2 * (2000 / alloc_cpu / 2 * 100)
    assert scores[1] - scores[0] == pytest.approx(cpu_part + 200 * 2**20 / alloc_mem / 2 * 100)


def test_pods_without_requests_make_a_node_score_as_fuller() -> None:
    # kube-scheduler scores a pod without requests at 100m / 200 MiB, on the node too
    # (NonZeroRequested): ten of them outweigh one 100m pod, so the new pod goes beside that
    cluster = SimCluster()
    crowded, other = cluster.add_node(E2, 0, 0, "n"), cluster.add_node(E2, 0, 0, "n")
    for i in range(10):
        bare = Service(f"db-{i}", 0, 0, namespace="shop")
        cluster.bind(cluster.create_pod(bare, 0), crowded, 0)
    cluster.bind(cluster.create_pod(Service("one", 100, 0, namespace="shop"), 0), other, 0)
    assert place(cluster, WEB) == other.name


def filled(*used: tuple[int, int]) -> SimCluster:
    """Nodes with (CPU millicores, memory bytes) already requested."""
    cluster = SimCluster()
    for cpu, memory in used:
        node = cluster.add_node(E2, 0, 0, "n")
        filler = Service(f"fill-{node.name}", cpu, memory, namespace="shop")
        cluster.bind(cluster.create_pod(filler, 0), node, 0)
    return cluster


def test_most_allocated_packs_onto_the_fullest_feasible_node() -> None:
    # each filler asks 1 MiB per millicore (CPU stays the larger share); 3500m leaves 420m,
    # too little for 500m
    cluster = filled(*((cpu, cpu * 2**20) for cpu in (2000, 100, 1000, 3500)))
    assert place(cluster, WEB, MOST_ALLOCATED) == "n-0001"
    assert place(filled((2000, 2000 * 2**20), (100, 2**20)), WEB) == "n-0002"


def test_most_allocated_scores_by_hand() -> None:
    alloc_cpu, alloc_mem = 3920, 16 * 2**30 - 2791728742 - 100 * 2**20
    cluster = filled((2000, 2**30), (0, 0))
    pod = cluster.create_pod(WEB, 0)  # 500m, 256 MiB
    nodes = [cluster.nodes["n-0001"], cluster.nodes["n-0002"]]
    scores = Scheduler(random.Random(0), MOST_ALLOCATED).scores(pod, nodes)
    expected = []
    for cpu_used, mem_used in ((2000, 2**30), (0, 0)):
        # the second node's filler sets no requests: 100m / 200 MiB in the fit score
        fit_cpu, fit_mem = cpu_used or 100, mem_used or 200 * 2**20
        cpu, mem = (fit_cpu + 500) / alloc_cpu, (fit_mem + 2**28) / alloc_mem
        most = (cpu + mem) / 2 * 100  # NodeResourcesFit, MostAllocated, weights 1:1
        cpu, mem = (cpu_used + 500) / alloc_cpu, (mem_used + 2**28) / alloc_mem
        balanced = (1 - abs(cpu - mem) / 2) * 100
        expected.append(1 * most + 1 * balanced + 3 * 100)
    assert scores == pytest.approx(expected)


def test_an_unknown_scoring_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="scoring"):
        Scheduler(random.Random(0), "RequestedToCapacityRatio")


# -- preemption of the tuner's placeholders -----------------------------------------------------


def holding(cluster: SimCluster, node: str, cpu: int, at: float) -> SimPod:
    """A placeholder of ``cpu`` millicores bound to ``node`` at ``at``."""
    pod = cluster.create_pod(Service(f"placeholder-{at:g}", cpu, 0, kind="Pod"), at, Constraints())
    cluster.bind(pod, cluster.nodes[node], at)
    return pod


def schedule(cluster: SimCluster, service: Service) -> SimPod:
    pod = cluster.create_pod(service, 100)
    Scheduler(random.Random(0)).schedule(cluster, 100)
    return pod


def test_a_pod_that_fits_nowhere_preempts_a_placeholder_and_binds_there() -> None:
    cluster = cluster_of(3000, 0)
    held = holding(cluster, "n-0002", 3500, 0)

    pod = schedule(cluster, BIG)

    assert pod.node == "n-0002"
    assert held.uid not in cluster.pods
    assert cluster.evictions == 0  # a placeholder's preemption is no workload's eviction
    assert cluster.totals.pending == 0


def test_preemption_picks_the_node_with_the_fewest_victims_and_reprieves_the_earliest() -> None:
    cluster = cluster_of(0, 0)
    early, second, late, last = (holding(cluster, "n-0001", 900, t) for t in (0, 1, 2, 3))
    alone = holding(cluster, "n-0002", 3500, 4)
    big = Service("big", 1500, 0, namespace="shop")

    pod = schedule(cluster, big)

    # n-0001 would lose 2 of its 4 (3920 - 1500 leaves room for two kept), n-0002 its one
    assert pod.node == "n-0002"
    assert alone.uid not in cluster.pods
    assert {early.uid, second.uid, late.uid, last.uid} <= set(cluster.pods)


def test_preemption_reprieves_the_earliest_started_and_ties_go_to_the_latest_start() -> None:
    cluster = cluster_of(0, 0)
    kept, lost = holding(cluster, "n-0001", 1500, 0), holding(cluster, "n-0001", 1500, 10)
    other = holding(cluster, "n-0002", 3500, 5)
    big = Service("big", 1500, 0, namespace="shop")

    pod = schedule(cluster, big)

    # one victim on each node: n-0001's started at 10 (its one at 0 reprieved), n-0002's at 5
    assert pod.node == "n-0001"
    assert set(cluster.pods) >= {kept.uid, other.uid}
    assert lost.uid not in cluster.pods


def test_no_preemption_where_the_placeholders_going_is_not_enough_or_the_pod_may_not_go() -> None:
    cluster = cluster_of(3000, 0)
    holding(cluster, "n-0001", 500, 0)  # n-0001: 3500 of 3920 even without it
    holding(cluster, "n-0002", 3500, 0)
    cluster.nodes["n-0002"].unschedulable = True
    before = set(cluster.pods)

    pod = schedule(cluster, BIG)

    assert pod.node is None
    assert before <= set(cluster.pods)


def test_a_placeholder_never_preempts_and_waits_behind_the_workloads_pods() -> None:
    cluster = cluster_of(0)
    first = cluster.create_pod(Service("placeholder-1", 3000, 0, kind="Pod"), 0, Constraints())
    second = cluster.create_pod(Service("placeholder-2", 3000, 0, kind="Pod"), 1, Constraints())
    later = cluster.create_pod(BIG, 2)  # created last, of a higher priority

    Scheduler(random.Random(0)).schedule(cluster, 2)

    assert later.node == "n-0001"
    assert first.node is None and second.node is None
    assert first.uid in cluster.pods and second.uid in cluster.pods
