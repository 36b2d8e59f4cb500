"""The exploration option: one random migration when staying
(:func:`tuner.analyse.exploration.random_migration`), so the tuner leaves local minima."""

from __future__ import annotations

import random

from tuner.analyse.exploration import random_migration
from tuner.analyse.options import Option, Proposal
from tuner.model.change import DesiredChange
from tuner.model.cluster import Cluster
from tuner.model.movability import Movability
from tuner.settings import Usability

EXPLORATION = Option(
    "random_migration", "random migration", "none", "cost_exploration", "RandomMigration"
)


def propose_exploration(
    cluster: Cluster,
    movability: Movability,
    usability: Usability,
    rng: random.Random,
    current: float,
) -> Proposal | None:
    """One random migration (the cost stays ``current``), or None when no pod can move."""
    move = random_migration(cluster, movability, usability, rng)
    if move is None:
        return None
    reason = f"random migration of {move.pod.key} to {move.node}"
    return Proposal(EXPLORATION, current, DesiredChange(relocations=(move,)), reason)
