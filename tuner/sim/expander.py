"""The Cluster Autoscaler's expanders: which node pool a scale-up grows.

Each scale-up, the autoscaler estimates per pool how many of its template nodes the pending pods
need (a :class:`ScaleUpOption`) and lets the ``--expander`` pick one option; only that pool grows.
Modelled from the Cluster Autoscaler's expander documentation (``cluster-autoscaler/FAQ.md``,
"What are Expanders?") and its ``expander/`` sources (numbers and rules only):

- ``random`` (the default): any option, uniformly.
- ``least-waste``: the option that leaves the least idle CPU, then memory, on its new nodes:
  score = (allocatable CPU - requested CPU) / allocatable CPU + the same for memory, over the new
  nodes; the lowest score wins, ties at random (``expander/waste``).
- ``price``: the option whose new nodes cost least per unit of the pods' requests priced with the
  GCE price model's per-resource rates (0.033174 USD per core-hour, 0.004446 USD per GB-hour,
  ``cloudprovider/gce/gce_price_model.go``); ties at random. Not modelled: its penalty for node
  shapes far from a "preferred" size for the cluster (``expander/price``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.model.quantity import GIB
from tuner.model.resources import Resources
from tuner.sim.pools import NodeGroup


@dataclass(frozen=True, slots=True)
class ScaleUpOption:
    """Growing ``pool`` by ``nodes`` nodes would schedule pods requesting ``requests`` in all."""

    pool: NodeGroup
    nodes: int
    pods: int
    requests: Resources
    room: Resources
    """What one new node offers pods: allocatable minus its DaemonSet pods."""


CPU_PRICE_PER_HOUR = 0.033174
"""Per core-hour: the Cluster Autoscaler's GCE price model, also its pod price."""
MEMORY_PRICE_PER_GB_HOUR = 0.004446


def waste(option: ScaleUpOption) -> float:
    """Idle share of CPU plus idle share of memory on the option's new nodes."""
    cpu = option.room.cpu * option.nodes
    memory = option.room.memory * option.nodes
    return (cpu - option.requests.cpu) / cpu + (memory - option.requests.memory) / memory


def price_per_request(option: ScaleUpOption) -> float:
    """The new nodes' price per hour over the price of the pods' requests."""
    pods = (
        option.requests.cpu / 1000 * CPU_PRICE_PER_HOUR
        + option.requests.memory / GIB * MEMORY_PRICE_PER_GB_HOUR
    )
    return option.nodes * option.pool.node_type.price / max(pods, 1e-9)


def choose(expander: str, options: Sequence[ScaleUpOption], rng: random.Random) -> ScaleUpOption:
    """The option the expander picks (``options`` is not empty)."""
    if expander == "random" or len(options) == 1:
        return options[0] if len(options) == 1 else rng.choice(list(options))
    score = waste if expander == "least-waste" else price_per_request
    scores = [score(o) for o in options]
    best = min(scores)
    top = [o for o, s in zip(options, scores, strict=True) if s <= best + 1e-12]
    return top[0] if len(top) == 1 else rng.choice(top)
