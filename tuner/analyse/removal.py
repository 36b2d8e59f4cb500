"""Node removal: which nodes can go, all together, and where their pods would land.

Follows the down-scaling thesis (003) and the parallel-drain proposal (001):

1. a linear candidate check per node: removing its allocatable while keeping all
   non-DaemonSet requests must keep cluster requests/allocatable under the thresholds;
2. only candidates past their candidate delay are tried (``eligible``);
3. their movable pods are re-placed on the other open nodes by best-fit-decreasing bin-packing
   with every modelled fit rule (never onto a node being removed);
4. the resulting state must keep requests/usable capacity under the thresholds;
5. the most expensive removable node wins; ties go to the fewest pods to move, then to the
   fewest pods of a workload with no pod on another node (while they move nothing serves it
   until its new pods start), then to the lowest maximum CPU share of the receiving nodes (the
   thesis' most even spread);
6. up to ``max_parallel_removals`` nodes, greedily: each accepted node's pods are committed into
   the snapshot before the next node is tried, so the set is removable together;
7. never a pool below its minimum (:class:`~tuner.model.pools.Pools`): nodes are counted per
   pool as they are chosen;
8. within the eviction budget (:class:`~tuner.model.limits.Budget`): a node whose pods, with
   those of the nodes already chosen, would exceed what is left is passed over, so a spent
   budget cuts the removal to fewer nodes, or to none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tuner.analyse.context import Context
from tuner.analyse.options import Choice, Proposal, Refusal
from tuner.analyse.search import DrainOutcome, Search, proposal_of
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Cluster, Pod
from tuner.model.limits import Budget, Evictions, added, pod_evictions
from tuner.model.movability import Movability
from tuner.model.pools import Pools
from tuner.model.price import node_price
from tuner.model.resources import Resources
from tuner.settings import Settings

TIE_LIMIT = 8
"""How many equally priced, equally full removable nodes are compared for the spread tie-break."""


@dataclass(frozen=True)
class Removal:
    """Nodes that can be removed together and where their movable pods go."""

    nodes: tuple[str, ...]
    moves: tuple[Relocation, ...]
    saving: float
    """Price per hour of the removed nodes."""

    @property
    def change(self) -> DesiredChange:
        """The desired change: the pods moved, the nodes removed."""
        return DesiredChange(relocations=self.moves, remove_nodes=self.nodes)


@dataclass(frozen=True)
class CandidateTimers:
    """Since when each node has been a removal candidate (the unneeded-time idea)."""

    since: tuple[tuple[str, float], ...] = ()

    def update(self, candidates: Iterable[str], now: float) -> CandidateTimers:
        """Keep the start time of continuing candidates, start new ones, drop the rest."""
        old = dict(self.since)
        return CandidateTimers(tuple(sorted((n, old.get(n, now)) for n in set(candidates))))

    def ripe(self, now: float, delay: float) -> frozenset[str]:
        """Candidates that have stayed candidates for at least ``delay`` seconds."""
        return frozenset(n for n, t in self.since if now - t >= delay)


@dataclass(frozen=True)
class RemovalResult:
    """Outcome of the node-removal analysis."""

    removal: Removal | None
    reason: str
    candidates: frozenset[str]
    """Nodes that passed the linear candidate check."""
    timers: CandidateTimers | None = None
    """The candidate-delay timers updated with this analysis (None when not tracked)."""
    limited: str | None = None
    """Why the eviction budget passed a node over (None: it did not)."""
    refusal: Refusal | None = None
    """Why no node can be removed (None when some can)."""


class _Greedy:
    """The greedy multi-node removal over the shared search."""

    def __init__(self, search: Search, budget: Budget | None) -> None:
        self.search = search
        self.budget = budget
        self.evicted: Evictions = {}
        """Pods per namespace the nodes chosen so far move."""
        self.limited: str | None = None
        """Why the budget passed a node over (None: it did not)."""
        self.refusal = Refusal.NO_CANDIDATE
        """Why the last node tried cannot go (or why there was none to try)."""
        self.last_reason = Refusal.NO_CANDIDATE.value
        """The same in prose."""

    def over_budget(self, name: str, pods: Iterable[Pod]) -> str | None:
        """Why evicting ``pods`` too (the node's, or every pod its drain moves: a move that
        makes room evicts one more) would exceed the eviction budget, or None; the first such
        reason (the best node the budget passed over) stays in :attr:`limited`."""
        if self.budget is None:
            return None
        refused = self.budget.refusal(added(self.evicted, pod_evictions(pods)))
        if refused is None:
            return None
        self.limited = self.limited or f"{name}: {refused}"
        return refused

    def removable(self, removal: Removal) -> str:
        """Why ``removal`` was chosen, and where the eviction budget cut it."""
        cut = f" (no more within the eviction budget: {self.limited})" if self.limited else ""
        return f"{', '.join(removal.nodes)} can be removed; their pods fit elsewhere{cut}"

    def try_node(
        self, name: str, price: float
    ) -> tuple[tuple[float, int, int, float], DrainOutcome] | tuple[Refusal, str]:
        """Evaluate removing one node (the snapshot is left as it was): (rank key, drain), or
        why not."""
        search = self.search
        pods = search.movers(name)
        demand = Resources.total([p.requests for p in pods])
        free = search.snapshot.free_elsewhere(name)
        if demand.cpu > free.cpu or demand.memory > free.memory:
            return Refusal.NO_ROOM, "the other nodes lack free capacity in total"
        with search.trying():
            drain = search.drain([name])
            if isinstance(drain, str):
                return Refusal.NO_ROOM, drain
            short = search.short(drain)
            if short is not None:
                return short
            moved = [m.pod for m in drain.moves]
            refused = self.over_budget(name, moved) if len(moved) > len(pods) else None
            if refused is not None:
                return Refusal.BUDGET, refused
            spread = search.snapshot.max_cpu_share({m.node for m in drain.moves})
            return (-price, len(moved), search.stranded(name), spread), drain

    def best(
        self,
        order: list[str],
        rank: Callable[[str], tuple[float, int, int]],
        prices: dict[str, float],
    ) -> DrainOutcome | None:
        """The best node to remove next among ``order`` (sorted by ``rank``): the first
        removable one and up to :data:`TIE_LIMIT` of those ranked equal to it, the lowest
        maximum CPU share of the receiving nodes winning; each node passed over leaves its
        refusal in :attr:`refusal` and :attr:`last_reason`."""
        best: tuple[tuple[float, int, int, float], DrainOutcome] | None = None
        ties = 0
        for name in order:
            if best is not None and (ties >= TIE_LIMIT or rank(name) != best[0][:3]):
                break
            refused = self.over_budget(name, self.search.movers(name))
            if refused is not None:
                self.refusal, self.last_reason = Refusal.BUDGET, f"{name}: {refused}"
                continue
            outcome = self.try_node(name, prices[name])
            if isinstance(outcome[0], Refusal):
                self.refusal, self.last_reason = outcome[0], f"{name}: {outcome[1]}"
                continue
            key, drain = outcome
            ties += 1
            if best is None or key < best[0]:
                best = (key, drain)
        return None if best is None else best[1]

    def commit(self, drain: DrainOutcome) -> None:
        """Keep a chosen removal in the snapshot."""
        self.evicted = added(self.evicted, pod_evictions(m.pod for m in drain.moves))
        self.search.commit(drain)


def find_removal(
    cluster: Cluster,
    settings: Settings,
    movability: Movability,
    timers: CandidateTimers | None = None,
    now: float = 0.0,
    pools: Pools | None = None,
    budget: Budget | None = None,
) -> RemovalResult:
    """The best set of up to ``max_parallel_removals`` nodes removable together.

    With ``timers``, only candidates that have stayed candidates for ``candidate_delay_s`` up to
    ``now`` are tried, and the updated timers are returned; without, every candidate counts as
    past its delay (the offline ``tuner plan``). ``pools`` (discovered from the cluster when
    not given) bound how many nodes of each pool may go; ``budget`` how many pods may move.
    """
    context = Context.of(
        cluster, settings, movability, pools=pools, budget=budget, timers=timers, now=now
    )
    return removal_in(context)


def removal_in(context: Context) -> RemovalResult:
    """:func:`find_removal` over the cycle's context."""
    cluster, settings, pools = context.cluster, context.settings, context.pools
    candidates, eligible, timers = context.candidates, context.ripe, context.timers
    if not settings.analyse.remove_nodes:
        refusal = Refusal.DISABLED
        return RemovalResult(None, "node removal is disabled", candidates, timers, None, refusal)
    nodes = cluster.nodes
    spare = {name: pools.spare(name) for name in pools.by_name}
    prices = {n.name: node_price(n, settings.pricing) for n in nodes}
    chosen: list[DrainOutcome] = []
    at_minimum = {n.name for n in nodes if spare.get(pools.node_pool.get(n.name, ""), 1) <= 0}
    with context.snapshot.forked():
        search = Search(context)
        greedy = _Greedy(search, context.budget)
        if candidates and candidates <= at_minimum:
            greedy.refusal = Refusal.POOL_AT_MINIMUM
            greedy.last_reason = Refusal.POOL_AT_MINIMUM.value
        elif not candidates and context.checked_out and context.headroom.demand is not None:
            greedy.refusal = Refusal.FORECAST
            greedy.last_reason = context.headroom.why(
                f"without any of {_names(context.checked_out)} the nodes left cannot hold its pods"
            )
        for _ in range(settings.analyse.max_parallel_removals):

            def rank(name: str) -> tuple[float, int, int]:
                return (-prices[name], len(search.movers(name)), search.stranded(name))

            removed = {n for d in chosen for n in d.nodes}
            order = sorted(
                (
                    n.name
                    for n in nodes
                    if n.name in candidates
                    and (eligible is None or n.name in eligible)
                    and n.name not in removed
                    and spare.get(pools.node_pool.get(n.name, ""), 1) > 0
                    and search.passes_check(n.name)
                ),
                key=lambda name: (*rank(name), name),
            )
            best = greedy.best(order, rank, prices)
            if best is None:
                break
            drain = best
            greedy.commit(drain)
            chosen.append(drain)
            pool = pools.node_pool.get(drain.nodes[0])
            if pool is not None:
                spare[pool] -= 1
    if not chosen:
        refusal, last_reason = greedy.refusal, greedy.last_reason
        if eligible is not None and candidates and not eligible & candidates:
            refusal, last_reason = Refusal.CANDIDATE_DELAY, Refusal.CANDIDATE_DELAY.value
        if greedy.limited:
            refusal = Refusal.BUDGET
        reason = f"no node can be removed ({greedy.limited or last_reason})"
        return RemovalResult(None, reason, candidates, timers, greedy.limited, refusal)
    final: dict[str, Relocation] = {}
    for drain in chosen:
        for move in drain.moves:
            final[move.pod.key] = move
    removal = Removal(
        nodes=tuple(n for d in chosen for n in d.nodes),
        moves=tuple(final.values()),
        saving=sum(prices[d.nodes[0]] for d in chosen),
    )
    return RemovalResult(removal, greedy.removable(removal), candidates, timers, greedy.limited)


def _names(nodes: Iterable[str], most: int = 3) -> str:
    ordered = sorted(nodes)
    shown = ", ".join(ordered[:most])
    return shown if len(ordered) <= most else f"{shown} and {len(ordered) - most} more"


class RemoveNodes:
    """The node-removal option: the nodes that can go together, their pods re-placed
    elsewhere; it wins a tie with staying."""

    name = Choice.REMOVE_NODES
    announce = ""

    def propose(self, context: Context) -> Proposal:
        """The removal proposal."""
        result = removal_in(context)
        return proposal_of(
            self.name, context, result.removal, result.reason, result.refusal, result.limited
        )

    def wins_tie(self, mine: Proposal, incumbent: Proposal) -> bool:
        """Removal wins a tie with staying (Algorithm 1: removal when it costs no more)."""
        return incumbent.option is Choice.STAY
