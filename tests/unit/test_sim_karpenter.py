"""Karpenter in the simulator, checked against hand-computed cases: what it launches for
pending pods, which nodes it consolidates and what it replaces them with, its 10 % budget,
``consolidateAfter``, and the pods it will not disrupt."""

from __future__ import annotations

from dataclasses import replace

from tuner.model.resources import Resources
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.karpenter import Karpenter
from tuner.sim.karpenter_disruption import WHEN_EMPTY, Command, KarpenterConfig
from tuner.sim.karpenter_packing import Offering, pack_claims
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.state import SimCluster, SimNode
from tuner.sim.strategies.karpenter import KarpenterStrategy
from tuner.sim.workloads import MIB, Service

E2, E4, E8 = (NODE_TYPES[f"e2-standard-{n}"] for n in (2, 4, 8))
# allocatable 1930m / 3920m / 7910m; 0.06701 / 0.13402 / 0.26805 USD per hour
SMALL, MEDIUM, LARGE = Offering("small", E2), Offering("medium", E4), Offering("large", E8)
OFFERINGS = (SMALL, MEDIUM, LARGE)
NONE = Resources(0, 0)


def karpenter(**config: float | str) -> Karpenter:
    return Karpenter(OFFERINGS, (), KarpenterConfig(**config))


def svc(name: str, cpu: int) -> Service:
    return Service(name, cpu, 256 * MIB, namespace="shop")


def node_with(cluster: SimCluster, offering: Offering, *cpus: int) -> SimNode:
    node = cluster.add_node(offering.node_type, -600, 0, offering.pool)
    for i, cpu in enumerate(cpus):
        pod = cluster.create_pod(svc(f"{node.name}-{i}", cpu), -600)
        cluster.bind(pod, node, -600)
    return node


def pending(cluster: SimCluster, *cpus: int) -> None:
    for i, cpu in enumerate(cpus):
        cluster.create_pod(svc(f"new-{i}", cpu), 0)


def test_a_claim_keeps_the_types_its_pods_fit_and_launches_the_cheapest() -> None:
    cluster = SimCluster()
    pending(cluster, 1500, 1500, 1500)
    (claim,), unfit = pack_claims(cluster.pending(), OFFERINGS, NONE, 0)
    assert claim.offerings == [LARGE] and not unfit  # 4500m: only e2-standard-8
    cluster = SimCluster()
    pending(cluster, 800, 1500, 1500)
    (claim,), _ = pack_claims(cluster.pending(), OFFERINGS, NONE, 0)
    assert claim.cheapest() == MEDIUM  # 3800m of 3920m
    cluster = SimCluster()
    pending(cluster, 9000)
    claims, unfit = pack_claims(cluster.pending(), OFFERINGS, NONE, 0)
    assert claims == [] and len(unfit) == 1


def test_daemonset_overhead_counts_against_every_type() -> None:
    cluster = SimCluster()
    pending(cluster, 1800)
    (claim,), _ = pack_claims(cluster.pending(), OFFERINGS, Resources(200, 0), 1)
    assert claim.cheapest() == MEDIUM  # 2000m no longer fits e2-standard-2's 1930m


def test_the_batch_closes_a_tick_after_the_last_pod_and_starting_nodes_are_used() -> None:
    cluster = SimCluster()
    k = karpenter()
    pending(cluster, 1500, 1500, 1500)
    k.step(cluster, cluster.pending(), 0)
    assert not cluster.nodes  # the batch is still open (1 s idle)
    k.step(cluster, cluster.pending(), 5)
    (node,) = cluster.nodes.values()
    assert node.type is E8 and node.pool == "large" and node.ready_at == 5 + 120
    k.step(cluster, cluster.pending(), 10)
    assert len(cluster.nodes) == 1  # the pods wait for the starting node


def test_a_full_pool_is_skipped_for_the_next_cheapest() -> None:
    cluster = SimCluster()
    k = Karpenter((replace(SMALL, max_nodes=0), MEDIUM, LARGE), ())
    pending(cluster, 500)
    k.step(cluster, cluster.pending(), 5)
    assert [n.type for n in cluster.nodes.values()] == [E4]


