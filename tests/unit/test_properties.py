"""Invariants over random clusters (hypothesis): whatever the analysis decides, its plan never
overcommits a node at any step, never touches an unmovable pod, never loses a replica, and never
removes a node that still holds a non-DaemonSet pod."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.builders import cluster, node, pod
from tuner.analyse.decision import Choice, analyse
from tuner.model.cluster import Cluster
from tuner.model.execution import execution_of
from tuner.model.movability import Policy, assess
from tuner.plan.actions import Add, Migrate, Remove, RemoveNode
from tuner.plan.planner import plan
from tuner.plan.replay import replay
from tuner.settings import Analyse, Pricing, Settings

KINDS = ["Deployment", "Deployment", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"]
SHAPES = [("2", "4Gi"), ("4", "8Gi"), ("4", "16Gi")]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    """A random cluster whose pods were placed without overcommitting any node."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    nodes = [node(f"n{i}", *rng.choice(SHAPES)) for i in range(draw(st.integers(1, 7)))]
    free = {n.name: [n.allocatable.cpu, n.allocatable.memory] for n in nodes}
    pods = []
    for w in range(draw(st.integers(1, 6))):
        kind = rng.choice(KINDS)
        cpu, mem = rng.choice([100, 250, 500, 1000]), rng.choice([128, 512, 1024, 2048])
        annotations = (
            {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
            if rng.random() < 0.1
            else {}
        )
        targets = (
            [n.name for n in nodes]
            if kind == "DaemonSet"
            else [rng.choice(nodes).name for _ in range(rng.randint(1, 8))]
        )
        for i, target in enumerate(targets):
            if free[target][0] >= cpu and free[target][1] >= mem * 2**20:
                free[target][0] -= cpu
                free[target][1] -= mem * 2**20
                pods.append(
                    pod(
                        f"w{w}-{i}",
                        target,
                        f"{cpu}m",
                        f"{mem}Mi",
                        kind=kind,
                        workload=f"w{w}",
                        annotations=annotations,
                    )
                )
    return cluster(nodes, pods)


def check_plan_invariants(c: Cluster, actions: tuple, movable_keys: set[str]) -> None:  # type: ignore[type-arg]
    final = replay(c, actions)  # raises on overcommit or on removing a node with pods left
    for action in actions:
        if isinstance(action, Migrate | Remove):
            assert action.pod.key in movable_keys, f"touched unmovable {action.pod.key}"
        if isinstance(action, RemoveNode):
            assert final.pods[action.node] <= final.fixed[action.node]
    for name in final.removed:
        assert final.pods[name] <= final.fixed[name]


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
    free = {n.name: [n.allocatable.cpu, n.allocatable.memory, n.max_pods] for n in kept}
    moved = []
    for p in c.pods:
        if p.follows_node:
            if p.node in free:
                moved.append(p)
                free[p.node][0] -= p.requests.cpu
                free[p.node][1] -= p.requests.memory
            continue
        options = [
            n for n, f in free.items() if f[0] >= p.requests.cpu and f[1] >= p.requests.memory
        ]
        if options:
            target = rng.choice(options)
            free[target][0] -= p.requests.cpu
            free[target][1] -= p.requests.memory
            moved.append(
                pod(
                    p.name,
                    target,
                    f"{p.requests.cpu}m",
                    f"{p.requests.memory}",
                    kind=p.owner_kind,
                    workload=p.workload.name,
                    annotations=dict(p.annotations),
                )
            )
    then = cluster(kept, moved)
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
