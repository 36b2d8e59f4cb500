"""Short captions Neo4j Browser can draw inside a vertex.

Browser fits a caption into its circle word by word (words split at spaces) and cuts a word
that is wider than the circle with "…". Node names have no spaces and share long prefixes
(``gke-shop-pool-a-8f2k3d1c-x7q2``), so every Node read "gke-shop-p…", and an execution's
``load {load} cost {cost}`` showed 17 digits of load and lost its cost. The Neo4j store writes
these captions as a ``caption`` property of Execution and Node vertices; the style
(``tuner.grass``) shows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_PARTS = re.compile(r"[^-]+-?")
"""A node name's parts: each run up to and including its ``-``."""
SHORTEST = 3
"""Characters a node caption has at least (a lone ``1`` says little)."""


def execution_caption(load: Any, cost: Any) -> str:
    """``load 238 cost 1.5488/h``: the load rounded (three significant digits below 100, a
    whole number above), the cost per hour to four decimals, as ``tuner kb list`` shows it."""
    return f"load {_rounded(load)} cost {_money(cost)}/h"


def _rounded(load: Any) -> str:
    if not isinstance(load, int | float) or isinstance(load, bool):
        return "?"
    return f"{load:.0f}" if abs(load) >= 100 else f"{load:.3g}"


def _money(cost: Any) -> str:
    if not isinstance(cost, int | float) or isinstance(cost, bool):
        return "?"
    return f"{cost:.4f}"


def node_captions(names: Sequence[Any]) -> list[str]:
    """A short caption per node name of one execution: the host part of the name (before the
    first ``.``, when that still tells the nodes apart), then its shortest tail of whole
    ``-``-separated parts that no other node's ends in, at least :data:`SHORTEST` characters
    long: ``gke-shop-pool-a-8f2k3d1c-x7q2`` -> ``x7q2``; ``pool-a-1`` beside ``pool-b-1`` ->
    ``a-1``; ``ip-10-0-12-34.eu-west-1.compute.internal`` beside ``ip-10-0-7-201.…`` ->
    ``12-34`` and ``201``."""
    texts = [str(name) for name in names]
    hosts = [text.split(".", 1)[0] or text for text in texts]
    if len(set(hosts)) < len(set(texts)):
        hosts = texts
    parts = [_PARTS.findall(host) or [host] for host in hosts]
    captions = []
    for mine in parts:
        others = [theirs for theirs in parts if theirs is not mine]
        for size in range(1, len(mine) + 1):
            tail = mine[-size:]
            caption = "".join(tail)
            unique = all(theirs[-size:] != tail for theirs in others)
            if unique and len(caption) >= SHORTEST:
                break
        captions.append(caption)
    return captions
