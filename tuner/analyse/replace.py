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
   new nodes of the pool's type, a new node opened only when a pod fits nowhere else and the
   new node admits it (one its spread or affinity keeps it off would be paid for and left
   empty; when none may open, room made for it by one smaller pod's move,
   :mod:`~tuner.analyse.search`),
   and no more new nodes than cost 99 % of the drained nodes (nor than the pool's maximum allows).
   Every fit rule is the scheduling simulation's (:class:`~tuner.model.snapshot.Snapshot`); a
   new node starts with the requests of the DaemonSets whose pods would run on it.
3. The result must keep requests over allocatable and over usable capacity under the
   thresholds, as removal does, must cost less per hour than now, and must fit in one cycle
   (provisions, migrations and node removals at most ``execute.max_actions_per_cycle``: a
   larger one would be chosen every window and skipped every time).
4. The cheapest result wins; on a tie, the one that moves the fewest pods.

Every set is tried, not a binary search over the prefixes (as Karpenter's multi-node
consolidation does): that needs "if a prefix can be replaced, so can every shorter one", and
here it does not hold — a longer prefix may fit in fewer actions per saved price, a shorter one
may leave a pod that only a drained node's neighbour could take, and the cap on new nodes
(:data:`KEEP` of the drained nodes' price) grows with the prefix — so a bisection would skip
cheaper answers. The sets are few (at most ``max_replaced_nodes`` + :data:`SINGLES`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from tuner.analyse.context import Context
from tuner.analyse.options import Choice, Proposal, Refusal
from tuner.analyse.search import DrainOutcome, Search, proposal_of
from tuner.model.change import DesiredChange, NewNode, Relocation, daemon_pods
from tuner.model.cluster import Cluster, Pod
from tuner.model.movability import Movability
from tuner.model.pools import NodePool, Pools
from tuner.model.price import node_price
from tuner.model.resources import Resources
from tuner.settings import Settings

KEEP = 0.99
"""New nodes may cost at most this share of the drained nodes' price: a replacement saves at
least 1 % of it (price tables round: two e2-standard-4 cost 0.00001/h less than one
e2-standard-8, not worth draining a node for)."""
SINGLES = 8
"""How many of the dearest drainable nodes are tried alone."""


@dataclass(frozen=True)
class Replacement:
    """Nodes to drain, the new nodes that take (part of) their pods, and where each pod goes."""

    drained: tuple[str, ...]
    new_nodes: tuple[NewNode, ...]
    moves: tuple[Relocation, ...]
    saving: float
    """Price per hour of the drained nodes less that of the new nodes."""

    @property
    def change(self) -> DesiredChange:
        """The desired change: the nodes provisioned, the pods moved, the nodes drained."""
        return DesiredChange(
            relocations=self.moves, remove_nodes=self.drained, new_nodes=self.new_nodes
        )


@dataclass(frozen=True)
class ReplaceResult:
    """Outcome of the replace search: the cheapest replacement, or why there is none."""

    replacement: Replacement | None
    reason: str
    refusal: Refusal | None = None


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


@dataclass(frozen=True)
class _Trial:
    """Nodes to drain onto at most ``most`` new nodes of ``pool``; ``saving``: their price."""

    drained: list[str]
    pool: NodePool
    most: int
    saving: float


class _Spares:
    """Per growable pool, the new nodes it could add, in the search's fork (empty, with the
    DaemonSet pods that would start on them)."""

    def __init__(self, search: Search, pools: Pools, growable: dict[str, int]) -> None:
        cluster = search.context.cluster
        self.names: dict[str, list[str]] = {}
        self.overhead: dict[str, Resources] = {}
        new: list[NewNode] = []
        for name, count in growable.items():
            pool = pools.by_name[name]
            made = [NewNode(f"{name}+{i}", pool) for i in range(1, count + 1)]
            self.names[name] = [n.name for n in made]
            new += made
        search.snapshot.add_nodes(n.node for n in new)
        for name in growable:
            pool = pools.by_name[name]
            pods = daemon_pods(cluster, pool.template)
            self.overhead[name] = Resources.total([p.requests for p in pods])
            for spare in self.names[name]:
                for pod in pods:
                    search.snapshot.place(pod, spare)
        self.existing = search.snapshot.mask_of(n.name for n in cluster.nodes)


def _attempt(
    search: Search, spares: _Spares, trial: _Trial
) -> tuple[DrainOutcome, int] | tuple[Refusal, str]:
    """Drain the trial's nodes onto the open nodes and up to ``most`` new nodes of its pool:
    (the drain, new nodes used) or why not. Leaves the snapshot as it was."""
    pool, most = trial.pool, trial.most
    names = spares.names[pool.name]
    allowed = spares.existing.copy()
    used = 0

    def grow(pod: Pod, source: str) -> str | None:
        """Open the next new node, if it admits ``pod`` (the new nodes are alike: when the
        next does not, no other will)."""
        nonlocal used
        if used >= most or search.snapshot.why_not(pod, names[used], leaving=source) is not None:
            return None
        allowed[search.snapshot.mask_of([names[used]])] = True
        used += 1
        return names[used - 1]

    with search.trying():
        nowhere = f"fits on no other node nor {most} new {pool.node_type}"
        drain = search.drain(trial.drained, allowed, grow, nowhere)
        if isinstance(drain, str):
            return Refusal.NO_ROOM, drain
        if used == 0:
            return Refusal.MERE_REMOVAL, Refusal.MERE_REMOVAL.value
        actions = used + len(drain.moves) + len(trial.drained)
        limit = search.context.settings.execute.max_actions_per_cycle
        if actions > limit:
            why = f"it takes {actions} actions, more than execute.max_actions_per_cycle {limit}"
            return Refusal.TOO_MANY_ACTIONS, why
        overhead, template = spares.overhead[pool.name], pool.template.allocatable
        short = search.short(
            drain,
            Resources(overhead.cpu * used, overhead.memory * used),
            Resources(template.cpu * used, template.memory * used),
            allowed,
        )
        return short or (drain, used)


def _drain_sets(context: Context, prices: dict[str, float]) -> list[list[str]]:
    """The sets of nodes to try draining (see the module's step 1)."""
    cluster, pools = context.cluster, context.pools
    fills = _fills(cluster)
    order = sorted(
        (
            n.name
            for n in cluster.nodes
            if n.name not in context.movability.node_reasons and n.name not in context.protected
        ),
        key=lambda name: (fills[name], -prices[name], name),
    )
    spare = {name: pools.spare(name) for name in pools.by_name}
    order = [n for n in order if spare.get(pools.node_pool.get(n, ""), 1)]
    chosen: list[str] = []
    for name in order:
        pool = pools.node_pool.get(name)
        if pool is not None:
            if spare[pool] <= 0:
                continue
            spare[pool] -= 1
        chosen.append(name)
        if len(chosen) == context.settings.analyse.max_replaced_nodes:
            break
    dearest = sorted(order, key=lambda n: -prices[n])[:SINGLES]
    return [chosen[:k] for k in range(1, len(chosen) + 1)] + [
        [n] for n in dearest if chosen[:1] != [n]
    ]


def _trials(
    context: Context, growable: dict[str, int], sets: list[list[str]], prices: dict[str, float]
) -> list[_Trial]:
    """The trials worth simulating: each set with each growable pool of another type whose
    nodes are cheap enough that at least one of them costs at most :data:`KEEP` of the drained
    nodes' price."""
    trials: list[_Trial] = []
    for drained in sets:
        saving = sum(prices[n] for n in drained)
        types = {context.cluster.node_by_name[n].instance_type for n in drained}
        for name, spares in growable.items():
            pool = context.pools.by_name[name]
            price = node_price(pool.template, context.settings.pricing)
            most = spares if price <= 0 else min(spares, math.floor(saving * KEEP / price))
            if pool.node_type not in types and most >= 1:
                trials.append(_Trial(drained, pool, most, saving))
    return trials


def find_replacement(
    cluster: Cluster, settings: Settings, movability: Movability, pools: Pools
) -> ReplaceResult:
    """The cheapest replacement of up to ``max_replaced_nodes`` nodes (see the module)."""
    return replacement_in(Context.of(cluster, settings, movability, pools=pools))


def replacement_in(context: Context) -> ReplaceResult:
    """:func:`find_replacement` over the cycle's context."""
    settings, pools = context.settings, context.pools
    if not settings.analyse.replace_nodes:
        return ReplaceResult(None, "node replacement is disabled", Refusal.DISABLED)
    limit = settings.analyse.max_replaced_nodes
    growable = {
        name: limit if room is None else min(limit, room)
        for name in pools.by_name
        if (room := pools.room(name)) != 0
    }
    if not growable:
        return ReplaceResult(None, Refusal.NO_POOL_CAN_GROW.value, Refusal.NO_POOL_CAN_GROW)
    prices = {n.name: node_price(n, settings.pricing) for n in context.cluster.nodes}
    sets = _drain_sets(context, prices)
    if not sets:
        return ReplaceResult(None, Refusal.NOTHING_DRAINABLE.value, Refusal.NOTHING_DRAINABLE)
    trials = _trials(context, growable, sets, prices)
    if not trials:
        return ReplaceResult(None, f"no replacement ({Refusal.NOT_CHEAPER})", Refusal.NOT_CHEAPER)
    best: tuple[tuple[float, int], float, _Trial, DrainOutcome, int] | None = None
    refusal, last = Refusal.NOT_CHEAPER, Refusal.NOT_CHEAPER.value
    with context.snapshot.forked():
        search = Search(context)
        spares = _Spares(search, pools, growable)
        for trial in trials:
            outcome = _attempt(search, spares, trial)
            if isinstance(outcome[0], Refusal):
                if refusal is Refusal.NOT_CHEAPER:
                    refusal = outcome[0]
                    last = f"{trial.pool.name} for {len(trial.drained)} node(s): {outcome[1]}"
                continue
            drain, used = outcome
            delta = node_price(trial.pool.template, settings.pricing) * used - trial.saving
            key = (round(delta, 9), len(drain.moves))
            if best is None or key < best[0]:
                best = (key, delta, trial, drain, used)
    if best is None:
        return ReplaceResult(None, f"no replacement ({last})", refusal)
    _, delta, trial, drain, used = best
    pool = trial.pool
    new_nodes = tuple(NewNode(name, pool) for name in spares.names[pool.name][:used])
    replacement = Replacement(
        drained=tuple(trial.drained), new_nodes=new_nodes, moves=drain.moves, saving=-delta
    )
    counts = Counter(n.pool.node_type for n in new_nodes)
    made = ", ".join(f"{c} new {t}" for t, c in sorted(counts.items()))
    reason = f"{', '.join(replacement.drained)} can be replaced by {made}"
    return ReplaceResult(replacement, reason)


class ReplaceNodes:
    """The replace option: drain several nodes onto fewer or cheaper new nodes of a pool's
    type; at the same cost it beats a previous deployment that disrupts more."""

    name = Choice.REPLACE_NODES
    announce = ""

    def propose(self, context: Context) -> Proposal:
        """The replace proposal."""
        result = replacement_in(context)
        return proposal_of(self.name, context, result.replacement, result.reason, result.refusal)

    def wins_tie(self, mine: Proposal, incumbent: Proposal) -> bool:
        """Against a previous deployment only, and only when less disruptive."""
        return (
            incumbent.option is Choice.PREVIOUS and mine.disruption.rank < incumbent.disruption.rank
        )
