"""Each action of a plan as a :class:`~tuner.execute.step.Step`: :func:`check` makes the reads
and refusals (all a dry run needs: the pod, node or workload read fresh and asked the model's
rules again, :mod:`.checks`) and returns the step whose ``apply`` carries the action out and
verifies it. A migrate evicts the pod and waits for its replacement to be Ready off its source
and off the nodes the transition empties (aimed at its destination, verified wherever the
scheduler put it), alone or in a wave with the migrations next to it in the plan
(:func:`together`: all evicted, then their replacements awaited); the lone pod of a Deployment
whose rollout surges moves by a restart instead, its new pod started first (:mod:`.surge`); an
add scales +1 and waits for the new pod the same way; a remove makes its pod the cheapest to
delete, scales −1 and verifies that exactly that pod went; an add or remove that fails its
verification scales back.
A node's removal is :mod:`.node_removal`, a provision :mod:`.provision`.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, replace
from time import monotonic
from typing import Any

from tuner.execute import checks
from tuner.execute.affinity import has_preference
from tuner.execute.events import Sink
from tuner.execute.landing import (
    Landing,
    avoided,
    marked,
    marks_said,
    not_onboarded,
    onto,
    verified,
)
from tuner.execute.node_removal import check_remove_node
from tuner.execute.port import KubePort
from tuner.execute.provision import check_provision, pending_target
from tuner.execute.retry import ActionFailed, failure
from tuner.execute.scaling import Scaled, restore, settled, take, withdraw
from tuner.execute.step import Done, Gone, Step
from tuner.execute.surge import SurgeMove, surge_of
from tuner.execute.watch import Verification
from tuner.model.movability import MOVABLE_OWNERS
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode, provisional

log = logging.getLogger(__name__)


def check(
    kube: KubePort,
    action: Action,
    bindings: MutableMapping[str, str] | None = None,
    draining: frozenset[str] = frozenset(),
) -> Step:
    """The reads and refusals of one action (no change to the cluster). ``action`` names
    real nodes where the transition has bound provisional ones (:func:`.provision.resolved`);
    a provision records its binding in ``bindings``. A migrate or add onto a provisional node
    not bound yet (a dry run) is checked but for its destination. ``draining``: the nodes the
    transition empties (:mod:`.drain`), where no new pod may land."""
    step: Step
    match action:
        case Migrate():
            step = check_migrate(kube, action, draining)
        case Add():
            step = check_add(kube, action, draining)
        case Remove():
            return check_remove(kube, action)
        case RemoveNode(node=node) if provisional(node):
            raise ActionFailed(f"node {node} was not provisioned in this transition")
        case RemoveNode():
            return check_remove_node(kube, action)
        case ProvisionNode():
            return check_provision(kube, action, {} if bindings is None else bindings)
    pending = pending_target(action)
    return step if pending is None else OnProvisioned(step, pending)


@dataclass(frozen=True)
class OnProvisioned:
    """A migrate or add onto a node the transition has yet to provision."""

    step: Step
    node: str

    def would(self) -> str:
        """What the step would do once the node is there."""
        return f"would run on the node provisioned as {self.node}: {self.step.would()}"

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Refused: no node was bound to the provisional name."""
        raise ActionFailed(f"node {self.node} was not provisioned in this transition")


# ------------------------------------------------------------------ reads/checks --
def _gone(pod: Any) -> bool:
    """The pod is deleted or being deleted."""
    return pod is None or bool(pod.metadata.deletion_timestamp)


def _pod(kube: KubePort, namespace: str, name: str, node: str | None) -> Any:
    return _present(kube, kube.pod(namespace, name), namespace, name, node)


def _present(kube: KubePort, pod: Any, namespace: str, name: str, node: str | None) -> Any:
    """The pod read, refused when it is gone, not on ``node`` or not movable."""
    if _gone(pod):
        raise ActionFailed(f"pod {namespace}/{name} is gone")
    if node and pod.spec.node_name != node:
        raise ActionFailed(f"pod {namespace}/{name} is on {pod.spec.node_name}, not {node}")
    refusal = checks.not_movable(kube.serialize(pod))
    if refusal:
        raise ActionFailed(refusal)
    return pod


