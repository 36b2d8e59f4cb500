"""What every option reads, computed once per cycle (as Karpenter's disruption controller
computes its candidates and budgets once for all its methods): the cluster, its movability and
pools, the cost now, the eviction budget, the nodes no pod may land on, the removal candidates
and their delay, the knowledge-base entries for this load, and the one scheduling snapshot each
option forks (:meth:`~tuner.model.snapshot.Snapshot.forked`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.analyse.headroom import Headroom
from tuner.analyse.usable import node_usable
from tuner.model.cluster import Cluster
from tuner.model.execution import Execution
from tuner.model.forecast import Forecast
from tuner.model.limits import Budget
from tuner.model.movability import Movability, busy_with_other_autoscaler
from tuner.model.pools import Pools, discover
from tuner.model.price import nodes_cost
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot
from tuner.settings import Settings

if TYPE_CHECKING:
    from tuner.analyse.removal import CandidateTimers


@dataclass(frozen=True, slots=True)
class Totals:
    """Cluster-wide requests, allocatable and usable capacity (what the thresholds compare)."""

    requested: Resources
    allocatable: Resources
    usable: Resources


@dataclass(frozen=True)
class Context:
    """One cycle's shared inputs of the options."""

    cluster: Cluster
    settings: Settings
    movability: Movability
    pools: Pools
    current: float
    """Cost per hour of the nodes now."""
    snapshot: Snapshot
    """The cluster as it runs; each option changes it only inside a fork."""
    protected: frozenset[str]
    """Nodes no pod may be placed on: changed during the window, or being removed by another
    autoscaler."""
    usable: Mapping[str, Resources]
    """Each node's usable capacity now."""
    totals: Totals
    candidates: frozenset[str]
    """Nodes that may be removed (every pod movable) and pass the linear candidate check."""
    headroom: Headroom
    """The room a removal or a replacement must leave (the forecast's, or the thresholds)."""
    checked_out: frozenset[str] = frozenset()
    """Nodes that may be removed but fail the linear candidate check."""
    ripe: frozenset[str] | None = None
    """Candidates past their candidate delay (None: every candidate counts as past it)."""
    timers: CandidateTimers | None = None
    """The candidate-delay timers updated with this cycle's candidates (None: not tracked)."""
    budget: Budget | None = None
    """How many pods may still be evicted (None: no limit)."""
    history: Sequence[Execution] = ()
    """The knowledge-base entries for this load."""

    @staticmethod
    def of(
        cluster: Cluster,
        settings: Settings,
        movability: Movability,
        pools: Pools | None = None,
        budget: Budget | None = None,
        history: Sequence[Execution] = (),
        timers: CandidateTimers | None = None,
        now: float = 0.0,
        forecast: Forecast | None = None,
    ) -> Context:
        """The context of one cycle; ``pools`` are discovered when not given; with ``timers``
        the candidates' delay is tracked up to ``now``; with ``forecast`` (and
        ``analyse.headroom: forecast``) a removal must leave room for its upper band."""
        usability = settings.analyse.usability
        by_node = cluster.pods_by_node
        usable = {
            n.name: node_usable(
                n, Resources.total([p.requests for p in by_node[n.name]]), usability
            )
            for n in cluster.nodes
        }
        totals = Totals(
            requested=Resources.total([p.requests for p in cluster.pods if p.node is not None]),
            allocatable=Resources.total([n.allocatable for n in cluster.nodes]),
            usable=Resources.total(list(usable.values())),
        )
        headroom = Headroom.of(cluster, settings, forecast)
        removable = [n for n in cluster.nodes if n.name not in movability.node_reasons]
        candidates = frozenset(
            n.name
            for n in removable
            if headroom.passes_check(totals.requested, totals.allocatable, n, by_node[n.name])
        )
        ripe = None
        if timers is not None:
            timers = timers.update(candidates, now)
            ripe = timers.ripe(now, settings.analyse.candidate_delay_s)
        return Context(
            cluster=cluster,
            settings=settings,
            movability=movability,
            pools=pools or discover(cluster, settings),
            current=nodes_cost(cluster.nodes, settings.pricing),
            snapshot=Snapshot(cluster),
            protected=frozenset(
                n.name
                for n in cluster.nodes
                if n.name in movability.closed or busy_with_other_autoscaler(n)
            ),
            usable=usable,
            totals=totals,
            candidates=candidates,
            headroom=headroom,
            checked_out=frozenset(n.name for n in removable) - candidates,
            ripe=ripe,
            timers=timers,
            budget=budget,
            history=history,
        )