def test_the_default_budget_is_ten_percent_of_ready_nodes_rounded_up() -> None:
    cluster = SimCluster()
    k = karpenter()
    for _ in range(5):
        node_with(cluster, MEDIUM)
    assert k.budget(cluster, 0) == 1
    for _ in range(6):
        node_with(cluster, MEDIUM)
    assert k.budget(cluster, 0) == 2  # 11 nodes: 1.1, rounded up
    k.replacing[next(iter(cluster.nodes))] = "its-replacement"
    assert k.budget(cluster, 0) == 1
    cluster.add_node(E4, 0, 120, "medium")  # starting nodes do not count
    assert k.budget(cluster, 0) == 1


def test_single_node_deletion_when_a_pair_would_be_replaced_by_one_of_their_type() -> None:
    cluster = SimCluster()
    a = node_with(cluster, MEDIUM, 500)
    b = node_with(cluster, MEDIUM, 3000)
    k = karpenter()
    candidates = k.candidates(cluster, 0)
    assert [n.name for n in candidates] == [a.name, b.name]  # equal savings ratio: by name
    # both: 3500m needs an e2-standard-4, which is one of theirs: not cheaper than it
    assert k.evaluate(cluster, candidates, [], 0) is None
    # a alone: its 500m fits in b's 920m
    assert k.consolidation(cluster, candidates, [], 0) == Command((a.name,))


def test_multi_node_deletes_the_largest_prefix_whose_pods_fit_elsewhere() -> None:
    cluster = SimCluster()
    a, b, _ = (node_with(cluster, MEDIUM, 1200) for _ in range(3))
    k = karpenter()
    # a+b: 2400m fit in c's 2720m; a+b+c: 3600m need an e2-standard-4, one of their type
    command = k.consolidation(cluster, k.candidates(cluster, 0), [], 0)
    assert command == Command((a.name, b.name))


def test_multi_node_replaces_two_large_nodes_with_one_cheaper_medium() -> None:
    cluster = SimCluster()
    a = node_with(cluster, LARGE, 1000)
    b = node_with(cluster, LARGE, 1000)
    k = karpenter()
    command = k.consolidation(cluster, k.candidates(cluster, 0), [], 0)
    # 2000m: e2-standard-4 or -8; -8 is theirs, so only -4 (0.134 < 0.268) remains
    assert command == Command((a.name, b.name), MEDIUM)


def test_pending_pods_take_their_room_first() -> None:
    cluster = SimCluster()
    a = node_with(cluster, MEDIUM, 500)
    node_with(cluster, MEDIUM, 3000)
    pending(cluster, 900)
    k = karpenter()
    assert k.evaluate(cluster, [a], cluster.pending(), 0) == Command((a.name,), SMALL)


def test_the_budget_limits_candidates_to_single_node_consolidation() -> None:
    cluster = SimCluster()
    first, *_ = (node_with(cluster, MEDIUM, 500) for _ in range(5))
    k = karpenter()
    k.step(cluster, [], 0)  # budget 1: one candidate, so no multi-node
    assert k.pending_command == (15.0, Command((first.name,)))
    evicted = k.step(cluster, [], 10)
    assert evicted == [] and len(cluster.nodes) == 5  # not yet re-validated
    evicted = k.step(cluster, [], 20)
    assert len(evicted) == 1 and first.name not in cluster.nodes
    assert k.commands == {"single": 1}


def test_empty_nodes_go_first_and_at_once() -> None:
    cluster = SimCluster()
    for _ in range(10):
        node_with(cluster, MEDIUM, 3000)
    empty = [node_with(cluster, MEDIUM) for _ in range(3)]
    k = karpenter()
    k.step(cluster, [], 0)  # 13 nodes: budget 2
    assert sum(n.name in cluster.nodes for n in empty) == 1
    assert k.commands == {"empty": 1}


def test_consolidate_after_waits_for_the_nodes_pods_to_settle() -> None:
    cluster = SimCluster()
    node_with(cluster, MEDIUM, 500)
    node_with(cluster, MEDIUM, 3000)
    k = karpenter(consolidate_after=30.0)
    k.step(cluster, [], 0)
    assert k.candidates(cluster, 0) == []
    assert len(k.candidates(cluster, 30)) == 2
    assert len(karpenter().candidates(cluster, 0)) == 2  # the default, 0 s


