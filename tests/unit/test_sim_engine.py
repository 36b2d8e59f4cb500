"""The simulation's driving interface: reproducibility, stable windows, and the simulated
executor (actions verified for what the daemon's executor claims, or reported unverified)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tuner.model.cluster import Pod
from tuner.model.movability import Policy, assess
from tuner.plan.actions import Migrate, RemoveNode
from tuner.settings import Execute
from tuner.sim.autoscaler import CANDIDATE_TAINT
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.load import Phase, Phases
from tuner.sim.metrics import ActionResult
from tuner.sim.pools import NodeGroup
from tuner.sim.ports import SimActuator
from tuner.sim.prices import NODE_TYPES
from tuner.sim.scenarios import scenario
from tuner.sim.strategy import Strategy
from tuner.sim.workloads import HpaSpec, Service

E2 = NODE_TYPES["e2-standard-4"]
WEB = Service("web", 2100, 2**28, replicas=3, namespace="shop")
"""2100m of 3920m: 54 % with the DaemonSet, so the Cluster Autoscaler keeps a node with one."""
API = Service("api", 200, 2**27, hpa=HpaSpec(1, 10, 0.5), cpu_per_load=10.0, namespace="shop")


def small(initial_nodes: int = 3, load: float = 10.0) -> Scenario:
    return Scenario(
        name="small",
        title="small",
        services=(WEB, API),
        daemonsets=(Service("proxy", 100, 0, kind="DaemonSet", namespace="kube-system"),),
        loads={"shop": Phases(60, (Phase(3600, load),))},
        pools=(NodeGroup("pool", E2, 1, 10, initial_nodes),),
        duration=1800,
        warmup=60,
    )


def test_same_seed_same_run() -> None:
    first = Simulation(scenario("thesis-narrow", 0.5), 7)
    second = Simulation(scenario("thesis-narrow", 0.5), 7)
    for sim in (first, second):
        sim.advance(1800 + 1800)
    assert first.series == second.series


def test_window_is_stable_once_nothing_changed_for_its_length() -> None:
    sim = Simulation(small(), 1)
    sim.advance(60 + 300)
    assert not sim.window(600).stable
    sim.advance(600)
    window = sim.window(600)
    assert window.stable
    assert window.load == 10.0


def migrate_api(
    sim: Simulation, surge_lone_pods: bool = Execute.surge_lone_pods
) -> tuple[Pod, str, ActionResult]:
    """Move the api pod to another node: (the pod, the target, the result)."""
    cluster = sim.cluster()
    pod = next(p for p in cluster.pods if p.workload.name == "api")
    target = next(n.name for n in cluster.nodes if n.name != pod.node)
    (result,) = sim.apply([Migrate(pod, target)], surge_lone_pods=surge_lone_pods)
    return pod, target, result


def test_migration_lands_on_the_labelled_node_and_is_verified() -> None:
    sim = Simulation(small(), 1)
    sim.advance(120)
    pod, target, result = migrate_api(sim)
    assert result.verified, result.detail
    (moved,) = [p for p in sim.cluster().pods if p.workload.name == "api"]
    assert moved.key != pod.key
    assert moved.node == target
    assert all(not k.startswith("tuner.dev/") for n in sim.cluster().nodes for k in n.labels)


def test_a_migration_returns_once_the_replacement_is_ready_as_the_daemons_executor_does() -> None:
    """The daemon's executor waits for the replacement to be Ready before its next action (or
    wave, below): the simulated one lets time pass until then."""
    sim = Simulation(small(), 1)
    sim.advance(120)
    before = sim.now
    _, _, result = migrate_api(sim)
    assert result.verified, result.detail
    assert sim.now >= before + sim.scenario.startup
    assert sim.controllers.ready_counts()[API] == 1


def test_the_simulated_actuator_says_how_long_a_transition_took_in_simulated_time() -> None:
    """The cycle counts the warm-up after a change from its end (:attr:`TransitionResult.took_s`):
    the simulated actuator measures it on the simulated clock, as the daemon's does on its own."""
    sim = Simulation(small(), 1)
    sim.advance(120)
    cluster = sim.cluster()
    pod = next(p for p in cluster.pods if p.workload.name == "api")
    target = next(n.name for n in cluster.nodes if n.name != pod.node)
    before = sim.now
    result = SimActuator(sim, "autoscaler").carry_out([Migrate(pod, target)])
    assert result.completed and result.took_s == sim.now - before >= sim.scenario.startup


