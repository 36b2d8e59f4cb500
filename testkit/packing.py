"""The node-removal heuristic against exact MILP answers on small random clusters
(shared by ``bench.packing_quality`` and its unit test)."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

from testkit.builders import cluster, node, pod
from testkit.exact import can_drain, cheapest_nodes
from tuner.analyse.removal import CandidateTimers, find_removal
from tuner.model.cluster import Cluster
from tuner.model.constraints import Constraints, Taint, Toleration
from tuner.model.movability import Policy, assess
from tuner.model.price import nodes_cost
from tuner.settings import Analyse, Pricing, Settings

SHAPES = [("2", "4Gi"), ("4", "8Gi"), ("4", "16Gi"), ("8", "32Gi")]


PRICING = Pricing(price_per_core=0.03, price_per_gb=0.004)


TOLERATE_GPU = Constraints(tolerations=(Toleration("gpu", "Exists", "", "NoSchedule"),))


def small_cluster(seed: int) -> Cluster:
    """A random small cluster, pods placed without overcommitting (no anti-affinity)."""
    rng = random.Random(seed)
    nodes = []
    for i in range(rng.randint(3, 8)):
        cpu, mem = rng.choice(SHAPES)
        taints = (Taint("gpu", "true", "NoSchedule"),) if rng.random() < 0.15 else ()
        labels = {"pool": rng.choice(["a", "b"])}
        nodes.append(node(f"n{i}", cpu, mem, taints=taints, labels=labels))
    free = {n.name: [n.allocatable.cpu, n.allocatable.memory] for n in nodes}
    pods = []
    for w in range(rng.randint(2, 7)):
        kind = rng.choice(["Deployment"] * 5 + ["StatefulSet", "DaemonSet"])
        cpu = rng.choice([100, 200, 250, 500, 750, 1000, 1500])
        mem = rng.choice([128, 256, 512, 1024, 2048, 3072])
        constraints = TOLERATE_GPU if rng.random() < 0.2 else Constraints()
        if rng.random() < 0.15:
            constraints = Constraints(constraints.tolerations, (("pool", rng.choice(["a", "b"])),))
        hosts = [n for n in nodes if not n.taints or constraints.tolerations]
        hosts = [
            n for n in hosts if all(n.labels.get(k) == v for k, v in constraints.node_selector)
        ]
        if not hosts:
            continue
        targets = (
            hosts if kind == "DaemonSet" else [rng.choice(hosts) for _ in range(rng.randint(1, 8))]
        )
        for i, target in enumerate(targets):
            room = free[target.name]
            if room[0] >= cpu and room[1] >= mem * 2**20:
                room[0] -= cpu
                room[1] -= mem * 2**20
                pods.append(
                    pod(
                        f"w{w}-{i}",
                        target.name,
                        f"{cpu}m",
                        f"{mem}Mi",
                        kind=kind,
                        workload=f"w{w}",
                        constraints=constraints,
                    )
                )
    return cluster(nodes, pods)


@dataclass(frozen=True)
class Comparison:
    """One instance: per-node agreement counts and the cost figures."""

    nodes: int
    agree: int
    missed: int
    """Nodes the exact method can drain but the heuristic cannot."""
    wrong: int
    """Nodes the heuristic claims to drain but the exact method cannot (must be 0)."""
    cost_now: float
    cost_heuristic: float
    cost_exact: float


def compare(seed: int, make_room: bool = True) -> Comparison:
    """Compare heuristic and exact answers on one random cluster (the heuristic with or
    without ``analyse.make_room``)."""
    c = small_cluster(seed)
    policy = Policy(frozenset())
    movability = assess(c, policy)
    one = Settings(
        pricing=PRICING, analyse=Analyse(excluded_namespaces=frozenset(), make_room=make_room)
    )
    agree = missed = wrong = 0
    for n in c.nodes:
        only = CandidateTimers(((n.name, 0.0),))  # only this node is past its delay
        heuristic = find_removal(c, one, movability, only, now=1e9).removal is not None
        exact = n.name not in movability.node_reasons and can_drain(c, movability, n.name)
        agree += heuristic == exact
        missed += exact and not heuristic
        wrong += heuristic and not exact
    many = Settings(
        pricing=PRICING,
        analyse=Analyse(
            max_parallel_removals=len(c.nodes),
            excluded_namespaces=frozenset(),
            make_room=make_room,
        ),
    )
    removal = find_removal(c, many, movability).removal
    now = nodes_cost(c.nodes, PRICING)
    after = now - (removal.saving if removal else 0.0)
    return Comparison(
        len(c.nodes), agree, missed, wrong, now, after, cheapest_nodes(c, movability, PRICING)
    )


def summarise(results: list[Comparison]) -> dict[str, float]:
    """Aggregate figures over instances."""
    nodes = sum(r.nodes for r in results)
    gaps = [(r.cost_heuristic - r.cost_exact) / r.cost_exact for r in results if r.cost_exact > 0]
    saved_share = [
        (r.cost_now - r.cost_heuristic) / (r.cost_now - r.cost_exact)
        for r in results
        if r.cost_now > r.cost_exact
    ]
    return {
        "instances": len(results),
        "drain_agreement": sum(r.agree for r in results) / nodes,
        "drains_missed": sum(r.missed for r in results),
        "drains_wrong": sum(r.wrong for r in results),
        "mean_cost_gap": statistics.mean(gaps),
        "max_cost_gap": max(gaps),
        "optimal_instances": sum(g < 1e-9 for g in gaps) / len(gaps),
        "share_of_possible_saving": statistics.mean(saved_share) if saved_share else 1.0,
    }