def _workload_of(kube: KubePort, pod: Any) -> tuple[Any, str, str]:
    """(ReplicaSet, kind, name) of the workload that owns a ReplicaSet pod."""
    namespace = pod.metadata.namespace
    rs_name = (checks.owner(pod) or ("", ""))[1]
    rs = kube.replica_set(namespace, rs_name)
    if rs is None:
        raise ActionFailed(f"replicaset {namespace}/{rs_name} of pod {pod.metadata.name} is gone")
    kind, name = checks.owner(rs) or ("ReplicaSet", rs_name)
    if kind not in MOVABLE_OWNERS:
        raise ActionFailed(f"replicaset {namespace}/{rs_name} is owned by a {kind}")
    return rs, kind, name


def _scalable(kube: KubePort, namespace: str, kind: str, name: str) -> Any:
    """The Deployment/ReplicaSet to scale; refused when an HPA owns its replica count."""
    if kind not in MOVABLE_OWNERS:
        raise ActionFailed(f"cannot add or remove instances of a {kind}")
    hpa = kube.hpa_scales(namespace, kind, name)
    if hpa:
        raise ActionFailed(
            f"{kind} {namespace}/{name} is scaled by HPA {hpa}: add/remove refused "
            "(the HPA would revert it)"
        )
    read = kube.deployment if kind == "Deployment" else kube.replica_set
    obj = read(namespace, name)
    if obj is None:
        raise ActionFailed(f"{kind} {namespace}/{name} is gone")
    return obj


def _destination(kube: KubePort, name: str) -> Any:
    node = kube.node(name)
    if node is None:
        raise ActionFailed(f"node {name} is gone")
    refusal = checks.destination_refusal(kube.serialize(node))
    if refusal:
        raise ActionFailed(refusal)
    return node


def _affinity(api_obj: Any, kube: KubePort) -> dict[str, Any] | None:
    affinity = api_obj.affinity if api_obj is not None else None
    return None if affinity is None else kube.serialize(affinity)


def _uids(pods: list[Any]) -> frozenset[str]:
    return frozenset(p.metadata.uid for p in pods)


def check_migrate(
    kube: KubePort, action: Migrate, draining: frozenset[str]
) -> Migration | SurgeMove | Gone:
    """The pod is there and movable, its workload known, the destination open; or it is gone
    (:class:`Gone`). The lone pod of a Deployment whose rollout surges moves by a restart
    (:class:`~.surge.SurgeMove`), any other by its eviction."""
    namespace, target = action.pod.namespace, action.target
    pod = kube.pod(namespace, action.pod.name)
    if _gone(pod):
        return Gone(f"pod {namespace}/{action.pod.name}")
    pod = _present(kube, pod, namespace, action.pod.name, action.source)
    rs, kind, workload = _workload_of(kube, pod)
    if not provisional(target):
        _destination(kube, target)
    label = kube.keys.workload_label(namespace, workload)
    onboarded = has_preference(_affinity(pod.spec, kube), label)
    source = pod.spec.node_name
    landing = Landing(
        namespace,
        checks.selector_text(rs.spec.selector),
        target,
        label,
        onboarded,
        avoided(draining, source),
    )
    cordon = None if source in draining else source
    deployment = surge_of(kube, namespace, workload) if kind == "Deployment" else None
    if deployment is not None:  # its new pod is another ReplicaSet's: the Deployment's selector
        whole = replace(landing, selector=checks.selector_text(deployment.spec.selector))
        return SurgeMove(pod, deployment, whole, f"{namespace}/{workload}", cordon)
    return Migration(pod, landing, f"{namespace}/{workload}", cordon)