CACHE = Service("cache", 200, 2**27, namespace="shop")


def _two_workloads_moved(limit: int) -> tuple[float, float]:
    """Move the api pod and the cache pod to a third node in one plan: the times their
    replacements were bound."""
    sim = Simulation(replace(small(4), services=(WEB, API, CACHE)), 1)
    sim.advance(120)
    cluster = sim.cluster()
    api, cache = (next(p for p in cluster.pods if p.workload.name == w) for w in ("api", "cache"))
    target = next(n.name for n in cluster.nodes if n.name not in (api.node, cache.node))

    results = sim.apply([Migrate(api, target), Migrate(cache, target)], max_moves_at_once=limit)

    assert [r.verified for r in results] == [True, True]
    new = {p.service.name: p for p in sim.cluster_state.pods.values() if p.node == target}
    return new["api"].bound_at, new["cache"].bound_at


def test_a_wave_moves_the_pods_of_two_workloads_at_once() -> None:
    """As the daemon's executor (:mod:`tuner.plan.waves`): both evicted, then both awaited."""
    api, cache = _two_workloads_moved(Execute.max_moves_at_once)
    assert api == cache
    api, cache = _two_workloads_moved(1)  # one at a time: the second after the first is Ready
    assert cache >= api + small().startup


def test_a_workload_of_three_pods_moves_one_at_a_time() -> None:
    """25 % of three replicas, rounded down, is none: its rollout's allowance is one pod."""
    sim = Simulation(small(4), 1)
    sim.advance(120)
    cluster = sim.cluster()
    web = sorted((p for p in cluster.pods if p.workload.name == "web"), key=lambda p: p.name)
    target = next(n.name for n in cluster.nodes if not any(p.node == n.name for p in web))
    spare = next(n.name for n in cluster.nodes if n.name not in (target, web[0].node, web[1].node))
    before = sim.now

    results = sim.apply([Migrate(web[0], target), Migrate(web[1], spare)])

    assert [r.verified for r in results] == [True, True]
    assert sim.now >= before + 2 * small().startup


def _two_of_eight_moved(cpu_per_load: float) -> float:
    """Move two pods of an eight-pod workload (its HPA holds it at eight) whose demand is
    ``cpu_per_load`` times the load of 10: the seconds the transition took."""
    busy = Service("busy", 200, 2**27, hpa=HpaSpec(8, 8, 0.5), cpu_per_load=cpu_per_load)
    sim = Simulation(
        replace(small(4), services=(busy,), loads={"default": small().loads["shop"]}), 1
    )
    sim.advance(300)
    cluster = sim.cluster()
    pods = sorted((p for p in cluster.pods if p.workload.name == "busy"), key=lambda p: p.name)
    first, second = pods[0], next(p for p in pods if p.node != pods[0].node)
    target = next(n.name for n in cluster.nodes if n.name not in (first.node, second.node))
    before = sim.now
    results = sim.apply([Migrate(first, target), Migrate(second, target)])
    assert [r.verified for r in results] == [True, True]
    return sim.now - before


def test_a_busy_workload_moves_one_pod_at_a_time() -> None:
    """Two of eight pods may go at once (25 %) while the other six hold its demand within their
    requests; at 90 % of its requests the others can stand in for none, so one at a time."""
    startup = small().startup
    assert _two_of_eight_moved(cpu_per_load=40.0) < 2 * startup  # 400m of 1600m: 25 %
    assert _two_of_eight_moved(cpu_per_load=144.0) >= 2 * startup  # 1440m of 1600m: 90 %


