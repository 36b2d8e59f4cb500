"""A re-implementation of the 2019 thesis' tuner's decisions (thesis §3.2, §4.4; its code in
``Gezzellig/DynamicTopologySelection``, ``SmartKubernetesSchedular/moderator.py`` and
``empty_node.py``, read for the logic only).

- Window 240 s, retried every 24 s (``settings-phase3.json``).
- Node removal, one node at a time: among the nodes without StatefulSet pods, the one with the
  fewest non-DaemonSet pods (first by name on ties) is the only one tried; its pods are
  re-placed on the other nodes checking **CPU only**, against the node's CPU *capacity*
  (requests of all pods, DaemonSets included). The thesis enumerated every distribution by DFS
  and kept the lowest maximum node CPU; this keeps the same objective with a worst-fit
  decreasing placement (each pod to the node left least requested), which is exact for the
  identical pods of its benchmark. Pods of every namespace are moved (kube-system too).
- Previous deployment: the knowledge base queried within ``load * (1 +- 0.1)``, cheapest first,
  nodes matched by content (the same maximum-score assignment as ``tuner.analyse.previous``,
  which that module computes exactly instead of by recursion).
- Algorithm 1: removal if ``cost_removal <= cost_previous``; else stay if
  ``cost_current <= cost_previous`` -- with probability 0.5 one random migration: up to 1000
  draws of (source node, destination node, pod) until a movable pod fits the destination under
  95 % of its CPU capacity; else the previous deployment (removed from the knowledge base).
  With no removal and no previous deployment it stays.
- Execution: migrations through the preferred-affinity label, each verified, the transition
  stopped at the first pod that lands elsewhere; node removal with ``kubectl drain`` and
  ``kubectl delete node``, which deletes the Node object but not the VM: the kubelet registers
  it again and the Cluster Autoscaler removes it later (the thesis' "node reappearing").
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace

from knowledge.memory import MemoryKnowledge
from tuner.analyse.previous import find_previous
from tuner.model.cluster import Cluster, Pod
from tuner.model.execution import execution_of
from tuner.model.movability import Movability, Policy, assess
from tuner.model.price import node_price, nodes_cost
from tuner.plan.actions import Action, Migrate, RemoveNode
from tuner.plan.planner import plan
from tuner.plan.replay import InfeasiblePlan
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.pools import pricing
from tuner.sim.strategies.windowed import WindowedTuner
from tuner.sim.window_tracking import WindowSummary

MEASURE_WINDOW = 240.0
RETRY_WINDOW = 24.0
MIGRATION_CHANCE = 0.5
LOAD_DELTA = 0.1
RANDOM_TRIES = 1000
RANDOM_FILL = 0.95


def removal_2019(cluster: Cluster, movability: Movability) -> tuple[str, list[Migrate]] | None:
    """The one node the 2019 tuner would try to empty, and where its pods go; None if not."""
    removable = [
        n
        for n in cluster.nodes
        if not any(
            p.owner_kind == "StatefulSet" or not (p.follows_node or movability.movable(p))
            for p in cluster.pods_by_node[n.name]
        )
    ]
    if not removable:
        return None

    def moving(name: str) -> list[Pod]:
        return [p for p in cluster.pods_by_node[name] if not p.follows_node]

    node = min(removable, key=lambda n: (len(moving(n.name)), n.name))
    others = [n for n in cluster.nodes if n.name != node.name]
    requested = {n.name: cluster.requested(n.name).cpu for n in others}
    moves: list[Migrate] = []
    for pod in sorted(moving(node.name), key=lambda p: (-p.requests.cpu, p.name)):
        fitting = [n for n in others if requested[n.name] + pod.requests.cpu <= n.capacity.cpu]
        if not fitting:
            return None
        target = min(fitting, key=lambda n: (requested[n.name] + pod.requests.cpu, n.name))
        requested[target.name] += pod.requests.cpu
        moves.append(Migrate(pod, target.name))
    return node.name, moves


def random_migration_2019(
    cluster: Cluster, movability: Movability, rng: random.Random
) -> Migrate | None:
    """Up to 1000 random (source, destination, pod) draws, as the 2019 moderator did."""
    nodes = list(cluster.nodes)
    if len(nodes) < 2:
        return None
    requested = {n.name: cluster.requested(n.name).cpu for n in nodes}
    for _ in range(RANDOM_TRIES):
        source, destination = rng.choice(nodes), rng.choice(nodes)
        if source is destination:
            continue
        pods = cluster.pods_by_node[source.name]
        if not pods:
            continue
        pod = rng.choice(pods)
        if pod.follows_node or pod.owner_kind == "StatefulSet" or not movability.movable(pod):
            continue
        if requested[destination.name] + pod.requests.cpu < destination.capacity.cpu * RANDOM_FILL:
            return Migrate(pod, destination.name)
    return None


class Tuner2019(WindowedTuner):
    """The 2019 tuner's loop and decisions over the simulated cluster."""

    name = "tuner2019"
    on_target_only = True

    def __init__(self, scenario: Scenario, seed: int) -> None:
        super().__init__(MEASURE_WINDOW, RETRY_WINDOW, "delete-node")
        self.pricing = pricing(scenario.pools)
        self.rng = random.Random(seed)
        self.knowledge = MemoryKnowledge()

    def decide(self, sim: Simulation, window: WindowSummary) -> Sequence[Action]:
        """Algorithm 1 with the 2019 removal and random migration."""
        cluster = sim.cluster()
        movability = assess(cluster, Policy(frozenset(), deletion_candidates=False))
        self.knowledge.record(
            execution_of(cluster, movability, self.pricing, window.load, window.start, window.end)
        )
        current = nodes_cost(cluster.nodes, self.pricing)
        removal = removal_2019(cluster, movability)
        cost_removal = (
            current - node_price(cluster.node_by_name[removal[0]], self.pricing)
            if removal
            else math.inf
        )
        history = self.knowledge.find_by_load(window.load, LOAD_DELTA)
        # the 2019 tuner did not know about HPAs: it added and removed their pods too
        unaware = replace(cluster, hpas=())
        previous = find_previous(unaware, movability, self.pricing, history, current)
        for execution_id, _ in previous.unattainable:
            self.knowledge.delete(execution_id)
        if removal is not None and cost_removal <= previous.cost:
            self.decisions["remove_nodes"] += 1
            name, moves = removal
            return (*moves, RemoveNode(name))
        if current <= previous.cost or previous.change is None or previous.execution is None:
            if self.rng.random() <= MIGRATION_CHANCE:
                move = random_migration_2019(cluster, movability, self.rng)
                if move is not None:
                    self.decisions["random_migration"] += 1
                    return (move,)
            self.decisions["stay"] += 1
            return ()
        self.decisions["previous_deployment"] += 1
        self.knowledge.delete(previous.execution.id)
        try:
            return plan(cluster, previous.change)
        except InfeasiblePlan:
            return ()
