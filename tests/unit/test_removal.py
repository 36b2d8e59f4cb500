"""Node removal: the down-scaling thesis' Figure 3.1 example and every rule of node removal."""

from dataclasses import replace
from fractions import Fraction

from testkit.builders import cluster, node, pod
from tuner.analyse.options import Refusal
from tuner.analyse.removal import CandidateTimers, find_removal
from tuner.model.cluster import Cluster
from tuner.model.constraints import Constraints, Requirement, Taint
from tuner.model.limits import Budget, EvictionLimit, Limits
from tuner.model.movability import Policy, assess
from tuner.plan.planner import plan
from tuner.plan.replay import replay
from tuner.settings import Analyse, PoolSettings, Pricing, Settings, Thresholds

GREEN = Constraints(node_affinity=((Requirement("color", "In", ("green",)),),))


def figure_3_1() -> Cluster:
    """Four 4-core/8G nodes; node 4 is green and pod F requires green."""
    nodes = [node(f"node-{i}", "4", "8G") for i in (1, 2, 3)] + [
        node("node-4", "4", "8G", labels={"color": "green"})
    ]
    pods = [
        pod("a-1", "node-1", "3000m", "4G"),
        pod("b-1", "node-2", "2000m", "1G"),
        pod("c-1", "node-2", "200m", "1G"),
        pod("d-1", "node-3", "1500m", "4G"),
        pod("e-1", "node-3", "500m", "2.5G"),
        pod("f-1", "node-4", "500m", "2G", constraints=GREEN),
    ]
    return cluster(nodes, pods)


def settings(**analyse: object) -> Settings:
    return Settings(pricing=Pricing(), analyse=Analyse(excluded_namespaces=frozenset(), **analyse))  # type: ignore[arg-type]


def run(c: Cluster, s: Settings, timers: CandidateTimers | None = None, now: float = 0.0):  # type: ignore[no-untyped-def]
    return find_removal(c, s, assess(c, Policy(s.analyse.excluded_namespaces)), timers, now)


def test_figure_3_1_removes_nodes_1_and_2_into_cluster_state_2() -> None:
    result = run(figure_3_1(), settings(max_parallel_removals=2))
    assert result.removal is not None
    assert result.removal.nodes == ("node-1", "node-2")
    moves = {m.pod.name: m.node for m in result.removal.moves}
    # Figure 3.2: node 3 runs D, E, B; node 4 runs F, A, C
    assert moves == {"a-1": "node-4", "b-1": "node-3", "c-1": "node-4"}


def test_figure_3_1_node_4_is_never_removable_because_f_needs_green() -> None:
    c = figure_3_1()
    result = run(c, settings(max_parallel_removals=4))
    assert result.removal is not None
    assert "node-4" not in result.removal.nodes
    assert len(result.removal.nodes) == 2  # the packed state 2 admits no third removal


def test_cluster_threshold_limits_removals() -> None:
    # requests 7700m of 16000m; after removing one node: 7700/12000 = 0.64, after two: 0.96
    limited = settings(max_parallel_removals=3, thresholds=Thresholds(cpu=Fraction(8, 10)))
    result = run(figure_3_1(), limited)
    assert result.removal is not None and len(result.removal.nodes) == 1
    strict = settings(thresholds=Thresholds(cpu=Fraction(6, 10)))
    blocked = run(figure_3_1(), strict)
    assert blocked.removal is None
    assert blocked.candidates == frozenset()  # the linear check already rules every node out


def test_usable_utilization_is_checked_after_packing() -> None:
    # Each node would pass the linear check, but packing leaves memory unusable.
    from tuner.settings import Usability

    nodes = [node("n1", "2", "4Gi"), node("n2", "2", "4Gi"), node("n3", "2", "4Gi")]
    pods = [
        pod("w-1", "n1", "1", "1Gi"),
        pod("w-2", "n2", "1", "1Gi"),
        pod("w-3", "n3", "1", "1Gi"),
    ]
    tight = settings(
        thresholds=Thresholds(memory=Fraction(6, 10)),
        usability=Usability(max_memory_to_cpu=Fraction(1)),
    )
    assert run(cluster(nodes, pods), tight).removal is None
    loose = settings(thresholds=Thresholds(memory=Fraction(6, 10)))
    assert run(cluster(nodes, pods), loose).removal is not None


