"""The Event for each action the executor carried out, or that failed (:mod:`.events`).

It is about what the action acts on: the pod a migrate or remove moves or takes away, the
Deployment or ReplicaSet an add scales, the node a remove_node empties, the node a
provision_node obtained (its placeholder pod when it failed); a migrate's or add's destination
node is the related object.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tuner.execute.events import Event, Ref
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
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


def action_event(action: Action, regarding: Ref, outcome: str, *, ok: bool) -> Event:
    """The Event on an action that was verified (``ok``) or failed, ``outcome`` saying how."""
    reasons = REASONS[type(action)]
    related = Ref.node(action.target) if isinstance(action, Migrate | Add) else None
    return Event(
        regarding,
        reasons.action,
        reasons.done if ok else reasons.failed,
        f"{describe(action)}: {outcome}",
        warning=not ok,
        related=related,
    )
