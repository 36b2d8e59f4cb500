"""Node removal: which nodes can go, all together, and where their pods would land.

Follows the down-scaling thesis (003) and the parallel-drain proposal (001):

1. a linear candidate check per node: removing its allocatable while keeping all
   non-DaemonSet requests must keep cluster requests/allocatable under the thresholds;
2. only candidates past their candidate delay are tried (``eligible``);
3. their movable pods are re-placed on the other open nodes by best-fit-decreasing bin-packing
   with every modelled fit rule (never onto a node being removed);
4. the resulting state must keep requests/usable capacity under the thresholds;
5. the most expensive removable node wins; ties go to the fewest pods to move, then to the
   lowest maximum CPU share of the receiving nodes (the thesis' most even spread);
6. up to ``max_parallel_removals`` nodes, greedily: each accepted node's pods are committed into
   the snapshot before the next node is tried, so the set is removable together;
7. never a pool below its minimum (:class:`~tuner.model.pools.Pools`): nodes are counted per
   pool as they are chosen;
8. within the eviction budget (:class:`~tuner.model.limits.Budget`): a node whose pods, with
   those of the nodes already chosen, would exceed what is left is passed over, so a spent
   budget cuts the removal to fewer nodes, or to none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tuner.analyse.usable import node_usable, under_thresholds
from tuner.model.cluster import Cluster, Pod
from tuner.model.limits import Budget, Evictions, added, pod_evictions
from tuner.model.movability import Movability, busy_with_other_autoscaler
from tuner.model.pools import Pools, discover
from tuner.model.price import node_price
from tuner.model.resources import Resources
from tuner.model.snapshot import Move, Snapshot
from tuner.settings import Settings

TIE_LIMIT = 8
"""How many equally priced, equally full removable nodes are compared for the spread tie-break."""


@dataclass(frozen=True)
class Removal:
    """Nodes that can be removed together and where their movable pods go."""

    nodes: tuple[str, ...]
    moves: tuple[tuple[Pod, str], ...]
    saving: float
    """Price per hour of the removed nodes."""


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


class _Greedy:
    """State of the greedy multi-node removal over one snapshot."""

    def __init__(
        self,
        cluster: Cluster,
        settings: Settings,
        movability: Movability,
        budget: Budget | None = None,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.movability = movability
        self.budget = budget
        self.evicted: Evictions = {}
        """Pods per namespace the nodes chosen so far move."""
        self.limited: str | None = None
        """Why the budget passed a node over (None: it did not)."""
        self.snapshot = Snapshot(cluster)
        for i, node in enumerate(cluster.nodes):
            if busy_with_other_autoscaler(node) or node.name in movability.closed:
                self.snapshot.close(i)
        self.removed: list[int] = []
        self.residents: list[list[Pod]] = [
            list(cluster.pods_by_node[n.name]) for n in cluster.nodes
        ]
        """Pods on each node in the simulated state (committed moves included)."""
        self.allocatable = Resources.total([n.allocatable for n in cluster.nodes])
        self.requested = Resources.total([p.requests for p in cluster.pods if p.node is not None])
        self.usable = Resources.total([self.usable_of(i) for i in range(len(cluster.nodes))])

    def usable_of(self, index: int) -> Resources:
        """Usable capacity of a node in the simulated state; a cordoned node's free part is
        usable by no pod, so it contributes only its requests."""
        node = self.cluster.nodes[index]
        return node_usable(node, self.snapshot.requested(index), self.settings.analyse.usability)

    def node_pods(self, index: int) -> tuple[list[Pod], Resources]:
        """Pods to re-place when the node goes, and the requests that vanish with it."""
        pods = self.residents[index]
        vanishing = Resources.total([p.requests for p in pods if p.follows_node])
        return [p for p in pods if not p.follows_node], vanishing

    def over_budget(self, index: int) -> str | None:
        """Why moving the node's pods too would exceed the eviction budget, or None; the first
        such reason (the best node the budget passed over) stays in :attr:`limited`."""
        if self.budget is None:
            return None
        refused = self.budget.refusal(added(self.evicted, pod_evictions(self.node_pods(index)[0])))
        if refused is None:
            return None
        why = f"{self.cluster.nodes[index].name}: {refused}"
        self.limited = self.limited or why
        return why

    def removable(self, removal: Removal) -> str:
        """Why ``removal`` was chosen, and where the eviction budget cut it."""
        cut = f" (no more within the eviction budget: {self.limited})" if self.limited else ""
        return f"{', '.join(removal.nodes)} can be removed; their pods fit elsewhere{cut}"

    def passes_check(self, index: int) -> bool:
        """The linear candidate check (003 §4.4)."""
        node = self.cluster.nodes[index]
        _, vanishing = self.node_pods(index)
        return under_thresholds(
            self.requested - vanishing,
            self.allocatable - node.allocatable,
            self.settings.analyse.thresholds,
        )

    def simulate(self, index: int, pods: list[Pod]) -> tuple[list[Move], Resources] | str:
        """Drain node ``index`` in the snapshot: the moves and usable-capacity change, or why not.

        Leaves the snapshot changed: the caller reverts or keeps it.
        """
        snap = self.snapshot
        demand = Resources.total([p.requests for p in pods])
        open_other = snap.open.copy()
        open_other[index] = False
        if demand.cpu > int(np.sum(snap.free_cpu[open_other])) or demand.memory > int(
            np.sum(snap.free_mem[open_other])
        ):
            return "the other nodes lack free capacity in total"
        usable_delta = Resources() - self.usable_of(index)
        snap.close(index)
        moves: list[Move] = []
        touched: dict[int, Resources] = {}
        for pod in sorted(pods, key=_size, reverse=True):
            mask = snap.fit_mask(pod, leaving=index)
            if not mask.any():
                return f"pod {pod.key} fits on no other node: {snap.refusal(pod, leaving=index)}"
            target = snap.best_fit(pod, mask, leaving=index)
            if target not in touched:
                touched[target] = self.usable_of(target)
            snap.move(pod, index, target)
            moves.append(Move(pod, target))
        for target, before in touched.items():
            usable_delta = usable_delta + (self.usable_of(target) - before)
        return moves, usable_delta

    def try_node(self, index: int) -> tuple[tuple[float, int, float], list[Move], Resources] | str:
        """Evaluate removing one node; reverts the snapshot. Returns (rank key, moves, delta)."""
        node = self.cluster.nodes[index]
        pods, vanishing = self.node_pods(index)
        marker = self.snapshot.fork()
        try:
            outcome = self.simulate(index, pods)
            if isinstance(outcome, str):
                return outcome
            moves, usable_delta = outcome
            if not under_thresholds(
                self.requested - vanishing,
                self.usable + usable_delta,
                self.settings.analyse.thresholds,
            ):
                return "usable utilization would exceed the thresholds"
            spread = self.snapshot.max_cpu_share({m.target for m in moves})
            return (
                (-node_price(node, self.settings.pricing), len(pods), spread),
                moves,
                usable_delta,
            )
        finally:
            self.snapshot.revert(marker)

    def commit(self, index: int, moves: list[Move], usable_delta: Resources) -> None:
        """Keep a chosen removal in the snapshot."""
        node = self.cluster.nodes[index]
        pods, vanishing = self.node_pods(index)
        self.evicted = added(self.evicted, pod_evictions(pods))
        self.snapshot.close(index)
        for move in moves:
            self.snapshot.move(move.pod, index, move.target)
            self.residents[move.target].append(move.pod)
        self.residents[index] = []
        self.removed.append(index)
        self.allocatable = self.allocatable - node.allocatable
        self.requested = self.requested - vanishing
        self.usable = self.usable + usable_delta


def _size(pod: Pod) -> tuple[int, int]:
    return (pod.requests.cpu, pod.requests.memory)


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
    greedy = _Greedy(cluster, settings, movability, budget)
    nodes = cluster.nodes
    pools = pools or discover(cluster, settings)
    spare = {name: pools.spare(name) for name in pools.by_name}
    prices = [node_price(n, settings.pricing) for n in nodes]
    candidates = frozenset(
        n.name
        for i, n in enumerate(nodes)
        if n.name not in movability.node_reasons and greedy.passes_check(i)
    )
    eligible: frozenset[str] | None = None
    if timers is not None:
        timers = timers.update(candidates, now)
        eligible = timers.ripe(now, settings.analyse.candidate_delay_s)
    if not settings.analyse.remove_nodes:
        return RemovalResult(None, "node removal is disabled", candidates, timers)
    chosen: list[tuple[int, list[Move]]] = []
    last_reason = "no node passed the candidate check"
    at_minimum = {n.name for n in nodes if spare.get(pools.node_pool.get(n.name, ""), 1) <= 0}
    if candidates and candidates <= at_minimum:
        last_reason = "every candidate's pool is at its minimum size"
    for _ in range(settings.analyse.max_parallel_removals):

        def rank(i: int) -> tuple[float, int]:
            return (-prices[i], len(greedy.node_pods(i)[0]))

        order = sorted(
            (
                i
                for i, n in enumerate(nodes)
                if n.name in candidates
                and (eligible is None or n.name in eligible)
                and i not in greedy.removed
                and spare.get(pools.node_pool.get(n.name, ""), 1) > 0
                and greedy.passes_check(i)
            ),
            key=lambda i: (*rank(i), nodes[i].name),
        )
        best: tuple[tuple[float, int, float], int, list[Move], Resources] | None = None
        ties = 0
        for index in order:
            if best is not None and (ties >= TIE_LIMIT or rank(index) != best[0][:2]):
                break
            refused = greedy.over_budget(index)
            if refused is not None:
                last_reason = refused
                continue
            outcome = greedy.try_node(index)
            if isinstance(outcome, str):
                last_reason = f"{nodes[index].name}: {outcome}"
                continue
            key, moves, delta = outcome
            ties += 1
            if best is None or key < best[0]:
                best = (key, index, moves, delta)
        if best is None:
            break
        _, index, moves, delta = best
        greedy.commit(index, moves, delta)
        chosen.append((index, moves))
        pool = pools.node_pool.get(nodes[index].name)
        if pool is not None:
            spare[pool] -= 1
    if not chosen:
        if eligible is not None and candidates and not eligible & candidates:
            last_reason = "no candidate has passed its candidate delay yet"
        reason = f"no node can be removed ({greedy.limited or last_reason})"
        return RemovalResult(None, reason, candidates, timers, greedy.limited)
    final: dict[str, tuple[Pod, str]] = {}
    for _, moves in chosen:
        for move in moves:
            final[move.pod.key] = (move.pod, nodes[move.target].name)
    removal = Removal(
        nodes=tuple(nodes[i].name for i, _ in chosen),
        moves=tuple(final.values()),
        saving=sum(prices[i] for i, _ in chosen),
    )
    return RemovalResult(removal, greedy.removable(removal), candidates, timers, greedy.limited)
