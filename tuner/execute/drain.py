"""Drain like the autoscalers: the nodes a transition empties are made unschedulable before its
first pod moves, and given back when it stops short.

The Cluster Autoscaler taints a node ``ToBeDeletedByClusterAutoscaler=<epoch seconds>:NoSchedule``
before it evicts the node's pods, and Karpenter taints its candidates
``karpenter.sh/disrupted:NoSchedule`` before it launches their replacements; both remove the
taint again when the disruption fails. :class:`Drain` does the same for every node a plan's
``remove_node`` actions empty: before the first action that moves, adds or removes a pod (after
the transition's provisions, which may take minutes, so the nodes stay usable meanwhile) each is
cordoned and tainted ``<prefix>/draining=<epoch seconds>:NoSchedule``
(:func:`~tuner.execute.marks.drain_node`: recorded on the node, so a rollback, or
:func:`~tuner.execute.recover.recover` after a crash, takes back exactly that). No replacement
pod of a migration can land on a node the transition will empty, so none is evicted twice; a
pod that tolerates every taint still can, and the migration's verification fails it
(:func:`~tuner.execute.checks.new_pod_on`). When the transition ends before a node's
``remove_node`` handed it over (a failure, a stop request), its cordon and taint are undone.
Each mark and each undo is an Event on the node: ``Cordoned``, ``Uncordoned``; a node that may
not be drained (another autoscaler's deletion taint) fails the transition before any pod moved,
with a ``CordonFailed`` Warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from tuner.execute import checks
from tuner.execute.events import Event, Ref, Sink
from tuner.execute.marks import Patch, drain_node, undo_node
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.plan.actions import Action, emptied, first_move

log = logging.getLogger(__name__)

ACTION = "Drain"


class DrainFailed(ActionFailed):
    """A node the transition empties could not be cordoned: no pod has moved."""


def mark(kube: KubePort, name: str, build: Callable[[Any], Patch | None]) -> None:
    """Apply a marks patch to a node; a refusal of the builder (``ValueError``) or a node
    that is gone fails the action."""
    if kube.patch_node(name, _checked(build)) is None:
        raise ActionFailed(f"node {name} is gone")


def _checked(build: Callable[[Any], Patch | None]) -> Callable[[Any], Patch | None]:
    def checked(node: Any) -> Patch | None:
        try:
            return build(node)
        except ValueError as err:
            raise ActionFailed(str(err)) from err

    return checked


def unmark(kube: KubePort, name: str) -> bool:
    """Undo every change the tuner recorded on a node, unless it is being deleted or was handed
    over to an autoscaler or a provider command (then it is theirs); whether there was one to
    undo. A failure is logged (:func:`~tuner.execute.recover.recover` undoes it later)."""
    keys = kube.keys

    def build(node: Any) -> Patch | None:
        if node.metadata.deletion_timestamp or keys.left_for_removal in (
            node.metadata.annotations or {}
        ):
            return None
        return undo_node(node, keys)

    try:
        return kube.patch_node(name, build) is not None
    except ActionFailed as err:
        log.error("could not undo the changes on node %s (the next recovery will): %s", name, err)
        return False


def drained(kube: KubePort, name: str, since: float) -> None:
    """Cordon one node and give it the tuner's taint (valued ``since``), unless it carries
    both already (no write then) or another autoscaler is removing it (fails). A node that is
    gone needs nothing."""
    keys = kube.keys

    def build(node: Any) -> Patch | None:
        refusal = checks.node_refusal(kube.serialize(node))
        if refusal:
            raise ValueError(refusal)
        tainted = any(t.key == keys.taint for t in node.spec.taints or ())
        if node.spec.unschedulable and tainted:
            return None
        return drain_node(node, keys, since)

    kube.patch_node(name, _checked(build))


def would(kube: KubePort, nodes: Sequence[str]) -> str:
    """The dry run's account of the drain of ``nodes``: what it would do, or why it would
    fail now (reads only: another autoscaler acting on one of them)."""
    for name in nodes:
        node = kube.node(name)
        refusal = None if node is None else checks.node_refusal(kube.serialize(node))
        if refusal:
            raise ActionFailed(f"node {name} would not be cordoned: {refusal}")
    taint = f"{kube.keys.taint}=<now>:NoSchedule"
    return (
        f"would cordon node(s) {', '.join(nodes)} and taint them {taint} so that no pod lands "
        "there any more, undone if the transition stops before removing them"
    )


class Drain:
    """The nodes one transition empties: marked before its first pod moves (:meth:`before`),
    handed over by their ``remove_node`` (:meth:`handed_over`), given back otherwise
    (:meth:`release`)."""

    def __init__(self, kube: KubePort, events: Sink, actions: Sequence[Action]) -> None:
        self.kube = kube
        self.events = events
        self.nodes = emptied(actions)
        self.first = first_move(actions)
        self.marked: list[str] = []
        """Marked by this transition and not handed over yet."""

    def before(self, index: int) -> None:
        """Mark every node when action ``index`` is the plan's first move; raises
        :class:`DrainFailed` when one cannot be marked (those marked are kept for
        :meth:`release`)."""
        if index != self.first or not self.nodes:
            return
        since = time.time()
        taint = f"{self.kube.keys.taint}={int(since)}:NoSchedule"
        for name in self.nodes:
            if self.kube.node(name) is None:
                continue  # already gone: its remove_node has nothing to do
            try:
                drained(self.kube, name, since)
            except ActionFailed as err:
                self._event(name, "CordonFailed", f"not cordoned: {err}", warning=True)
                why = f"node {name} not cordoned before the first move: {err}"
                raise DrainFailed(why) from err
            self.marked.append(name)
            note = (
                f"cordoned and tainted {taint} before the first pod moves: the tuner empties "
                "this node (remove_node), no pod may land on it"
            )
            log.info("node %s %s", name, note)
            self._event(name, "Cordoned", note)

    def handed_over(self, node: str) -> None:
        """The node's ``remove_node`` was verified: it is deleted or someone else's now."""
        if node in self.marked:
            self.marked.remove(node)

    def release(self, why: str) -> None:
        """Undo the cordon and taint of every node still marked (the transition stopped short)."""
        for name in self.marked:
            if unmark(self.kube, name):
                note = f"cordon and taint undone: {why}"
                log.warning("node %s: %s", name, note)
                self._event(name, "Uncordoned", note)
        self.marked = []

    def _event(self, node: str, reason: str, note: str, *, warning: bool = False) -> None:
        self.events.record(Event(Ref.node(node), ACTION, reason, note, warning=warning))
