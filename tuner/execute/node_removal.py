"""Removing a node the transition has emptied of movable pods: the check refuses a node the
model's rules refuse (read now) or one holding a pod that may not move; the step evicts what is
left (DaemonSet and mirror pods, and finished ones, excepted), each eviction an Event about its
pod, waits until the node is empty and removes it per ``execute.node_removal``: deletes the Node
object, runs the provider's command, or hands it over to the cluster autoscaler."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.execute import checks
from tuner.execute.command import run_command
from tuner.execute.drain import drained
from tuner.execute.events import Event, Ref, Sink
from tuner.execute.kube import now_iso
from tuner.execute.marks import hand_over
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.execute.step import Done, Gone
from tuner.plan.actions import RemoveNode


def check_remove_node(kube: KubePort, action: RemoveNode) -> NodeRemoval | Gone:
    """The node is not refused and every pod to evict may move (a node already gone needs
    nothing)."""
    name = action.node
    node = kube.node(name)
    if node is None:
        return Gone(f"node {name}")
    refusal = checks.node_refusal(kube.serialize(node))
    if refusal:
        raise ActionFailed(refusal)
    pods = tuple(p for p in kube.pods_on(name) if checks.to_evict(kube.serialize(p)))
    for pod in pods:
        refusal = checks.not_movable(kube.serialize(pod))
        if refusal:
            raise ActionFailed(f"node {name} cannot be emptied: {refusal}")
    return NodeRemoval(name, pods, kube.settings.node_removal)


@dataclass(frozen=True)
class NodeRemoval:
    """Evict what is left on the node (DaemonSet, mirror and finished pods excepted), each
    eviction an Event about its pod, then remove the node per ``execute.node_removal``. The
    transition cordoned
    and tainted it before its first move (:class:`~tuner.execute.drain.Drain`, which also undoes
    that when this fails); the drain is re-asserted here first (no write when it holds)."""

    node: str
    pods: tuple[Any, ...]
    mode: str

    def would(self) -> str:
        """What :meth:`apply` would do."""
        pods, node = len(self.pods), self.node
        return f"would evict {pods} pod(s) from node {node}, then {_disposal(self.mode)}"

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Carry the node removal out, verified."""
        name, mode = self.node, self.mode
        drained(kube, name, time.time())
        for pod in self.pods:
            kube.evict(pod)
            events.record(eviction_event(pod, name))
        verdict = kube.wait_pods_on(name, checks.drained, what=f"node {name} to be emptied")
        if not verdict.ok:
            raise ActionFailed(verdict.reason)
        if mode == "delete-node":
            kube.delete_node(name)
            return Done(_gone(kube, name, "deleted"))
        if mode == "command":
            command = _run_command(kube, name)
            _leave_for_removal(kube, name)
            return Done(_gone(kube, name, f"removed by the provider command ({command})"))
        _leave_for_removal(kube, name)
        return Done(
            f"node {name} emptied and left cordoned for the cluster autoscaler to remove",
            reason=LEFT_FOR_AUTOSCALER,
        )


LEFT_FOR_AUTOSCALER = "LeftForAutoscaler"


def eviction_event(pod: Any, node: str) -> Event:
    """The Event about a pod a node's drain evicted."""
    meta = pod.metadata
    regarding = Ref("v1", "Pod", meta.name, meta.namespace, str(meta.uid or ""))
    note = f"evicted (Eviction API) to empty node {node}, which the tuner removes"
    return Event(regarding, "Evict", "Evicted", note, related=Ref.node(node))


def _disposal(mode: str) -> str:
    return {
        "delete-node": "delete the Node object",
        "autoscaler": "leave it cordoned for the cluster autoscaler",
        "command": "run the provider command",
    }[mode]


def _gone(kube: KubePort, name: str, how: str) -> str:
    verdict = kube.wait_node_gone(name, kube.settings.verify_timeout_s)
    if not verdict.ok:
        raise ActionFailed(verdict.reason)
    return f"node {name} {how}"


def _leave_for_removal(kube: KubePort, name: str) -> None:
    """Hand the cordoned node over (:func:`~tuner.execute.marks.hand_over`): it is someone
    else's now (already gone is fine: a provider command may delete it at once)."""
    when = now_iso()
    kube.patch_node(name, lambda n: hand_over(n, kube.keys, when))


def _run_command(kube: KubePort, node: str) -> str:
    """Run ``execute.node_removal_command`` for the node; the program, as the outcome names it
    (not its arguments, which may hold what an Event should not show)."""
    argv = [*kube.settings.node_removal_command, node]
    run_command(argv, "node removal command", kube.settings.verify_timeout_s)
    return Path(argv[0]).name
