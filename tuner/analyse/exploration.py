"""Exploration (thesis FR08): one random migration, so the tuner does not stay in a local minimum.

The pair (movable pod, destination with room) is drawn uniformly among *all* feasible pairs:
pods that share constraints, requests, labels and node share their feasible destinations, so
each group is weighted by (pods x destinations) and one pair is drawn within the group.
"""

from __future__ import annotations

import random
from collections import defaultdict

from tuner.analyse.context import Context
from tuner.analyse.options import Choice, Proposal, Refusal
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Pod


def random_migration(context: Context, rng: random.Random) -> Relocation | None:
    """A uniformly drawn feasible migration, or None when no pod can move anywhere."""
    cluster, snapshot = context.cluster, context.snapshot
    groups: dict[tuple[object, ...], list[Pod]] = defaultdict(list)
    for pod in cluster.pods:
        if pod.node is not None and context.movability.movable(pod):
            key = (
                pod.constraints,
                pod.requests,
                pod.namespace,
                tuple(pod.labels.items()),
                pod.node,
            )
            groups[key].append(pod)
    options: list[tuple[list[Pod], list[str]]] = []
    weights: list[int] = []
    with snapshot.forked():
        for name in sorted(context.protected):
            snapshot.close(name, removed=False)
        for pods in groups.values():
            source = pods[0].node or ""
            destinations = [
                n
                for n in snapshot.names_of(snapshot.fit_mask(pods[0], leaving=source))
                if n != source
            ]
            if destinations:
                options.append((pods, destinations))
                weights.append(len(pods) * len(destinations))
    if not options:
        return None
    pods, destinations = rng.choices(options, weights=weights)[0]
    pod = rng.choice(pods)
    return Relocation(pod, destinations[rng.randrange(len(destinations))])


class Exploration:
    """The exploration option: one random migration, weighed only when the decision stays."""

    name = Choice.RANDOM
    announce = ""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def propose(self, context: Context) -> Proposal:
        """One random migration (the cost stays what it is), or its refusal."""
        move = random_migration(context, self.rng)
        if move is None:
            return Proposal.refused(self.name, Refusal.NO_MOVE, Refusal.NO_MOVE.value)
        reason = f"random migration of {move.pod.key} to {move.node}"
        return Proposal(self.name, context.current, DesiredChange(relocations=(move,)), reason)

    def wins_tie(self, mine: Proposal, incumbent: Proposal) -> bool:
        """It keeps the cost: it replaces staying, nothing else."""
        return incumbent.option is Choice.STAY
