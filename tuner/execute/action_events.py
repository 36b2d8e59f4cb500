"""The Event for each action the executor carried out, or that failed (:mod:`.events`).

It is about what the action acts on: the pod a migrate or remove moves or takes away, the
Deployment or ReplicaSet an add scales, the node a remove_node empties, the node a
provision_node obtained (its placeholder pod when it failed). A verified migrate's or add's
related object is the node its new pod really landed on (a workload that is not onboarded lands
where the scheduler puts it), a failed one's the planned destination. A node a remove_node
left for the autoscaler is ``LeftForAutoscaler``, not ``NodeRemoved``: it is still there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tuner.execute.events import Event, Ref
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.execute.step import Done
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode
from tuner.report.text import describe


@dataclass(frozen=True)
class _Reasons:
    action: str
    done: str
    failed: str


REASONS: dict[type, _Reasons] = {
    Migrate: _Reasons("Migrate", "Migrated", "MigrationFailed"),
    Add: _Reasons("Add", "Added", "AddFailed"),
    Remove: _Reasons("Remove", "Removed", "RemoveFailed"),
    RemoveNode: _Reasons("RemoveNode", "NodeRemoved", "NodeRemovalFailed"),
    ProvisionNode: _Reasons("ProvisionNode", "NodeProvisioned", "NodeProvisionFailed"),
}


def subject(action: Action) -> Ref:
    """What the action acts on (without its uid). A provision's provisional node does not
    exist: the runner puts the transition's journal, then the placeholder pod or the node
    obtained in its place (:class:`~tuner.execute.provision.Provisioning`)."""
    match action:
        case Migrate(pod=pod) | Remove(pod=pod):
            return Ref("v1", "Pod", pod.name, pod.namespace)
        case Add(workload=workload):
            return Ref("apps/v1", workload.kind, workload.name, workload.namespace)
        case RemoveNode(node=node) | ProvisionNode(node=node):
            return Ref.node(node)


def identified(kube: KubePort, ref: Ref) -> Ref:
    """``ref`` with the uid of the live object (``kubectl describe`` matches on it), read
    before the action changes it; unchanged when it cannot be read."""
    if ref.uid:
        return ref
    reads = {"Pod": kube.pod, "Deployment": kube.deployment, "ReplicaSet": kube.replica_set}
    read = reads.get(ref.kind)
    if read is None:
        return ref
    try:
        obj = read(ref.namespace, ref.name)
    except ActionFailed:
        return ref
    return ref if obj is None else replace(ref, uid=str(obj.metadata.uid))


def action_event(action: Action, regarding: Ref, outcome: Done | str) -> Event:
    """The Event on an action that was verified (``outcome``: how it went) or failed
    (``outcome``: why)."""
    reasons = REASONS[type(action)]
    ok = isinstance(outcome, Done)
    related = None
    if isinstance(action, Migrate | Add):
        landed = outcome.landed if isinstance(outcome, Done) else None
        related = Ref.node(landed or action.target)
    if isinstance(outcome, Done):
        reason, note = outcome.reason or reasons.done, outcome.note
    else:
        reason, note = reasons.failed, outcome
    return Event(
        regarding,
        reasons.action,
        reason,
        f"{describe(action)}: {note}",
        warning=not ok,
        related=related,
    )