def test_most_expensive_removable_node_goes_first() -> None:
    nodes = [node("cheap", "2", "4Gi"), node("pricey", "8", "32Gi"), node("mid", "4", "8Gi")]
    pods = [pod("w-1", "cheap", "100m"), pod("w-2", "pricey", "100m"), pod("w-3", "mid", "100m")]
    result = run(cluster(nodes, pods), settings())
    assert result.removal is not None and result.removal.nodes == ("pricey",)


def test_ties_go_to_fewest_pods_then_most_even_spread() -> None:
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("w-1", "a"), pod("w-2", "a"), pod("w-3", "b"), pod("w-4", "c", "2")]
    result = run(cluster(nodes, pods), settings())
    # b and c have one pod each; moving b's pod keeps the receivers' maximum CPU share lowest
    assert result.removal is not None and result.removal.nodes == ("b",)


def test_of_nodes_with_as_many_pods_the_one_stranding_the_fewest_workloads_goes() -> None:
    # a and b hold two pods each; a's solo-1 is solo's only pod (while it moves nothing serves
    # solo), b's two are of web, which runs on a and c too
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("solo-1", "a", workload="solo"), pod("web-1", "a", workload="web")]
    pods += [pod(f"web-{i}", "b", workload="web") for i in (2, 3)]
    pods += [pod("web-4", "c", workload="web"), pod("db-0", "c", workload="db", kind="StatefulSet")]
    result = run(cluster(nodes, pods), settings(max_parallel_removals=1))
    assert result.removal is not None and result.removal.nodes == ("b",)
    # fewer pods to move still come first: with web-1 gone, a moves one pod against b's two
    fewer = [p for p in pods if p.name != "web-1"]
    result = run(cluster(nodes, fewer), settings(max_parallel_removals=1))
    assert result.removal is not None and result.removal.nodes == ("a",)


def test_pods_never_land_on_a_node_being_removed() -> None:
    c = figure_3_1()
    result = run(c, settings(max_parallel_removals=3))
    assert result.removal is not None
    removed = set(result.removal.nodes)
    assert all(m.node not in removed for m in result.removal.moves)


def test_unmovable_pods_and_protected_nodes_block_removal() -> None:
    nodes = [
        node("db"),
        node("free"),
        node("cp", labels={"node-role.kubernetes.io/control-plane": ""}),
    ]
    pods = [pod("pg-0", "db", kind="StatefulSet", workload="pg")]
    result = run(cluster(nodes, pods), settings(max_parallel_removals=3))
    assert result.removal is not None and result.removal.nodes == ("free",)


def test_a_cordoned_node_is_left_to_whoever_cordoned_it() -> None:
    # Empty and cheapest to remove, but cordoned: someone drains it (maintenance), or the tuner
    # already left it for the Cluster Autoscaler; removing it again every window is churn.
    nodes = [node("a"), node("b"), node("left", unschedulable=True)]
    c = cluster(nodes, [pod("w-1", "a", "500m")])
    movability = assess(c, Policy(frozenset()))
    assert movability.node_reasons["left"].startswith("cordoned")
    result = run(c, settings(max_parallel_removals=3))
    assert result.removal is not None and "left" not in result.removal.nodes


def test_daemonset_pods_vanish_with_their_node() -> None:
    nodes = [node("a", "1", "1Gi"), node("b", "1", "1Gi")]
    pods = [
        pod("ds-a", "a", "900m", kind="DaemonSet", workload="ds"),
        pod("ds-b", "b", "900m", kind="DaemonSet", workload="ds"),
    ]
    result = run(cluster(nodes, pods), settings())
    assert result.removal is not None and result.removal.moves == ()


def test_nodes_another_autoscaler_deletes_are_neither_removed_nor_filled() -> None:
    taint = Taint("ToBeDeletedByClusterAutoscaler", "123", "NoSchedule")
    nodes = [node("a"), node("b", taints=(taint,)), node("c", "1", "1Gi")]
    pods = [pod("w-1", "c", "500m", "100Mi")]
    result = run(cluster(nodes, pods), settings())
    assert result.removal is not None
    assert "b" not in result.removal.nodes
    assert all(m.node != "b" for m in result.removal.moves)


def test_a_deletion_candidate_of_the_cluster_autoscaler_may_be_removed_not_filled() -> None:
    """It found the node unneeded too: the tuner may remove it sooner, but moves nothing
    onto it (the autoscaler may delete it)."""
    taint = Taint("DeletionCandidateOfClusterAutoscaler", "123", "PreferNoSchedule")
    nodes = [node("a", "1", "1Gi"), node("b", taints=(taint,)), node("c", "1", "1Gi")]
    pods = [pod("w-1", "b", "500m", "100Mi"), pod("w-2", "c", "500m", "100Mi")]
    result = run(cluster(nodes, pods), settings())
    assert result.removal is not None
    assert "b" in result.removal.nodes
    assert all(m.node != "b" for m in result.removal.moves)