def test_a_replacement_not_ready_within_the_verification_timeout_fails() -> None:
    sim = Simulation(replace(small(), startup=Execute.verify_timeout_s + 60), 1)
    sim.advance(60 + Execute.verify_timeout_s + 120)
    _, _, result = migrate_api(sim)
    assert not result.verified
    assert "not Ready" in result.detail


def test_a_replacement_its_hpa_scales_in_before_it_is_ready_leaves_nothing_to_move() -> None:
    """Two api pods, one moved; while its replacement starts, the workload is scaled in to
    one: the ReplicaSet deletes the unready replacement first, and the move is done, not
    failed at the verification timeout (the daemon's executor: ``checks.new_pod_on``)."""
    sim = Simulation(small(), 1)
    sim.advance(120)
    api = next(s for s in sim.replicas if s.name == "api")
    sim.replicas[api] = 2
    sim.controllers.reconcile()
    sim.advance(60)
    controls = sim.controls
    waits = controls.pass_time

    def scaled_in(done: Callable[[], bool], timeout: float) -> bool:
        sim.replicas[api] = 1
        sim.controllers.reconcile()
        return waits(done, timeout)

    controls.pass_time = scaled_in  # type: ignore[method-assign]
    before = sim.now
    _, _, result = migrate_api(sim)
    assert result.verified, result.detail
    assert "went before it was Ready" in result.detail
    assert sim.now < before + Execute.verify_timeout_s
    assert sim.controllers.ready_counts()[api] == 1


def test_a_migrated_pod_the_scheduler_would_score_back_onto_its_source_lands_on_the_target() -> (
    None
):
    """Every node but the api pod's carries the Cluster Autoscaler's ``PreferNoSchedule``
    candidate taint: TaintToleration (weight 3) ranks the source above the labelled target
    (NodeAffinity, weight 2), so only the source's cordon for the move keeps the replacement
    off it; the cordon is undone."""
    sim = Simulation(small(), 1)
    sim.advance(120)
    source = next(p.node for p in sim.cluster().pods if p.workload.name == "api")
    for node in sim.cluster_state.nodes.values():
        if node.name != source:
            node.taints = (CANDIDATE_TAINT,)
    _, target, result = migrate_api(sim)
    assert result.verified, result.detail
    (moved,) = [p for p in sim.cluster().pods if p.workload.name == "api"]
    assert moved.node == target
    assert not any(n.unschedulable for n in sim.cluster().nodes)


def test_a_migration_with_no_room_off_its_source_fails_and_stops_the_transition() -> None:
    sim = Simulation(small(initial_nodes=2), 1)
    sim.advance(120)
    cluster = sim.cluster()
    pod = next(p for p in cluster.pods if p.workload.name == "api")
    state = sim.cluster_state
    others = [n for n in cluster.nodes if n.name != pod.node]
    for other in others:  # every node but the source full
        hog = Service("hog", other.allocatable.cpu - cluster.requested(other.name).cpu, 0)
        state.bind(state.create_pod(hog, sim.now), state.nodes[other.name], sim.now)
    full = others[0]
    results = sim.apply([Migrate(pod, full.name), RemoveNode(pod.node or "")])
    assert len(results) == 1
    assert not results[0].verified
    assert results[0].detail == f"landed nowhere (pending), not on {full.name}"
    assert sim.actions.failed == 1
    assert not any(n.unschedulable for n in sim.cluster().nodes)  # the drain given back


def outscored(sim: Simulation) -> tuple[Pod, str, str]:
    """The api pod, a target the Cluster Autoscaler's ``PreferNoSchedule`` candidate taint
    makes the scheduler rank below the third node (TaintToleration, weight 3, against the
    label's NodeAffinity, weight 2), and that third node."""
    cluster = sim.cluster()
    pod = next(p for p in cluster.pods if p.workload.name == "api")
    target, third = sorted(n.name for n in cluster.nodes if n.name != pod.node)
    sim.cluster_state.nodes[target].taints = (CANDIDATE_TAINT,)
    return pod, target, third