@dataclass(frozen=True)
class Migration:
    """Evict the pod and verify its replacement is Ready on a node that is neither its source
    nor one the transition empties. For an onboarded workload the destination is labelled
    first: the replacement is aimed there, but the label is a preferred affinity, only a score,
    which the scheduler's other scores (the default topology spreading, resource fit, the pod's
    own preferences) can outweigh; a replacement Ready on a third node is verified and reported
    as landed elsewhere (:attr:`~.step.Done.elsewhere`), as the Cluster Autoscaler and Karpenter
    trust the scheduler with the pods they drain. Either way the source is cordoned and tainted
    for the move unless the transition already did, so that no score sends the replacement
    back to it."""

    pod: Any
    landing: Landing
    workload: str
    cordon: str | None
    """The source, when the move must cordon it (None: a node the transition empties, cordoned
    already)."""

    def would(self) -> str:
        """What :meth:`apply` would do."""
        namespace, name = self.pod.metadata.namespace, self.pod.metadata.name
        landing = self.landing
        first, last = marks_said(landing, self.cordon)
        return (
            f"would {first}evict pod {namespace}/{name}, wait for its replacement to be "
            f"{landing.wait()}{last}{not_onboarded(landing.onboarded, self.workload)}"
        )

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Carry the migration out, verified (a wave of one: :func:`together`)."""
        (outcome,) = together(kube, [self])
        if isinstance(outcome, ActionFailed):
            raise outcome
        return outcome


def together(kube: KubePort, members: Sequence[Migration]) -> list[Done | ActionFailed]:
    """Carry a wave of migrations out (:mod:`tuner.plan.waves`), each verified as
    :class:`Migration` says: take each workload's pods before any eviction, label the onboarded
    members' destinations and cordon their sources (each node once), evict the members one after
    the other (the first eviction that fails is the last: no later member starts), then await
    per workload as many new pods Ready off every started member's source and the nodes being
    emptied as members of it started (:func:`~.checks.new_pod_on`), every wait within one
    ``verify_timeout_s`` from the last eviction (the replacements start together, so a wave
    takes no longer to fail than one move); undo every mark whatever happens. The outcome of
    each member started, in order (a failed eviction's the last)."""
    workloads: dict[tuple[str, str], list[int]] = {}
    for index, member in enumerate(members):
        workloads.setdefault((member.landing.namespace, member.landing.selector), []).append(index)
    before = {key: _uids(kube.pods(*key)) for key in workloads}
    outcomes: dict[int, Done | ActionFailed] = {}
    with marked(kube, (m.landing for m in members), (m.cordon for m in members)):
        started = 0
        for member in members:
            try:
                kube.evict(member.pod)
            except Exception as err:  # a refusal or an unexpected answer: no later member
                outcomes[started] = failure(err)
                break
            started += 1
        deadline = monotonic() + kube.settings.verify_timeout_s
        for (namespace, selector), indexes in workloads.items():
            moved = [(i, members[i]) for i in indexes if i < started]
            if not moved:
                continue
            avoid = {node: why for _, m in moved for node, why in m.landing.avoid.items()}
            names = ", ".join(f"{m.pod.metadata.namespace}/{m.pod.metadata.name}" for _, m in moved)
            what = (
                f"the replacement{'s' if len(moved) > 1 else ''} of {names} (the wave's "
                f"{kube.settings.verify_timeout_s:g} s from its last eviction)"
            )
            try:
                check = checks.new_pod_on(before[(namespace, selector)], avoid, len(moved))
                left = max(0.0, deadline - monotonic())
                verdict = kube.wait_pods(namespace, selector, check, what=what, timeout_s=left)
            except Exception as err:  # a read that failed: these members failed
                verdict = Verification(False, str(failure(err)))
            for (i, member), share in zip(moved, _shares(verdict, moved), strict=True):
                try:
                    outcomes[i] = verified(share, member.landing, member.workload)
                except ActionFailed as err:
                    outcomes[i] = err
    return [outcomes[i] for i in sorted(outcomes)]


def _shares(verdict: Verification, moved: Sequence[tuple[int, Migration]]) -> list[Verification]:
    """Each member's part of its workload's verdict: a failure fails them all; a member whose
    destination got a Ready new pod gets that one, the others the remaining ones (landed
    elsewhere), in plan order, and any left without one a pod that went before it was Ready."""
    if not verdict.ok:
        return [verdict] * len(moved)
    left = list(verdict.ready_on)
    pods: dict[int, tuple[str, str]] = {}
    for i, member in moved:
        own = next((pod for pod in left if pod[1] == member.landing.target), None)
        if own is not None:
            left.remove(own)
            pods[i] = own
    for i, _ in moved:
        if i not in pods and left:
            pods[i] = left.pop(0)
    gone = Verification(True, "the new pod went before it was Ready (scaled in)")
    return [
        Verification(True, f"pod {pods[i][0]} is Ready on {pods[i][1]}", pods[i][1])
        if i in pods
        else gone
        for i, _ in moved
    ]


def check_add(kube: KubePort, action: Add, draining: frozenset[str]) -> PodAddition:
    """The workload is scalable (no HPA owns it), the destination open."""
    wl, target = action.workload, action.target
    obj = _scalable(kube, wl.namespace, wl.kind, wl.name)
    if not provisional(target):
        _destination(kube, target)
    label = kube.keys.workload_label(wl.namespace, wl.name)
    onboarded = has_preference(_affinity(obj.spec.template.spec, kube), label)
    replicas = kube.replicas(wl.kind, wl.namespace, wl.name)
    selector = checks.selector_text(obj.spec.selector)
    scaled = Scaled(wl.kind, wl.namespace, wl.name, selector)
    landing = Landing(wl.namespace, selector, target, label, onboarded, avoided(draining))
    return PodAddition(scaled, f"{wl.namespace}/{wl.name}", landing, replicas)


@dataclass(frozen=True)
class PodAddition:
    """Scale +1 and verify the new pod is Ready off the nodes the transition empties (aimed at
    the labelled destination for an onboarded workload; elsewhere it is verified and reported
    as landed elsewhere, as for a :class:`Migration`); when the verification fails, scale back
    taking the new pod."""

    scaled: Scaled
    workload: str
    landing: Landing
    replicas: int

    def would(self) -> str:
        """What :meth:`apply` would do."""
        landing, replicas = self.landing, self.replicas
        first = last = ""
        if landing.onboarded:
            first, last = f"label node {landing.target} {landing.label}, ", ", unlabel"
        return (
            f"would {first}scale {self.scaled} {replicas} -> {replicas + 1}, wait for the new "
            f"pod to be {landing.wait()}{last}{not_onboarded(landing.onboarded, self.workload)}"
        )

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Carry the addition out, verified (rolled back when it fails)."""
        scaled, replicas, landing = self.scaled, self.replicas, self.landing
        before = _uids(kube.pods(scaled.namespace, scaled.selector))
        scaled.journal(kube, replicas, replicas + 1, before)
        verdict = onto(
            kube,
            landing,
            before,
            lambda: scaled.scale(kube, replicas, replicas + 1),
            f"a new pod of {self.workload}",
        )
        if not verdict.ok:
            raise ActionFailed(f"{verdict.reason}; {withdraw(kube, scaled, before, replicas)}")
        settled(kube)
        return verified(verdict, landing, self.workload)


def check_remove(kube: KubePort, action: Remove) -> PodRemoval:
    """The pod is there and movable, its workload scalable (no HPA owns it)."""
    namespace, name = action.pod.namespace, action.pod.name
    pod = _pod(kube, namespace, name, action.pod.node)
    _, kind, workload = _workload_of(kube, pod)
    obj = _scalable(kube, namespace, kind, workload)
    replicas = kube.replicas(kind, namespace, workload)
    return PodRemoval(
        pod, Scaled(kind, namespace, workload, checks.selector_text(obj.spec.selector)), replicas
    )


@dataclass(frozen=True)
class PodRemoval:
    """Give the pod the lowest pod-deletion-cost, scale −1, verify exactly that pod went; when
    another pod went instead (or none), scale back."""

    pod: Any
    scaled: Scaled
    replicas: int

    def would(self) -> str:
        """What :meth:`apply` would do."""
        name = f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"
        return (
            f"would set the lowest pod-deletion-cost on {name}, scale {self.scaled} "
            f"{self.replicas} -> {self.replicas - 1}, verify exactly that pod went"
        )

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Carry the removal out, verified (rolled back when it fails)."""
        scaled, replicas = self.scaled, self.replicas
        scaled.journal(kube, replicas, replicas - 1)
        verdict = take(kube, scaled, self.pod, replicas, rollback=False)
        if not verdict.ok:
            raise ActionFailed(f"{verdict.reason}; {restore(kube, scaled, replicas)}")
        settled(kube)
        name = f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"
        return Done(f"pod {name} removed ({scaled} at {replicas - 1})")