def test_when_empty_deletes_an_empty_node_once_empty_for_consolidate_after() -> None:
    cluster = SimCluster()
    for _ in range(3):
        node_with(cluster, MEDIUM, 3000)
    empty = node_with(cluster, MEDIUM, 500)
    k = karpenter(consolidation_policy=WHEN_EMPTY, consolidate_after=60.0)
    k.step(cluster, [], 0)
    (pod,) = cluster.pods_on(empty)
    cluster.delete_pod(pod)
    k.step(cluster, [], 10)  # empty since 10 s
    k.step(cluster, [], 60)
    assert empty.name in cluster.nodes
    k.step(cluster, [], 70)
    assert empty.name not in cluster.nodes and k.commands == {"empty": 1}


def test_when_empty_leaves_underused_nodes_that_the_default_consolidates() -> None:
    def three_nodes() -> SimCluster:
        cluster = SimCluster()
        for _ in range(3):
            node_with(cluster, MEDIUM, 1200)
        return cluster

    cluster = three_nodes()
    k = karpenter(consolidation_policy=WHEN_EMPTY)
    for now in range(0, 100, 10):
        assert k.step(cluster, [], now) == []
    assert len(cluster.nodes) == 3 and k.pending_command is None and k.commands == {}
    default = karpenter()
    default.step(three_nodes(), [], 0)  # the same nodes: multi-node consolidation
    assert default.pending_command is not None


def test_a_pod_its_budget_protects_keeps_its_node() -> None:
    cluster = SimCluster()
    guarded = replace(svc("guarded", 500), pdb_max_unavailable=0)
    node = cluster.add_node(E4, -600, 0, "medium")
    cluster.bind(cluster.create_pod(guarded, -600), node, -600)
    node_with(cluster, MEDIUM, 3000)
    assert node not in karpenter().candidates(cluster, 0)


def test_a_replaced_node_goes_once_its_replacement_is_ready() -> None:
    cluster = SimCluster()
    a = node_with(cluster, LARGE, 1000)
    b = node_with(cluster, LARGE, 1000)
    k = karpenter(budget=1.0)  # both may go (the default lets one of two)
    k.step(cluster, [], 0)
    k.step(cluster, [], 10)
    assert not k.replacing
    k.step(cluster, [], 20)  # re-validated: launch an e2-standard-4, cordon a and b
    (new,) = [n for n in cluster.nodes.values() if n.type is E4]
    assert (
        a.unschedulable and b.unschedulable and k.replacing == {a.name: new.name, b.name: new.name}
    )
    assert k.step(cluster, [], 130) == []
    evicted = k.step(cluster, [], 140)
    assert len(evicted) == 2 and set(cluster.nodes) == {new.name}


def test_no_consolidation_while_a_pending_pod_waits_for_a_starting_node() -> None:
    cluster = SimCluster()
    a = node_with(cluster, MEDIUM, 500)
    node_with(cluster, MEDIUM, 3800)
    cluster.add_node(E4, 0, 120, "medium")
    pending(cluster, 1000)  # fits on neither ready node: it waits for the starting one
    assert karpenter().evaluate(cluster, [a], cluster.pending(), 0) is None


def test_the_strategy_takes_the_scenarios_node_pool_settings() -> None:
    scenario = Scenario(
        name="when-empty",
        title="when-empty",
        services=(),
        daemonsets=(),
        loads={},
        pools=(NodeGroup("general-2", E2),),
        duration=600,
        karpenter=KarpenterConfig(consolidation_policy=WHEN_EMPTY, consolidate_after=60.0),
    )
    config = KarpenterStrategy().autoscaler(scenario).config
    assert config == KarpenterConfig(
        provisioning_delay=scenario.autoscaler.provisioning_delay,
        consolidate_after=60.0,
        consolidation_policy=WHEN_EMPTY,
    )


def test_the_strategy_replaces_the_cluster_autoscaler_over_the_scenarios_pools() -> None:
    scenario = Scenario(
        name="pools",
        title="pools",
        services=(Service("web", 1500, 256 * MIB, replicas=3, namespace="shop"),),
        daemonsets=(),
        loads={},
        pools=(NodeGroup("general-2", E2), NodeGroup("general-8", E8)),
        duration=600,
        warmup=0,
    )
    strategy = KarpenterStrategy()
    sim = Simulation(scenario, 1, strategy)
    sim.advance(5 + 120 + 5)
    (node,) = sim.cluster_state.nodes.values()  # 4500m: one e2-standard-8, not three -2s
    assert node.type is E8 and node.pool == "general-8"
    assert node.labels["cloud.google.com/gke-nodepool"] == "general-8"
    assert not sim.cluster_state.pending() and strategy.tally().decisions == {"launched": 1}