def test_removal_can_be_disabled() -> None:
    result = run(figure_3_1(), settings(remove_nodes=False))
    assert result.removal is None and result.refusal is Refusal.DISABLED
    assert result.reason == "node removal is disabled"
    assert result.candidates  # the check still runs so the timers stay current


def test_candidate_delay_limits_attempts_to_ripe_candidates() -> None:
    c = figure_3_1()
    fresh = run(c, settings(candidate_delay_s=600), CandidateTimers(), now=1000)
    assert fresh.removal is None and fresh.refusal is Refusal.CANDIDATE_DELAY
    assert "candidate delay" in fresh.reason
    assert fresh.timers is not None and fresh.timers.ripe(1600, 600) >= {"node-1", "node-3"}
    # only node-3 has been a candidate for long enough
    timers = CandidateTimers((("node-3", 0.0),))
    only_3 = run(c, settings(candidate_delay_s=600), timers, now=1000)
    assert only_3.removal is not None and only_3.removal.nodes == ("node-3",)
    # a zero delay makes a new candidate eligible at once
    assert run(c, settings(candidate_delay_s=0), CandidateTimers(), now=5).removal is not None


def test_without_candidates_the_reason_is_the_check_not_the_delay() -> None:
    full = cluster([node("a", "1", "1Gi"), node("b", "1", "1Gi")], [pod("w-1", "a", "900m")])
    s = settings(candidate_delay_s=600, thresholds=Thresholds(cpu=Fraction(85, 100)))
    result = run(full, s, CandidateTimers(), now=0)
    assert result.removal is None and not result.candidates
    assert result.refusal is Refusal.NO_CANDIDATE
    assert "candidate delay" not in result.reason
    assert "no node passed the candidate check" in result.reason


def test_a_cordoned_nodes_free_room_is_not_usable_headroom() -> None:
    # c is cordoned and keeps a StatefulSet pod: its 3.9 free cores are no headroom. Emptying
    # a or b leaves 3500m on one 4-core node: 3600m over 4100m usable is 87.8 % > 85 %.
    nodes = [node("a"), node("b"), node("c", unschedulable=True)]
    pods = [
        pod("big-1", "a", "2500m"),
        pod("small-1", "b", "1000m"),
        pod("db-0", "c", "100m", kind="StatefulSet"),
    ]
    s = settings(thresholds=Thresholds(cpu=Fraction(85, 100)))
    result = run(cluster(nodes, pods), s)
    assert result.removal is None and result.refusal is Refusal.THRESHOLDS
    assert "usable utilization" in result.reason


def test_candidate_timers_reset_when_a_node_drops_out() -> None:
    timers = CandidateTimers().update({"a", "b"}, now=0)
    timers = timers.update({"a"}, now=100)
    timers = timers.update({"a", "b"}, now=200)
    assert timers.ripe(now=300, delay=250) == {"a"}
    assert timers.ripe(now=500, delay=250) == {"a", "b"}


def test_the_last_node_is_never_removed() -> None:
    c = cluster([node("only")], [])
    assert run(c, settings(thresholds=Thresholds(cpu=Fraction(9, 10)))).removal is None


def test_saving_is_the_price_of_the_removed_nodes() -> None:
    c = figure_3_1()
    s = replace(
        settings(max_parallel_removals=2), pricing=Pricing(price_per_core=1.0, price_per_gb=0.0)
    )
    result = run(c, s)
    assert result.removal is not None and result.removal.saving == 8.0


def test_removal_never_plans_a_pool_below_its_minimum() -> None:
    pool = {"cloud.google.com/gke-nodepool": "general"}
    c = cluster(
        [node(f"n-{i}", "4", "8G", labels=pool) for i in (1, 2, 3)],
        [pod("a-1", "n-1", "500m", "1G"), pod("b-1", "n-2", "500m", "1G")],
    )
    free = run(c, settings(max_parallel_removals=3))
    assert free.removal is not None and len(free.removal.nodes) == 2
    floor = replace(settings(max_parallel_removals=3), pools={"general": PoolSettings(2)})
    one = run(c, floor)
    assert one.removal is not None and len(one.removal.nodes) == 1
    full = run(c, replace(floor, pools={"general": PoolSettings(3)}))
    assert full.removal is None and full.refusal is Refusal.POOL_AT_MINIMUM
    assert full.reason == "no node can be removed (every candidate's pool is at its minimum size)"


