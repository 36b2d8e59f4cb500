"""Invariants over random clusters (hypothesis): whatever the analysis decides, its plan replays
cleanly under the independent checker (every fit rule at every step), never touches an unmovable
pod, never loses a replica, and never removes a node that still holds a non-DaemonSet pod; and
the snapshot's batched masks agree with the one-node predicates (static fit, resources and the
census) on every node for every pod, also after random moves and closed nodes.

The clusters have taints (NoSchedule, NoExecute), cordoned nodes, tolerations, nodeSelectors,
required node affinity, required pod anti-affinity and affinity on the hostname and on a zone
(on a workload's own pods and on another workload's), preferred pod affinity, hard and soft
topology spread (hostname and zone, minDomains, both node inclusion policies), host ports, a
GPU extended resource, volumes reachable from one zone, and PodDisruptionBudgets, some of them
exhausted."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from types import MappingProxyType

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from testkit.builders import cluster, node, pod
from tuner.analyse.context import Context
from tuner.analyse.decision import analyse
from tuner.analyse.options import Choice
from tuner.analyse.replace import ReplaceNodes
from tuner.model import constraints as rules
from tuner.model import scheduling
from tuner.model.census import Census
from tuner.model.cluster import Cluster, Node, Pdb, Pod
from tuner.model.execution import execution_of
from tuner.model.movability import Policy, assess
from tuner.model.pools import discover
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot
from tuner.plan.actions import Add, Migrate, ProvisionNode, Remove, RemoveNode
from tuner.plan.planner import plan
from tuner.plan.replay import replay
from tuner.settings import Analyse, PoolSettings, PoolTemplate, Pricing, Settings

KINDS = ["Deployment", "Deployment", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"]
SHAPES = [("2", "4Gi"), ("4", "8Gi"), ("4", "16Gi")]
POOLS = ["a", "b"]
ZONES = ["x", "y", "z"]
GPU = "nvidia.com/gpu"


def _node(rng: random.Random, i: int) -> Node:
    pool = rng.choice(POOLS)
    taints = (
        (rules.Taint("dedicated", pool, rng.choice(["NoSchedule", "NoExecute"])),)
        if rng.random() < 0.3
        else ()
    )
    made = node(
        f"n{i}",
        *rng.choice(SHAPES),
        labels={"pool": pool, "zone": rng.choice(ZONES)},
        taints=taints,
        unschedulable=rng.random() < 0.1,
        max_pods=rng.choice([110, 110, 6]),
    )
    gpus = rng.choice([0, 0, 1, 2])
    return replace(made, extended=MappingProxyType({GPU: gpus} if gpus else {}))


def _term(rng: random.Random, app: str) -> rules.PodAffinityTerm:
    key = rng.choice([rules.HOSTNAME_KEY, "zone"])
    return rules.PodAffinityTerm(rules.LabelSelector((("app", app),)), ("default",), key)


def _spread(rng: random.Random, w: int) -> rules.SpreadConstraint:
    hard = rng.random() < 0.6
    return rules.SpreadConstraint(
        max_skew=rng.choice([1, 1, 2]),
        topology_key=rng.choice([rules.HOSTNAME_KEY, "zone"]),
        selector=rules.LabelSelector((("app", f"w{w}"),)),
        hard=hard,
        min_domains=rng.choice([1, 1, 2, 4]) if hard else 1,
        honor_node_affinity=rng.random() < 0.8,
        honor_taints=rng.random() < 0.3,
    )


def _constraints(rng: random.Random, kind: str, w: int) -> rules.Constraints:
    if kind == "DaemonSet":
        return rules.Constraints(tolerations=(rules.Toleration(operator="Exists"),))
    tolerations = (rules.Toleration("dedicated", "Exists"),) if rng.random() < 0.4 else ()
    selector = (("pool", rng.choice(POOLS)),) if rng.random() < 0.3 else ()
    affinity = ((rules.Requirement("zone", "In", ("x", "y")),),) if rng.random() < 0.3 else ()
    repelled = [f"w{w}"] if rng.random() < 0.3 else []
    if w and rng.random() < 0.15:
        repelled.append(f"w{rng.randrange(w)}")
    attracted = [f"w{rng.randrange(w + 1)}"] if rng.random() < 0.12 else []
    preferred = tuple(
        rules.PreferredTerm(rng.randint(1, 100), _term(rng, f"w{rng.randrange(w + 1)}"))
        for _ in range(rng.choice([0, 0, 0, 1, 2]))
    )
    ports = (
        (rules.HostPort(8080 + rng.randrange(2), rng.choice(["TCP", "UDP"]), rng.choice(IPS)),)
        if rng.random() < 0.15
        else ()
    )
    volume = rules.VolumeAffinity(
        f"PersistentVolume pv-w{w}",
        ((rules.Requirement("zone", "In", (rng.choice(ZONES),)),),),
    )
    return rules.Constraints(
        tolerations,
        selector,
        affinity,
        tuple(_term(rng, app) for app in repelled),
        affinity=tuple(_term(rng, app) for app in attracted),
        preferred=preferred,
        spread=tuple(_spread(rng, w) for _ in range(rng.choice([0, 0, 1, 1, 2]))),
        host_ports=ports,
        volumes=(volume,) if rng.random() < 0.1 else (),
        extended=((GPU, 1),) if rng.random() < 0.15 else (),
    )


IPS = [rules.ANY_IP, "10.0.0.1", "10.0.0.2"]


def move_in_both(
    snapshot: Snapshot,
    census: Census,
    where: dict[str, str],
    pod: Pod,
    targets: list[str],
    rng: random.Random,
) -> None:
    """Move ``pod`` to one of ``targets`` (if any) in the snapshot and the census alike."""
    if targets:
        source, target = where[pod.key], rng.choice(targets)
        snapshot.move(pod, source, target)
        census.remove(source, pod)
        census.add(target, pod)
        where[pod.key] = target


def fits_alone(pod: Pod, n: Node, census: Census) -> bool:
    """One node's answer by the one-node rules: static fit, resources and pod slots, extended
    resources, and the census (soft spread held as close as it was); ``pod`` is off its node."""
    residents = census.residents[n.name]
    free = n.allocatable - Resources.total([p.requests for p in residents])  # type: ignore[attr-defined]

    def free_extended(name: str) -> int:
        used = sum(dict(p.constraints.extended).get(name, 0) for p in residents)  # type: ignore[attr-defined]
        return n.extended.get(name, 0) - used

    return (
        scheduling.static_fit(pod.constraints, n) is None
        and scheduling.resource_fit(pod.requests, free, n.max_pods - len(residents)) is None
        and scheduling.extended_fit(pod.constraints, free_extended) is None
        and census.why_not(pod, n.name, soft=True) is None
    )


def admits(target: Node, candidate: Pod, census: Census) -> bool:
    """The test's own placement check: a running pod may sit on a cordoned node, otherwise
    every hard rule holds (the model's predicates, so generated clusters start valid)."""
    residents = census.residents[target.name]
    free = target.allocatable - Resources.total([p.requests for p in residents])  # type: ignore[attr-defined]
    return (
        scheduling.static_fit(candidate.constraints, replace(target, unschedulable=False)) is None
        and scheduling.resource_fit(candidate.requests, free, target.max_pods - len(residents))
        is None
        and census.why_not(candidate, target.name) is None
    )


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    """A random cluster whose pods were placed by every fit rule (cordon aside)."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    nodes = [_node(rng, i) for i in range(draw(st.integers(1, 7)))]
    census = Census({n.name: n for n in nodes}, {})
    pdbs = []
    for w in range(draw(st.integers(1, 6))):
        kind = rng.choice(KINDS)
        cpu, mem = rng.choice([100, 250, 500, 1000]), rng.choice([128, 512, 1024, 2048])
        annotations = (
            {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
            if rng.random() < 0.1
            else {}
        )
        like = pod(f"w{w}-0", None, f"{cpu}m", f"{mem}Mi", kind=kind, annotations=annotations)
        like = replace(like, constraints=_constraints(rng, kind, w))
        if kind != "DaemonSet" and rng.random() < 0.3:
            selector = rules.LabelSelector((("app", f"w{w}"),))
            pdbs.append(Pdb("default", f"w{w}-pdb", selector, rng.randint(0, 2)))
        targets = (
            list(nodes)
            if kind == "DaemonSet"
            else [rng.choice(nodes) for _ in range(rng.randint(1, 8))]
        )
        for i, target in enumerate(targets):
            candidate = replace(like, name=f"w{w}-{i}", node=target.name)
            if admits(target, candidate, census):
                census.add(target.name, candidate)
    pods = [p for n in nodes for p in census.residents[n.name]]
    return cluster(nodes, pods, tuple(pdbs))  # type: ignore[arg-type]


def check_plan_invariants(c: Cluster, actions: tuple, movable_keys: set[str]) -> None:  # type: ignore[type-arg]
    final = replay(c, actions)  # raises on overcommit or on removing a node with pods left
    for action in actions:
        if isinstance(action, Migrate | Remove):
            assert action.pod.key in movable_keys, f"touched unmovable {action.pod.key}"
        if isinstance(action, RemoveNode):
            assert all(p.follows_node for p in final.residents[action.node].values())
    for name in final.removed:
        assert all(p.follows_node for p in final.residents[name].values())


def replica_counts(c: Cluster) -> Counter[str]:
    return Counter(str(p.workload) for p in c.pods if not p.follows_node)


def counts_after(c: Cluster, actions: tuple) -> Counter[str]:  # type: ignore[type-arg]
    counts = replica_counts(c)
    for action in actions:
        if isinstance(action, Add):
            counts[str(action.workload)] += 1
        elif isinstance(action, Remove):
            counts[str(action.pod.workload)] -= 1
    return +counts


def _settings(parallel: int, chance: float) -> Settings:
    return Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.1),
        analyse=Analyse(
            max_parallel_removals=parallel, migration_chance=chance, excluded_namespaces=frozenset()
        ),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(1, 4), st.floats(0, 1), st.integers(0, 1000))
def test_removal_and_exploration_plans_are_safe_and_keep_replicas(
    c: Cluster, parallel: int, chance: float, seed: int
) -> None:
    s = _settings(parallel, chance)
    result = analyse(c, s, [], random.Random(seed))
    actions = plan(c, result.change)
    movable = {p.key for p in c.pods if result.movability.movable(p)}
    check_plan_invariants(c, actions, movable)
    assert counts_after(c, actions) == replica_counts(c)
    if result.decision is Choice.REMOVE_NODES:
        assert result.cost_after < result.cost_current


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**32))
def test_previous_deployment_plans_are_safe_and_reach_the_recorded_counts(
    c: Cluster, seed: int
) -> None:
    """Record a reshuffled (cheaper, fewer nodes) variant of the cluster, then return to it."""
    rng = random.Random(seed)
    kept = [n for n in c.nodes if rng.random() < 0.7] or [c.nodes[0]]
    census = Census({n.name: n for n in kept}, {})
    for p in c.pods:
        if p.follows_node:
            if p.node in census.residents:
                census.add(p.node, p)
            continue
        options = [n for n in kept if admits(n, p, census)]
        if options:
            target = rng.choice(options).name
            census.add(target, replace(p, node=target))
    moved: list[Pod] = [p for n in kept for p in census.residents[n.name]]  # type: ignore[misc]
    then = cluster(kept, moved, c.pdbs)
    s = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.1),
        analyse=Analyse(remove_nodes=False, excluded_namespaces=frozenset()),
    )
    history = [execution_of(then, assess(then, Policy(frozenset())), s.pricing, 100, 0, 1)]
    result = analyse(c, s, history, random.Random(seed))
    actions = plan(c, result.change)
    movable = {p.key for p in c.pods if result.movability.movable(p)}
    check_plan_invariants(c, actions, movable)
    if result.decision is Choice.PREVIOUS:
        assert counts_after(c, actions) == replica_counts(then)
        assert result.cost_after < result.cost_current
    else:
        assert counts_after(c, actions) == replica_counts(c)


def _pool_settings(big_max: int) -> Settings:
    """Pools ``a`` and ``b`` (the nodes' ``pool`` label, at least one node each) and ``big``,
    8-core nodes cheaper per core than the others, that may grow by ``big_max``."""
    template = PoolTemplate("big-8", 8000, 32 * 2**30, 110, (("pool", "big"),))
    return Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.1, node_types={"big-8": 5.0}),
        analyse=Analyse(max_replaced_nodes=4, excluded_namespaces=frozenset()),
        pools={
            "a": PoolSettings(1, None, (("pool", "a"),)),
            "b": PoolSettings(1, None, (("pool", "b"),)),
            "big": PoolSettings(0, big_max, (("pool", "big"),), template),
        },
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 3), st.integers(0, 2**32))
def test_replace_plans_are_safe_cheaper_and_respect_pools_and_unsettled_nodes(
    c: Cluster, big_max: int, seed: int
) -> None:
    rng = random.Random(seed)
    unsettled = frozenset(n.name for n in c.nodes if rng.random() < 0.2)
    s = _pool_settings(big_max)
    movability = assess(c, Policy(frozenset(), unsettled_nodes=unsettled))
    pools = discover(c, s)
    context = Context.of(c, s, movability, pools=pools)
    current = context.current
    proposal = ReplaceNodes().propose(context)
    actions = plan(c, proposal.change)
    check_plan_invariants(c, actions, {p.key for p in c.pods if movability.movable(p)})
    assert counts_after(c, actions) == replica_counts(c)
    event(f"replace possible: {proposal.possible}")
    if not proposal.possible:
        assert actions == ()
        return
    assert proposal.cost_after < current
    provisions = [a for a in actions if isinstance(a, ProvisionNode)]
    assert provisions and actions[: len(provisions)] == tuple(provisions)
    grown = Counter(a.pool.name for a in provisions)
    assert grown["big"] <= big_max and set(grown) <= set(pools.by_name)
    drained = proposal.change.remove_nodes
    assert len(drained) <= s.analyse.max_replaced_nodes and not unsettled & set(drained)
    for name in ("a", "b"):
        left = pools.size(name) - sum(pools.node_pool.get(n) == name for n in drained)
        assert left >= min(pools.size(name), 1)
    for action in actions:
        if isinstance(action, Migrate | Add):
            assert action.target not in unsettled


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**32))
def test_the_snapshots_masks_agree_with_the_one_node_rules(c: Cluster, seed: int) -> None:
    """After random closes and moves (each kept by both), every pod's batched mask, and its
    one-node answers, equal static fit, resources and the census, node by node; a placed pod
    is asked as leaving its node."""
    rng = random.Random(seed)
    snapshot = Snapshot(c)
    known = lambda: c.label_counts  # noqa: E731 - counts as the census began, moves replayed
    census = Census(c.node_by_name, c.pods_by_node, known if seed % 2 else None)  # type: ignore[arg-type]
    where = {p.key: p.node or "" for p in c.pods}
    for n in c.nodes:
        if rng.random() < 0.2:
            snapshot.close(n.name)
            census.cordon(n.name)
    movers = [p for p in c.pods if not p.follows_node]
    for _ in range(rng.randint(0, 6)):
        if not movers:
            break
        pod = rng.choice(movers)
        source = where[pod.key]
        targets = [
            n for n in snapshot.names_of(snapshot.fit_mask(pod, leaving=source)) if n != source
        ]
        move_in_both(snapshot, census, where, pod, targets, rng)
    for pod in c.pods:
        source = where[pod.key]
        mask = snapshot.fit_mask(pod, leaving=source)
        census.remove(source, pod)
        for i, n in enumerate(c.nodes):
            expected = snapshot.is_open(n.name) and fits_alone(pod, n, census)
            event(f"fits: {expected}")
            assert bool(mask[i]) == expected, (
                pod.key,
                n.name,
                census.why_not(pod, n.name, soft=True),
            )
            assert (snapshot.why_not(pod, n.name, leaving=source) is None) == expected
        census.add(source, pod)