def test_a_replacement_the_scheduler_puts_on_a_third_node_is_verified_elsewhere() -> None:
    """The daemon's claim: Ready off its source and off the nodes the transition empties."""
    sim = Simulation(small(), 1)
    sim.advance(120)
    pod, target, third = outscored(sim)

    (result,) = sim.apply([Migrate(pod, target)])

    assert result.verified and result.elsewhere, result
    assert result.detail == f"landed on {third}, not {target}"
    assert [p.node for p in sim.cluster().pods if p.workload.name == "api"] == [third]
    assert (sim.actions.migrate, sim.actions.failed, sim.actions.landed_elsewhere) == (1, 0, 1)
    assert all(not k.startswith("tuner.dev/") for n in sim.cluster().nodes for k in n.labels)
    assert not any(n.unschedulable for n in sim.cluster().nodes)


def test_the_2019_tuners_executor_fails_a_replacement_off_its_target() -> None:
    sim = Simulation(small(), 1)
    sim.advance(120)
    pod, target, third = outscored(sim)

    (result,) = sim.apply([Migrate(pod, target)], on_target_only=True)

    assert not result.verified and result.detail == f"landed on {third}, not {target}"
    assert (sim.actions.failed, sim.actions.landed_elsewhere) == (1, 0)


def test_the_nodes_a_plan_empties_are_cordoned_before_its_first_move() -> None:
    """The third node, which the scheduler would pick, is being emptied: cordoned before the
    migration, it is closed to the replacement, which goes to its target; the node then goes."""
    sim = Simulation(small(), 1)
    sim.advance(120)
    pod, target, third = outscored(sim)

    results = sim.apply([Migrate(pod, target), RemoveNode(third)], node_removal="command")

    assert [(r.verified, r.elsewhere) for r in results] == [(True, False), (True, False)]
    assert [p.node for p in sim.cluster().pods if p.workload.name == "api"] == [target]
    assert third not in sim.cluster_state.nodes


def test_a_node_removal_whose_node_is_gone_has_nothing_to_do() -> None:
    """As the daemon's executor (``check_remove_node``: Gone): the Cluster Autoscaler may remove
    a node the transition empties while its pods move, one by one."""
    sim = Simulation(small(), 1)
    sim.advance(120)
    (result,) = sim.apply([RemoveNode("pool-9999")], node_removal="command")
    assert result.verified
    assert "already gone" in result.detail


def test_emptied_node_left_to_the_autoscaler_goes_after_its_unneeded_time() -> None:
    sim = Simulation(small(initial_nodes=4), 1)
    sim.advance(120)
    cluster = sim.cluster()
    web_nodes = {p.node for p in cluster.pods if p.workload.name == "web"}
    (spare,) = (n.name for n in cluster.nodes if n.name not in web_nodes)
    moves = [
        Migrate(p, min(n for n in web_nodes if n))
        for p in cluster.pods_by_node[spare]
        if not p.follows_node
    ]
    results = sim.apply([*moves, RemoveNode(spare)], node_removal="autoscaler")
    assert all(r.verified for r in results), results
    assert sim.cluster_state.nodes[spare].unschedulable
    sim.advance(700)
    assert spare not in sim.cluster_state.nodes


def test_replicaset_scale_down_takes_pods_from_the_node_with_most_replicas() -> None:
    # kube-controller-manager's ranking: of ready, bound pods, those sharing a node with more
    # replicas of the set go first (then the more recently ready, ages 50 s and 5 s being of
    # different logarithmic classes: tests/unit/test_sim_replicaset.py).
    sim = Simulation(small(initial_nodes=2), 1)
    sim.advance(120)
    state = sim.cluster_state
    api = next(s for s in sim.replicas if s.name == "api")
    for pod in state.pods_of(api):
        state.delete_pod(pod)
    first, second = sorted(state.nodes)[:2]
    for node, bound in ((first, 0.0), (first, 45.0), (second, 20.0)):  # all Ready by now
        state.bind(state.create_pod(api, bound), state.nodes[node], bound)
    sim.replicas[api] = 2
    sim.controllers.reconcile()
    assert sorted(p.node or "" for p in state.pods_of(api)) == [first, second]
    assert [p.bound_at for p in state.pods_of(api) if p.node == first] == [0.0]