def _make_room(moved: str = "Deployment", a_cpu: str = "1000m", b_cpu: str = "1500m") -> Cluster:
    """Node n3's pod g-1 (2000m) requires green; the only green node, n1, lacks 1000m, and its
    a-1 (a ``moved`` pod) fits on n2; n1 and n2 hold StatefulSet pods (never removed)."""
    nodes = [node("n1", "4", "8Gi", labels={"color": "green"}), node("n2"), node("n3")]
    pods = [
        pod("s-1", "n1", "500m", kind="StatefulSet", workload="s"),
        pod("a-1", "n1", a_cpu, kind=moved, workload="a"),
        pod("b-1", "n1", b_cpu, kind="StatefulSet", workload="b"),
        pod("s-2", "n2", "1000m", kind="StatefulSet", workload="s"),
        pod("g-1", "n3", "2000m", constraints=GREEN, workload="g"),
    ]
    return cluster(nodes, pods)


def test_a_smaller_movable_pod_makes_room_for_a_pod_that_fits_nowhere() -> None:
    c = _make_room()
    result = run(c, settings(make_room=True))
    assert result.removal is not None and result.removal.nodes == ("n3",)
    moves = {m.pod.name: m.node for m in result.removal.moves}
    assert moves == {"a-1": "n2", "g-1": "n1"}
    actions = plan(c, result.removal.change)
    assert [(type(a).__name__, getattr(a, "target", None)) for a in actions] == [
        ("Migrate", "n2"),  # the room made first
        ("Migrate", "n1"),
        ("RemoveNode", None),
    ]
    replay(c, actions)


def test_room_is_made_by_a_pod_whose_workload_runs_another_before_a_workloads_only_pod() -> None:
    """n1 lacks 1000m for g-1; a-1 and c-1 (1000m each) would both free it, but a-1 is its
    workload's only pod (nothing would serve it while it moves) and c-2 runs on n2."""
    nodes = [node("n1", "4", "8Gi", labels={"color": "green"}), node("n2"), node("n3")]
    pods = [
        pod("s-1", "n1", "500m", kind="StatefulSet", workload="s"),
        pod("a-1", "n1", "1000m", workload="a"),
        pod("c-1", "n1", "1000m", workload="c"),
        pod("b-1", "n1", "500m", kind="StatefulSet", workload="b"),
        pod("s-2", "n2", "1000m", kind="StatefulSet", workload="s"),
        pod("c-2", "n2", "1000m", workload="c"),
        pod("g-1", "n3", "2000m", constraints=GREEN, workload="g"),
    ]
    result = run(cluster(nodes, pods), settings(make_room=True))
    assert result.removal is not None and result.removal.nodes == ("n3",)
    assert {m.pod.name: m.node for m in result.removal.moves} == {"c-1": "n2", "g-1": "n1"}


def test_the_eviction_budget_counts_the_pod_moved_to_make_room() -> None:
    c = _make_room()
    s = settings(make_room=True)
    movability = assess(c, Policy(s.analyse.excluded_namespaces))
    one = Budget(Limits(cluster=EvictionLimit(per_hour=1)), {}, {})
    refused = find_removal(c, s, movability, None, 0.0, None, one)
    assert refused.removal is None and refused.refusal is Refusal.BUDGET
    assert refused.limited is not None and refused.limited.startswith("n3: ")
    two = Budget(Limits(cluster=EvictionLimit(per_hour=2)), {}, {})
    taken = find_removal(c, s, movability, None, 0.0, None, two)
    assert taken.removal is not None and len(taken.removal.moves) == 2


def test_room_is_made_only_by_a_movable_pod_no_larger_than_the_one_placed() -> None:
    unmovable = run(_make_room("StatefulSet"), settings(make_room=True))
    assert unmovable.removal is None and unmovable.refusal is Refusal.NO_ROOM
    larger = run(
        _make_room(a_cpu="2500m", b_cpu="500m"), settings(make_room=True)
    )  # 2500m would fit n2
    assert larger.removal is None and larger.refusal is Refusal.NO_ROOM
    switched_off = run(_make_room(), settings(make_room=False))
    assert switched_off.removal is None and switched_off.refusal is Refusal.NO_ROOM
