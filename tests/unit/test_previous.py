"""Cheapest previous deployment: matching by content, attainability, cost ordering."""

import itertools
import math
import random
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.builders import cluster, node, pod
from tuner.analyse.previous import _scores, find_previous
from tuner.model.cluster import Cluster, Workload
from tuner.model.constraints import Constraints, LabelSelector, PodAffinityTerm
from tuner.model.execution import Execution, NodeState, WorkloadType, execution_of
from tuner.model.movability import Policy, assess
from tuner.model.pools import discover
from tuner.plan.planner import plan
from tuner.plan.replay import replay
from tuner.settings import Pricing, Settings, settings_from_dict

PRICING = Pricing(price_per_core=1.0, price_per_gb=0.0)
POLICY = Policy(frozenset())


def record(c: Cluster, load: float = 100.0) -> Execution:
    return execution_of(c, assess(c, POLICY), PRICING, load, 0.0, 600.0)


def previous(c: Cluster, history: list[Execution]):  # type: ignore[no-untyped-def]
    return find_previous(
        c, assess(c, POLICY), PRICING, history, sum(n.capacity.cpu / 1000 for n in c.nodes)
    )


def test_returns_to_a_cheaper_deployment_with_renamed_nodes() -> None:
    # Earlier: two nodes held everything. Now the autoscaler spread it over three new nodes.
    then = cluster(
        [node("old-1"), node("old-2")],
        [pod("web-1", "old-1", "1"), pod("web-2", "old-1", "1"), pod("api-1", "old-2", "1")],
    )
    now = cluster(
        [node("new-1"), node("new-2"), node("new-3")],
        [pod("web-1", "new-1", "1"), pod("web-2", "new-2", "1"), pod("api-1", "new-3", "1")],
    )
    result = previous(now, [record(then)])
    assert result.cost == 8.0
    assert result.change is not None
    assert len(result.change.remove_nodes) == 1
    # the plan reaches exactly the earlier layout: one node with two web pods, one with api
    final = replay(now, plan(now, result.change))
    layout = sorted(
        sorted(k.split("/")[1].split("-")[0] for k in final.pods[n])
        for n in final.pods
        if n not in final.removed
    )
    assert layout == [["api"], ["web", "web"]]


def test_statefulset_pods_anchor_the_matching() -> None:
    then = cluster(
        [node("o1"), node("o2")],
        [
            pod("db-0", "o1", kind="StatefulSet", workload="db"),
            pod("web-1", "o2"),
            pod("web-2", "o2"),
        ],
    )
    now = cluster(
        [node("n1"), node("n2"), node("n3")],
        [
            pod("web-1", "n1"),
            pod("web-2", "n1"),
            pod("web-3", "n2"),
            pod("db-0", "n3", kind="StatefulSet", workload="db"),
        ],
    )
    result = previous(now, [record(then)])
    assert result.change is not None
    # n3 (with the StatefulSet pod) must stand for o1; it is never removed
    assert "n3" not in result.change.remove_nodes
    assert all(p.owner_kind != "StatefulSet" for p in result.change.removals)


def test_unattainable_entries_are_reported_and_the_next_is_tried() -> None:
    now = cluster(
        [node("n1"), node("n2"), node("n3")],
        [
            pod("db-0", "n1", kind="StatefulSet", workload="db"),
            pod("db-1", "n2", kind="StatefulSet", workload="db"),
            pod("web-1", "n3"),
        ],
    )
    # cheapest entry: both db pods on one node -> would move a StatefulSet pod
    cheapest = record(
        cluster(
            [node("x1"), node("x2")],
            [
                pod("db-0", "x1", kind="StatefulSet", workload="db"),
                pod("db-1", "x1", kind="StatefulSet", workload="db"),
                pod("web-1", "x2"),
            ],
        )
    )
    cheapest = replace(cheapest, cost=7.0)
    # second: a node type the cluster does not have
    alien = Execution(
        "alien",
        0,
        1,
        100,
        4.0,
        0.1,
        (
            NodeState(
                "z", 4000, 2**33, "m5.xlarge", 4.0, ((Workload.parse("default/Deployment/web"), 1),)
            ),
        ),
        (),
    )
    result = previous(now, [alien, cheapest])
    assert result.execution is None
    reasons = dict(result.unattainable)
    assert "m5.xlarge" in reasons["alien"]
    assert "StatefulSet/db" in reasons[cheapest.id]


def test_only_cheaper_entries_are_considered_and_cheapest_first() -> None:
    now = cluster([node("n1"), node("n2")], [pod("web-1", "n1"), pod("web-2", "n2")])
    same = record(now)
    assert previous(now, [same]).execution is None  # equal cost: not cheaper
    one_node = record(cluster([node("m1")], [pod("web-1", "m1"), pod("web-2", "m1")]))
    result = previous(now, [same, one_node])
    assert result.execution is not None and result.execution.id == one_node.id
    assert result.cost == 4.0


def test_additions_need_a_running_movable_workload_and_room() -> None:
    now = cluster(
        [node("n1", "1", "1Gi"), node("n2", "1", "1Gi")],
        [pod("web-1", "n1", "600m"), pod("web-2", "n2", "600m")],
    )
    crowded = record(
        cluster([node("m1", "1", "1Gi")], [pod("web-1", "m1", "100m"), pod("web-2", "m1", "100m")])
    )
    # today's requests (600m each) do not fit on one 1-core node
    result = previous(now, [crowded])
    assert result.execution is None
    assert "not enough free CPU" in dict(result.unattainable)[crowded.id]