def test_every_eviction_counts_once_in_the_tick_it_happens() -> None:
    # small(): 3 x web (2100m) need three nodes; the api pod is on one of them.
    sim = Simulation(small(), 1)
    sim.advance(120)
    _pod, target, result = migrate_api(sim, surge_lone_pods=False)  # evicted as it starts
    assert result.verified
    victim = next(n for n in sim.cluster().nodes if n.name != target)
    on_victim = [p for p in sim.cluster().pods_by_node[victim.name] if not p.follows_node]
    sim.apply([RemoveNode(victim.name)], node_removal="command")
    assert sim.cluster_state.evictions == 1 + len(on_victim)
    sim.advance(sim.tick)
    assert sum(sim.series.evictions) == 1 + len(on_victim)
    assert sim.series.evictions[-1] == len(on_victim)  # the move's, ticks before (its wait)


def test_nodes_carry_their_pool_and_the_providers_pool_label() -> None:
    sim = Simulation(small(), 1)
    assert {n.pool for n in sim.cluster_state.nodes.values()} == {"pool"}
    assert all(n.labels["cloud.google.com/gke-nodepool"] == "pool" for n in sim.cluster().nodes)


def test_running_totals_and_ready_counts_match_a_recount() -> None:
    sim = Simulation(scenario("online-boutique", 1.0), 3)
    for _ in range(12):
        sim.advance(300)
        state = sim.cluster_state
        pods = list(state.pods.values())
        workload = [p for p in pods if not p.daemon]
        assert state.totals.pending == sum(1 for p in pods if p.node is None)
        assert state.totals.pods == len(workload)
        assert state.totals.cpu == sum(p.service.cpu for p in workload)
        assert state.totals.memory == sum(p.service.memory for p in workload)
        ready: dict[object, int] = {}
        for p in pods:
            if p.node is not None and sim.now >= p.bound_at + sim.scenario.startup:
                ready[p.service] = ready.get(p.service, 0) + 1
        counted = sim.controllers.ready_counts()
        assert {s: n for s, n in counted.items() if n} == ready


def test_the_tuner_sees_the_pdbs_of_the_simulated_services() -> None:
    dns = Service("coredns", 100, 2**26, replicas=2, namespace="kube-system", pdb_max_unavailable=1)
    sim = Simulation(replace(small(), services=(WEB, API, dns)), 1)
    sim.advance(60)
    (pdb,) = sim.cluster().pdbs
    assert (pdb.namespace, pdb.name, pdb.disruptions_allowed) == ("kube-system", "coredns", 1)
    pods = [p for p in sim.cluster().pods if p.workload.name == "coredns"]
    assert len(pods) == 2 and all(pdb.covers(p) for p in pods)
    assert assess(sim.cluster(), Policy()).movable(pods[0])


class Turns(Strategy):
    """Notes the simulated time of each turn it is given."""

    name = "turns"

    def __init__(self) -> None:
        self.at: list[float] = []

    def on_tick(self, sim: Simulation) -> None:
        self.at.append(sim.now)


def test_a_strategy_takes_its_turns_from_the_warm_ups_end_or_from_its_strategy_from() -> None:
    """The evaluation's strategies start where it starts measuring; a replay's daemon starts
    before the warm-up it plays, so the replay's simulation starts its strategy there."""
    late, early = Turns(), Turns()
    Simulation(small(), 1, late).advance(90)
    Simulation(small(), 1, early, strategy_from=-small().warmup).advance(90)
    assert late.at[0] == 0.0
    assert early.at[:2] == [-60.0, -55.0]
