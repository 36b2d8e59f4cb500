"""The search removal and replace share: drain nodes in a fork of the cycle's snapshot, their
movable pods re-placed largest first by best fit with every fit rule, and the totals the
thresholds compare kept current (cf. the Cluster Autoscaler's scale-down simulation).

A pod that fits on no node may take the place of one other pod (the make-room move): on one of
the :data:`MAKE_ROOM_HOSTS` nodes closest to having room for it among those whose every other
rule admits it, one of its :data:`MAKE_ROOM_PODS` smallest movable pods that are no larger than
it (CPU and memory) yet free enough moves, by best fit, to another open node, if the pod then
fits there (``analyse.make_room``, on by default); a pod whose workload runs another pod goes
before a workload's only pod (nothing serves that one until its new pod starts). One level only
(the pod moved is placed without making room in turn); finding the hosts closest to having room
reads every admissible node's free room once per such pod, so the option costs more than a plain
drain on large clusters (measured in docs/performance.md only with it on, on small ones). It
reaches what a drain onto the nodes as they are cannot: a pod bound to a zone by its topology
spread, or to a node type by its affinity, whose only admissible nodes are full of pods that
could run anywhere.

A :class:`Search` lives inside one fork of :attr:`Context.snapshot
<tuner.analyse.context.Context.snapshot>` with the protected nodes closed; :meth:`Search.drain`
tries a set of nodes in a nested fork, :meth:`Search.commit` keeps a drain (removal takes several
nodes one after another, each accepted drain committed before the next is tried).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from tuner.analyse.context import Context, Totals
from tuner.analyse.headroom import vanishing
from tuner.analyse.options import Choice, Proposal, Refusal
from tuner.analyse.usable import node_usable
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Pod
from tuner.model.demand import counted_alike
from tuner.model.pod_counting import Mask
from tuner.model.resources import Resources

NONE = Resources()
"""Nothing added."""
MAKE_ROOM_HOSTS = 8
"""How many nodes (those short of the least room) a make-room move is looked for on."""
MAKE_ROOM_PODS = 3
"""How many pods (the smallest that free enough) are tried on each of them."""


@dataclass(frozen=True)
class DrainOutcome:
    """Nodes drained in the snapshot: where their pods went and what it did to the totals."""

    nodes: tuple[str, ...]
    moves: tuple[Relocation, ...]
    sources: tuple[str, ...]
    """The node each move leaves (in the simulated state: a pod a committed drain moved there
    leaves again from it)."""
    vanishing: Resources
    """Requests that go with the drained nodes (their DaemonSet and static pods)."""
    usable: Resources
    """The change of usable capacity: the drained nodes' lost, the receiving nodes' used up."""


class Search:
    """Drains tried in the cycle's snapshot (see the module)."""

    def __init__(self, context: Context) -> None:
        """Call inside a fork: the protected nodes are closed in it."""
        self.context = context
        self.snapshot = snapshot = context.snapshot
        for name in sorted(context.protected):
            snapshot.close(name, removed=False)
        self.residents: dict[str, list[Pod]] = {
            name: list(pods) for name, pods in context.cluster.pods_by_node.items()
        }
        """Pods on each node in the simulated state (committed drains included)."""
        self.totals = context.totals
        self.running = Counter(p.workload for p in context.cluster.pods if p.node is not None)
        """Each workload's pods on a node (a move keeps the count)."""

    def usable_of(self, name: str) -> Resources:
        """Usable capacity of a node in the simulated state; a cordoned node's free part is
        usable by no pod, so it contributes only its requests."""
        node = self.snapshot.node(name)
        usability = self.context.settings.analyse.usability
        return node_usable(node, self.snapshot.requested(name), usability)

    def movers(self, name: str) -> list[Pod]:
        """The pods to re-place when the node goes."""
        return [p for p in self.residents.get(name, ()) if not p.follows_node]

    def stranded(self, name: str) -> int:
        """How many of the node's pods to re-place are of a workload with no pod on any other
        node: while they move, nothing serves it until its new pods start."""
        pods = self.movers(name)
        here = Counter(p.workload for p in pods)
        return sum(1 for p in pods if self.running[p.workload] <= here[p.workload])

    def passes_check(self, name: str) -> bool:
        """The linear candidate check in the simulated state."""
        totals = self.totals
        node = self.snapshot.node(name)
        return self.context.headroom.passes_check(
            totals.requested, totals.allocatable, node, self.residents[name]
        )

    @contextmanager
    def trying(self) -> Iterator[None]:
        """A nested fork for one attempt: everything it changes is undone when it ends."""
        with self.snapshot.forked():
            yield

    def drain(
        self,
        nodes: Sequence[str],
        allowed: Mask | None = None,
        grow: Callable[[Pod, str], str | None] | None = None,
        nowhere: str = "fits on no other node",
    ) -> DrainOutcome | str:
        """Close ``nodes`` and re-place their movable pods, largest first, by best fit on the
        ``allowed`` open nodes (None: every open node); when a pod fits none, ``grow`` (if
        given, called with the pod and its source) allows one more node that admits the pod
        and returns its name, None when it cannot. Returns the
        drain, or why a pod fits nowhere (``nowhere`` says where it was looked for). Changes
        the snapshot: run it inside :meth:`trying`."""
        snap = self.snapshot
        before = {name: self.usable_of(name) for name in nodes}
        for name in nodes:
            snap.close(name)
        pods = sorted(
            ((p, name) for name in nodes for p in self.movers(name)),
            key=lambda item: _size(item[0]),
            reverse=True,
        )
        moves: list[Relocation] = []
        sources: list[str] = []
        for pod, source in pods:
            mask = snap.fit_mask(pod, leaving=source)
            if allowed is not None:
                mask &= allowed
            while not mask.any() and grow is not None and (opened := grow(pod, source)) is not None:
                before[opened] = Resources()
                mask = snap.fit_mask(pod, leaving=source)
                if allowed is not None:
                    mask &= allowed
            if not mask.any():
                room = self.context.settings.analyse.make_room
                made = self._make_room(pod, source, allowed, before, moves) if room else None
                if made is None:
                    why = snap.refusal(pod, allowed, leaving=source)
                    return f"pod {pod.key} {nowhere}: {why}"
                moves.append(made)
                sources.append(made.pod.node or "")
                mask = snap.mask_of([made.pod.node or ""])
            target = snap.best_fit(pod, mask, leaving=source)
            if target not in before:
                before[target] = self.usable_of(target)
            snap.move(pod, source, target)
            moves.append(Relocation(pod, target))
            sources.append(source)
        usable = Resources()
        for name, was in before.items():
            after = Resources() if name in nodes else self.usable_of(name)
            usable = usable + (after - was)
        gone = Resources.total([vanishing(self.residents[n]) for n in nodes])
        return DrainOutcome(tuple(nodes), tuple(moves), tuple(sources), gone, usable)

    def _make_room(
        self,
        pod: Pod,
        source: str,
        allowed: Mask | None,
        before: dict[str, Resources],
        moves: Sequence[Relocation],
    ) -> Relocation | None:
        """Room for a pod that fits nowhere: on a node whose every rule but free room admits
        it, one movable pod no larger than it that frees enough moves to another node (the
        one make-room move, see the module). Returns that move, made in the snapshot (the pod
        then fits on the node it left), or None. ``before`` gets the usable capacity of the
        nodes it touches; ``moves`` are the drain's so far (their pods stay put)."""
        snap = self.snapshot
        hosts = snap.fit_mask(pod, leaving=source, room=False)
        if allowed is not None:
            hosts &= allowed
        moved = {m.pod.key for m in moves}
        need = pod.requests
        tried = snap.shortfalls(need, hosts)
        for _, host, short in heapq.nsmallest(MAKE_ROOM_HOSTS, tried, key=lambda t: t[:2]):
            others = sorted(
                (
                    p
                    for p in self.movers(host)
                    if p.node == host
                    and p.key not in moved
                    and self.context.movability.movable(p)
                    and short.cpu <= p.requests.cpu <= need.cpu
                    and short.memory <= p.requests.memory <= need.memory
                ),
                key=lambda p: (self.running[p.workload] <= 1, _size(p)),
            )
            for other in others[:MAKE_ROOM_PODS]:
                mask = snap.fit_mask(other, leaving=host)
                mask &= ~snap.mask_of([host])
                if allowed is not None:
                    mask &= allowed
                if not mask.any():
                    continue
                dest = snap.best_fit(other, mask, leaving=host)
                for name in (host, dest):
                    if name not in before:
                        before[name] = self.usable_of(name)
                with snap.forked() as fork:
                    snap.move(other, host, dest)
                    if snap.why_not(pod, host, leaving=source) is not None:
                        continue
                    fork.commit()
                return Relocation(other, dest)
        return None

    def short(
        self,
        drain: DrainOutcome,
        requested: Resources = NONE,
        allocatable: Resources = NONE,
        allowed: Mask | None = None,
    ) -> tuple[Refusal, str] | None:
        """Why the drain leaves too little room (:class:`~tuner.analyse.headroom.Headroom`),
        or None: cluster requests (or the forecast's demand) against allocatable and usable
        capacity after it, with ``requested`` and ``allocatable`` added by new nodes; with a
        forecast, the pods its peak adds fitted one by one on the ``allowed`` open nodes (None:
        every open node) and on the nodes the plan keeps out of (changed during the window: the
        scheduler still places new pods there). Call in the drain's fork: the added pods are
        placed in it."""
        totals = self.totals
        headroom = self.context.headroom
        lost = Resources.total([self.snapshot.node(n).allocatable for n in drain.nodes])
        capacities = (totals.allocatable - lost + allocatable, totals.usable + drain.usable)
        fits = headroom.holds(totals.requested, requested - drain.vanishing, capacities)
        if headroom.demand is None and not fits:
            return Refusal.THRESHOLDS, Refusal.THRESHOLDS.value
        if not fits:
            return Refusal.FORECAST, headroom.why("the nodes left cannot hold its pods")
        snap = self.snapshot
        kept_out = snap.mask_of(self.context.movability.closed - set(drain.nodes))
        for pod, count in headroom.steps:  # each workload's step on its own
            if not self._step_fits(pod, count, kept_out, allowed):
                return Refusal.NEXT_STEP, (
                    f"{Refusal.NEXT_STEP.value}: {count} more pod(s) of {pod.workload} would "
                    "fit on no node left"
                )
        if not self._steps_fit(headroom.imminent, kept_out, allowed):
            return Refusal.NEXT_STEP, (
                f"{Refusal.NEXT_STEP.value}: the next steps of the {len(headroom.imminent)} "
                "HPA(s) at or above their target would not all fit on the nodes left"
            )
        for pod in headroom.added_pods(self.context.cluster) or ():
            mask = self._admits(pod, kept_out, allowed)
            if not mask.any():
                return Refusal.FORECAST, headroom.why(f"a new pod of {pod.workload} fits nowhere")
            snap.place(pod, snap.best_fit(pod, mask))
        return None

    def _step_fits(self, pod: Pod, count: int, kept_out: Mask, allowed: Mask | None) -> bool:
        """Whether ``count`` new pods like ``pod`` fit: counted by their requests on the nodes
        that admit the first when their requests alone decide
        (:func:`~tuner.model.demand.counted_alike`) or for one pod; else placed one by one where
        the scheduler would put them, each judged under its rules (a spread or an
        anti-affinity counts the ones placed before it), in a fork reverted after (each
        workload's step on its own)."""
        if count == 1 or counted_alike(pod.constraints):
            return self.snapshot.count_fitting(pod, self._admits(pod, kept_out, allowed)) >= count
        return self._steps_fit(((pod, count),), kept_out, allowed)

    def _steps_fit(
        self, steps: Sequence[tuple[Pod, int]], kept_out: Mask, allowed: Mask | None
    ) -> bool:
        """Whether the ``steps`` fit all together, their pods placed one after another where the
        scheduler would put them, in a fork reverted after."""
        snap = self.snapshot
        with snap.forked():
            for pod, count in steps:
                for _ in range(count):
                    mask = self._admits(pod, kept_out, allowed)
                    if not mask.any():
                        return False
                    snap.place(pod, snap.best_fit(pod, mask))
        return True

    def _admits(self, pod: Pod, kept_out: Mask, allowed: Mask | None) -> Mask:
        """The nodes a new pod may go to now: open ones it fits (the ``allowed`` ones, None:
        every one) and the ``kept_out`` ones the scheduler still places new pods on."""
        mask = self.snapshot.fit_mask(pod, reopened=kept_out)
        return mask if allowed is None else mask & (allowed | kept_out)

    def commit(self, drain: DrainOutcome) -> None:
        """Keep a drain: its nodes closed and its moves made in the snapshot, the totals
        updated (call in the search's fork, not in :meth:`trying`)."""
        snap = self.snapshot
        for name in drain.nodes:
            snap.close(name)
        for move, source in zip(drain.moves, drain.sources, strict=True):
            snap.move(move.pod, source, move.node)
            self.residents[move.node].append(move.pod)
            if source not in drain.nodes:  # a make-room move
                self.residents[source].remove(move.pod)
        lost = Resources.total([snap.node(n).allocatable for n in drain.nodes])
        for name in drain.nodes:
            self.residents[name] = []
        self.totals = Totals(
            requested=self.totals.requested - drain.vanishing,
            allocatable=self.totals.allocatable - lost,
            usable=self.totals.usable + drain.usable,
        )


class Found(Protocol):
    """What removal or replace found: the change and what it saves per hour."""

    @property
    def change(self) -> DesiredChange: ...

    @property
    def saving(self) -> float: ...


def proposal_of(
    option: Choice,
    context: Context,
    found: Found | None,
    reason: str,
    refusal: Refusal | None,
    limited: str | None = None,
) -> Proposal:
    """The proposal of a drain search's result (its refusal when it found nothing)."""
    if found is None:
        return Proposal.refused(option, refusal or Refusal.NO_ROOM, reason, limited)
    cost = context.current - found.saving
    return Proposal(option, cost, found.change, reason, limited=limited)


def _size(pod: Pod) -> tuple[int, int]:
    return (pod.requests.cpu, pod.requests.memory)