def test_additions_respect_required_anti_affinity() -> None:
    apart = Constraints(
        anti_affinity=(PodAffinityTerm(LabelSelector((("app", "web"),)), ("default",)),)
    )
    now = cluster(
        [node("n1"), node("n2")],
        [pod("web-1", "n1", constraints=apart), pod("web-2", "n2", constraints=apart)],
    )
    # earlier both replicas shared a node (before the anti-affinity rule was added)
    together = record(cluster([node("m1")], [pod("web-1", "m1"), pod("web-2", "m1")]))
    result = previous(now, [together])
    assert result.execution is None
    assert dict(result.unattainable)[together.id] == (
        "default/Deployment/web cannot run on n1: required pod anti-affinity"
    )


def _brute_force_best(scores: np.ndarray) -> float:
    rows, cols = scores.shape
    return max(
        sum(scores[r, c] for r, c in zip(perm, range(cols), strict=False))
        for perm in itertools.permutations(range(rows), cols)
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_assignment_matches_brute_force_on_small_instances(data: st.DataObject) -> None:
    """linear_sum_assignment finds the same best total score as enumerating every mapping."""
    from scipy.optimize import linear_sum_assignment

    n_now = data.draw(st.integers(1, 5))
    n_then = data.draw(st.integers(1, n_now))
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    workloads = [
        Workload.parse(w)
        for w in ("default/Deployment/a", "default/Deployment/b", "default/StatefulSet/s")
    ]
    nodes = [node(f"n{i}") for i in range(n_now)]
    pods = []
    for i in range(n_now):
        for w in workloads:
            for k in range(rng.randint(0, 2)):
                pods.append(pod(f"{w.name}-{i}{k}", f"n{i}", kind=w.kind, workload=w.name))
    c = cluster(nodes, pods)
    states = [
        NodeState(
            f"t{j}", 4000, 8 * 2**30, "", 4.0, tuple((w, rng.randint(0, 2)) for w in workloads)
        )
        for j in range(n_then)
    ]
    weights = dict(zip(workloads, (1, 1, 100), strict=True))
    scores = _scores(c, assess(c, POLICY), nodes, states, weights)
    rows, cols = linear_sum_assignment(scores, maximize=True)
    assert math.isclose(scores[rows, cols].sum(), _brute_force_best(scores))


def test_workload_types_record_movability() -> None:
    c = cluster(
        [node("n1")], [pod("db-0", "n1", kind="StatefulSet", workload="db"), pod("web-1", "n1")]
    )
    types = {str(w.workload): w for w in record(c).workloads}
    db = Workload("default", "StatefulSet", "db")
    assert types["default/StatefulSet/db"] == WorkloadType(db, 100, 128 * 2**20, False)
    assert types["default/Deployment/web"].movable


def test_the_cost_is_summed_in_the_clusters_node_order() -> None:
    # Float sums depend on their order (0.1 + 0.2 + 0.7 != 0.7 + 0.2 + 0.1); summed over a set
    # of node names, the cost (and so Algorithm 1's tie against removal) changed with the hash
    # seed of the process.
    prices = ("0.1", "0.2", "0.7", "0.3")
    names = [f"n{i}" for i in range(len(prices))]
    nodes = [
        node(name, annotations={PRICING.price_annotation: price})
        for name, price in zip(names, prices, strict=True)
    ]
    then = cluster(nodes, [pod(f"web-{i}", name, "1") for i, name in enumerate(names)])
    extra = node("spare", annotations={PRICING.price_annotation: "5"})
    now = cluster([*nodes, extra], list(then.pods))
    result = previous(now, [record(then)])
    assert result.execution is not None
    assert result.cost == sum(float(p) for p in prices)  # in node order, bit for bit


def test_a_deployment_on_another_node_type_is_provisioned_from_a_pool_of_that_type() -> None:
    big = {"cloud.google.com/gke-nodepool": "big"}
    then = cluster(
        [node("b-1", "8", "16Gi", labels=big, instance_type="big-8")],
        [pod("web-1", "b-1", "3"), pod("web-2", "b-1", "3")],
    )
    entry = replace(record(then), cost=6.0)
    now = cluster(
        [node("s-1", instance_type="small-4"), node("s-2", instance_type="small-4")],
        [pod("web-1", "s-1", "3"), pod("web-2", "s-2", "3")],
    )
    movability = assess(now, POLICY)
    # no pool offers big-8: unattainable, as before
    alone = find_previous(now, movability, PRICING, [entry], 8.0, discover(now, Settings()))
    assert alone.execution is None and "no node pool of that type" in alone.unattainable[0][1]
    # a pool of big-8 nodes that may grow: the deployment comes back on a new node
    template = {"instance_type": "big-8", "cpu": "8", "memory": "16Gi", "labels": big}
    pools = settings_from_dict({"pools": {"big": {"max": 1, "template": template}}})
    found = find_previous(now, movability, PRICING, [entry], 8.0, discover(now, pools))
    assert found.change is not None and found.cost == 8.0
    assert [(n.name, n.pool.name) for n in found.change.new_nodes] == [("big+1", "big")]
    assert set(found.change.remove_nodes) == {"s-1", "s-2"}
    actions = plan(now, found.change)
    final = replay(now, actions)
    assert sorted(final.pods["big+1"]) == ["default/web-1", "default/web-2"]
    # a pool at its maximum cannot grow: unattainable
    full = settings_from_dict({"pools": {"big": {"max": 0, "template": template}}})
    assert find_previous(now, movability, PRICING, [entry], 8.0, discover(now, full)).change is None
