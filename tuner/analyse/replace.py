"""Replace: drain several nodes onto fewer or cheaper new nodes of one pool's type (the
consolidation the Cluster Autoscaler cannot do and Karpenter's multi-node consolidation does).

1. Drainable nodes: removable (every pod movable, :class:`~tuner.model.movability.Movability`),
   not closed, not busy with another autoscaler, in a pool above its minimum. The sets tried:
   each prefix of them sorted emptiest first (highest share of CPU or memory requested), then
   the most expensive, taken while their pools stay at or above their minimum, up to
   ``max_replaced_nodes``; and each of the :data:`SINGLES` most expensive alone (a node of a
   dear type whose pods would fit a cheaper one, however full it is).
2. For each set and each pool that can grow and whose
   instance type none of the drained nodes has (new nodes of a drained node's own type would
   be a removal in disguise: removal finds those, after its candidate delay): the drained
   nodes' movable pods are re-placed, largest first, by best fit on the other open nodes and on
   new nodes of the pool's type, a new node opened only when a pod fits nowhere else, and no
   more new nodes than cost 99 % of the drained nodes (nor than the pool's maximum allows).
   Every fit rule is the scheduling simulation's (:class:`~tuner.model.snapshot.Snapshot`); a
   new node starts with the requests of the DaemonSets whose pods would run on it.
3. The result must keep requests over allocatable and over usable capacity under the
   thresholds, as removal does, must cost less per hour than now, and must fit in one cycle
   (provisions, migrations and node removals at most ``execute.max_actions_per_cycle``: a
   larger one would be chosen every window and skipped every time).
4. The cheapest result wins; on a tie, the one that moves the fewest pods.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from tuner.analyse.usable import node_usable, under_thresholds
from tuner.model.change import NewNode, daemon_pods
from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.movability import Movability, busy_with_other_autoscaler
from tuner.model.pools import NodePool, Pools
from tuner.model.price import node_price
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot
from tuner.settings import Settings

KEEP = 0.99
"""New nodes may cost at most this share of the drained nodes' price: a replacement saves at
least 1 % of it (price tables round: two e2-standard-4 cost 0.00001/h less than one
e2-standard-8, not worth draining a node for)."""
SINGLES = 8
"""How many of the dearest drainable nodes are tried alone."""
NOT_CHEAPER = "no other pool's nodes would cost less than the nodes they replace"


@dataclass(frozen=True)
class Replacement:
    """Nodes to drain, the new nodes that take (part of) their pods, and where each pod goes."""

    drained: tuple[str, ...]
    new_nodes: tuple[NewNode, ...]
    moves: tuple[tuple[Pod, str], ...]
    saving: float
    """Price per hour of the drained nodes less that of the new nodes."""


@dataclass(frozen=True)
class ReplaceResult:
    """Outcome of the replace search: the cheapest replacement, or why there is none."""

    replacement: Replacement | None
    reason: str


def _size(pod: Pod) -> tuple[int, int]:
    return (pod.requests.cpu, pod.requests.memory)


def _fills(cluster: Cluster) -> dict[str, float]:
    """Per node, the higher of its requested CPU and memory shares (one pass over the pods)."""
    cpu: Counter[str] = Counter()
    memory: Counter[str] = Counter()
    for pod in cluster.pods:
        if pod.node is not None:
            cpu[pod.node] += pod.requests.cpu
            memory[pod.node] += pod.requests.memory
    return {
        n.name: max(
            cpu[n.name] / max(n.allocatable.cpu, 1), memory[n.name] / max(n.allocatable.memory, 1)
        )
        for n in cluster.nodes
    }


class _Search:
    """One snapshot holding the cluster and, per growable pool, its possible new nodes."""

    def __init__(
        self,
        cluster: Cluster,
        settings: Settings,
        movability: Movability,
        pools: Pools,
        growable: dict[str, int],
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.spares: dict[str, range] = {}
        new: list[Node] = []
        first = len(cluster.nodes)
        for name, count in growable.items():
            pool = pools.by_name[name]
            self.spares[name] = range(first + len(new), first + len(new) + count)
            new += [NewNode(f"{name}+{i}", pool).node for i in range(1, count + 1)]
        self.snapshot = Snapshot(cluster, new_nodes=new)
        self.overhead: dict[str, Resources] = {}
        for name in growable:
            pool = pools.by_name[name]
            pods = daemon_pods(cluster, pool.template)
            self.overhead[pool.name] = Resources.total([p.requests for p in pods])
            for index in self.spares[pool.name]:
                for pod in pods:
                    self.snapshot.place(pod, index)
        self.spare_mask = np.zeros(len(self.snapshot.nodes), dtype=np.bool_)
        self.spare_mask[first:] = True
        for i, node in enumerate(cluster.nodes):
            if node.name in movability.closed or busy_with_other_autoscaler(node):
                self.snapshot.close(i)
        usability = settings.analyse.usability
        self.usable_before = [
            node_usable(n, self.snapshot.requested(i), usability)
            for i, n in enumerate(cluster.nodes)
        ]
        self.allocatable = Resources.total([n.allocatable for n in cluster.nodes])
        self.requested = Resources.total([p.requests for p in cluster.pods if p.node is not None])
        self.usable = Resources.total(self.usable_before)

    def usable_of(self, index: int) -> Resources:
        node = self.snapshot.nodes[index]
        usability = self.settings.analyse.usability
        return node_usable(node, self.snapshot.requested(index), usability)

    def attempt(
        self, drained: list[int], pool: NodePool, most: int
    ) -> tuple[list[tuple[Pod, int]], int] | str:
        """Drain ``drained`` onto the open nodes and up to ``most`` new nodes of ``pool``:
        (moves, new nodes used) or why not. Reverts the snapshot."""
        snap = self.snapshot
        spares = self.spares[pool.name]
        marker = snap.fork()
        try:
            for index in drained:
                snap.close(index)
            pods = sorted(
                (
                    (p, i)
                    for i in drained
                    for p in self.cluster.pods_by_node[self.cluster.nodes[i].name]
                    if not p.follows_node
                ),
                key=lambda item: _size(item[0]),
                reverse=True,
            )
            allowed = ~self.spare_mask
            used = 0
            moves: list[tuple[Pod, int]] = []
            for pod, source in pods:
                mask = snap.fit_mask(pod, leaving=source) & allowed
                while not mask.any() and used < most:
                    allowed[spares[used]] = True
                    used += 1
                    mask = snap.fit_mask(pod, leaving=source) & allowed
                if not mask.any():
                    why = snap.refusal(pod, allowed, leaving=source)
                    return (
                        f"pod {pod.key} fits on no other node nor {most} new {pool.node_type}: "
                        f"{why}"
                    )
                target = snap.best_fit(pod, mask, leaving=source)
                snap.move(pod, source, target)
                moves.append((pod, target))
            if used == 0:
                return "the pods fit on the other nodes: that is a removal"
            actions = used + len(moves) + len(drained)
            if actions > self.settings.execute.max_actions_per_cycle:
                return (
                    f"it takes {actions} actions, more than execute.max_actions_per_cycle "
                    f"{self.settings.execute.max_actions_per_cycle}"
                )
            if not self._under_thresholds(drained, spares[:used], pool, moves):
                return "usable utilization would exceed the thresholds"
            return moves, used
        finally:
            snap.revert(marker)

    def _under_thresholds(
        self, drained: list[int], new: range, pool: NodePool, moves: list[tuple[Pod, int]]
    ) -> bool:
        cluster = self.cluster
        vanishing = Resources.total(
            [
                p.requests
                for i in drained
                for p in cluster.pods_by_node[cluster.nodes[i].name]
                if p.follows_node
            ]
        )
        requested = (
            self.requested
            - vanishing
            + Resources(
                self.overhead[pool.name].cpu * len(new), self.overhead[pool.name].memory * len(new)
            )
        )
        allocatable = self.allocatable - Resources.total(
            [cluster.nodes[i].allocatable for i in drained]
        )
        allocatable = allocatable + Resources(
            pool.template.allocatable.cpu * len(new), pool.template.allocatable.memory * len(new)
        )
        usable = self.usable
        for index in {t for _, t in moves if t < len(cluster.nodes)} | set(drained):
            after = Resources() if index in drained else self.usable_of(index)
            usable = usable - self.usable_before[index] + after
        for index in new:
            usable = usable + self.usable_of(index)
        limits = self.settings.analyse.thresholds
        return under_thresholds(requested, allocatable, limits) and under_thresholds(
            requested, usable, limits
        )


def _drain_sets(
    cluster: Cluster,
    settings: Settings,
    movability: Movability,
    pools: Pools,
    prices: list[float],
) -> list[list[int]]:
    """The sets of nodes to try draining (see the module's step 1)."""
    fills = _fills(cluster)
    order = sorted(
        (
            i
            for i, n in enumerate(cluster.nodes)
            if n.name not in movability.node_reasons
            and n.name not in movability.closed
            and not busy_with_other_autoscaler(n)
        ),
        key=lambda i: (fills[cluster.nodes[i].name], -prices[i], cluster.nodes[i].name),
    )
    spare = {name: pools.spare(name) for name in pools.by_name}
    order = [i for i in order if spare.get(pools.node_pool.get(cluster.nodes[i].name, ""), 1)]
    chosen: list[int] = []
    for index in order:
        pool = pools.node_pool.get(cluster.nodes[index].name)
        if pool is not None:
            if spare[pool] <= 0:
                continue
            spare[pool] -= 1
        chosen.append(index)
        if len(chosen) == settings.analyse.max_replaced_nodes:
            break
    dearest = sorted(order, key=lambda i: -prices[i])[:SINGLES]
    return [chosen[:k] for k in range(1, len(chosen) + 1)] + [
        [i] for i in dearest if chosen[:1] != [i]
    ]


def _trials(
    cluster: Cluster,
    settings: Settings,
    pools: Pools,
    growable: dict[str, int],
    sets: list[list[int]],
    prices: list[float],
) -> list[tuple[list[int], NodePool, int, float]]:
    """(nodes to drain, pool, most new nodes, saving of the drained nodes) worth simulating:
    each set with each growable pool of another type whose nodes are cheap enough that at
    least one of them costs at most :data:`KEEP` of the drained nodes' price."""
    trials: list[tuple[list[int], NodePool, int, float]] = []
    for drained in sets:
        saving = sum(prices[i] for i in drained)
        types = {cluster.nodes[i].instance_type for i in drained}
        for name, spares in growable.items():
            pool = pools.by_name[name]
            price = node_price(pool.template, settings.pricing)
            most = spares if price <= 0 else min(spares, math.floor(saving * KEEP / price))
            if pool.node_type not in types and most >= 1:
                trials.append((drained, pool, most, saving))
    return trials


def find_replacement(
    cluster: Cluster, settings: Settings, movability: Movability, pools: Pools
) -> ReplaceResult:
    """The cheapest replacement of up to ``max_replaced_nodes`` nodes (see the module)."""
    if not settings.analyse.replace_nodes:
        return ReplaceResult(None, "node replacement is disabled")
    limit = settings.analyse.max_replaced_nodes
    growable = {
        name: limit if room is None else min(limit, room)
        for name in pools.by_name
        if (room := pools.room(name)) != 0
    }
    if not growable:
        return ReplaceResult(None, "no node pool can grow")
    prices = [node_price(n, settings.pricing) for n in cluster.nodes]
    sets = _drain_sets(cluster, settings, movability, pools, prices)
    if not sets:
        return ReplaceResult(None, "no node can be drained")
    trials = _trials(cluster, settings, pools, growable, sets, prices)
    if not trials:
        return ReplaceResult(None, f"no replacement ({NOT_CHEAPER})")
    search = _Search(cluster, settings, movability, pools, growable)
    best: tuple[tuple[float, int], float, list[int], NodePool, list[tuple[Pod, int]], int] | None
    best = None
    last = NOT_CHEAPER
    for drained, pool, most, saving in trials:
        outcome = search.attempt(drained, pool, most)
        if isinstance(outcome, str):
            if last == NOT_CHEAPER:
                last = f"{pool.name} for {len(drained)} node(s): {outcome}"
            continue
        moves, used = outcome
        delta = node_price(pool.template, settings.pricing) * used - saving
        key = (round(delta, 9), len(moves))
        if best is None or key < best[0]:
            best = (key, delta, drained, pool, moves, used)
    if best is None:
        return ReplaceResult(None, f"no replacement ({last})")
    _, delta, drained, pool, moves, used = best
    names = [s.name for s in search.snapshot.nodes]
    new_nodes = tuple(NewNode(names[i], pool) for i in search.spares[pool.name][:used])
    replacement = Replacement(
        drained=tuple(cluster.nodes[i].name for i in drained),
        new_nodes=new_nodes,
        moves=tuple((pod, names[target]) for pod, target in moves),
        saving=-delta,
    )
    counts = Counter(n.pool.node_type for n in new_nodes)
    made = ", ".join(f"{c} new {t}" for t, c in sorted(counts.items()))
    reason = f"{', '.join(replacement.drained)} can be replaced by {made}"
    return ReplaceResult(replacement, reason)
