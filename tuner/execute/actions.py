from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from tuner.execute import checks
from tuner.execute.affinity import has_preference
from tuner.execute.command import run_command
from tuner.execute.kube import now_iso, selector_text
from tuner.execute.marks import drain_node, hand_over, label_node, undo_node
from tuner.execute.port import KubePort
from tuner.execute.provision import check_provision, pending_target
from tuner.execute.retry import ActionFailed
from tuner.execute.scaling import Scaled, restore, settled, take, undo, withdraw
from tuner.execute.watch import Verdict
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode, provisional

log = logging.getLogger(__name__)

SCALABLE = ("Deployment", "ReplicaSet")


class Step(Protocol):
    """An action that passed its checks, with what they read."""

    def would(self) -> str:
        """What applying it would do (a dry run's account)."""

    def apply(self, kube: KubePort) -> str:
        """Carry it out, verified; how it went, or :class:`ActionFailed`."""


def check(kube: KubePort, action: Action, bindings: MutableMapping[str, str] | None = None) -> Step:
    """The reads and refusals of one action (no change to the cluster). ``action`` names
    real nodes where the transition has bound provisional ones (:func:`.provision.resolved`);
    a provision records its binding in ``bindings``. A migrate or add onto a provisional node
    not bound yet (a dry run) is checked but for its destination."""
    step: Step
    match action:
        case Migrate():
            step = check_migrate(kube, action)
        case Add():
            step = check_add(kube, action)
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

    def apply(self, kube: KubePort) -> str:
        """Refused: no node was bound to the provisional name."""
        raise ActionFailed(f"node {self.node} was not provisioned in this transition")


# ------------------------------------------------------------------ reads/checks --
def _pod(kube: KubePort, namespace: str, name: str, node: str | None) -> Any:
    pod = kube.pod(namespace, name)
    if pod is None or pod.metadata.deletion_timestamp:
        raise ActionFailed(f"pod {namespace}/{name} is gone")
    if node and pod.spec.node_name != node:
        raise ActionFailed(f"pod {namespace}/{name} is on {pod.spec.node_name}, not {node}")
    refusal = checks.not_movable(pod)
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
    if kind not in SCALABLE:
        raise ActionFailed(f"replicaset {namespace}/{rs_name} is owned by a {kind}")
    return rs, kind, name


def _scalable(kube: KubePort, namespace: str, kind: str, name: str) -> Any:
    """The Deployment/ReplicaSet to scale; refused when an HPA owns its replica count."""
    if kind not in SCALABLE:
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
    if node.spec.unschedulable:
        raise ActionFailed(f"node {name} is cordoned")
    refusal = checks.node_refusal(node)
    if refusal:
        raise ActionFailed(refusal)
    return node


def _affinity(api_obj: Any, kube: KubePort) -> dict[str, Any] | None:
    affinity = api_obj.affinity if api_obj is not None else None
    return None if affinity is None else kube.serialize(affinity)


def _uids(pods: list[Any]) -> frozenset[str]:
    return frozenset(p.metadata.uid for p in pods)


# -------------------------------------------------------------- cleanup helpers --
def _undo_node_changes(kube: KubePort, node: str) -> None:
    undo(
        f"the changes on node {node}",
        lambda: kube.patch_node(node, lambda n: undo_node(n, kube.keys)),
    )


def _marked_node(kube: KubePort, name: str, build: Callable[[Any], Any]) -> None:
    def checked(node: Any) -> Any:
        try:
            return build(node)
        except ValueError as err:
            raise ActionFailed(str(err)) from err

    if kube.patch_node(name, checked) is None:
        raise ActionFailed(f"node {name} is gone")


@dataclass(frozen=True)
class _Landing:
    """Where a migrated or added pod must land: the workload's pods (namespace and label
    selector), the destination, its workload label, and whether the workload is onboarded
    (then a pod elsewhere fails the verification)."""

    namespace: str
    selector: str
    target: str
    label: str
    onboarded: bool


def _onto(
    kube: KubePort, landing: _Landing, before: frozenset[str], start: Callable[[], None], what: str
) -> Verdict:
    """Label the destination, ``start`` a new pod (evict or scale up), wait for a pod not in
    ``before`` to be Ready there, unlabel whatever happens."""
    target = landing.target
    _marked_node(kube, target, lambda n: label_node(n, kube.keys, landing.label))
    try:
        start()
        return kube.wait_pods(
            landing.namespace,
            landing.selector,
            checks.new_pod_on(before, target, strict=landing.onboarded),
            what=what,
        )
    finally:
        _undo_node_changes(kube, target)


# ----------------------------------------------------------------------- actions --
def _not_onboarded(onboarded: bool, workload: str) -> str:
    return "" if onboarded else f" (workload {workload} not onboarded: no placement control)"


def check_migrate(kube: KubePort, action: Migrate) -> Migration:
    """The pod is there and movable, its workload known, the destination open."""
    namespace, target = action.pod.namespace, action.target
    pod = _pod(kube, namespace, action.pod.name, action.source)
    rs, _, workload = _workload_of(kube, pod)
    if not provisional(target):
        _destination(kube, target)
    label = kube.keys.workload_label(namespace, workload)
    onboarded = has_preference(_affinity(pod.spec, kube), label)
    return Migration(pod, selector_text(rs.spec.selector), target, label, onboarded, workload)


@dataclass(frozen=True)
class Migration:
    """Label the destination, evict the pod, verify its replacement is Ready there, unlabel."""

    pod: Any
    selector: str
    target: str
    label: str
    onboarded: bool
    workload: str

    @property
    def note(self) -> str:
        """What the account adds for a workload that is not onboarded."""
        return _not_onboarded(self.onboarded, f"{self.pod.metadata.namespace}/{self.workload}")

    def would(self) -> str:
        """What :meth:`apply` would do."""
        namespace, name = self.pod.metadata.namespace, self.pod.metadata.name
        return (
            f"would label node {self.target} {self.label}, evict pod {namespace}/{name}, "
            f"wait for its replacement to be Ready on {self.target}, unlabel{self.note}"
        )

    def apply(self, kube: KubePort) -> str:
        """Carry the migration out, verified."""
        pod, target = self.pod, self.target
        namespace = pod.metadata.namespace
        before = _uids(kube.pods(namespace, self.selector))
        verdict = _onto(
            kube,
            _Landing(namespace, self.selector, target, self.label, self.onboarded),
            before,
            lambda: kube.evict(pod),
            f"the replacement of {namespace}/{pod.metadata.name} on {target}",
        )
        if not verdict.ok:
            raise ActionFailed(verdict.reason)
        return verdict.reason + self.note


def check_add(kube: KubePort, action: Add) -> Addition:
    """The workload is scalable (no HPA owns it), the destination open."""
    wl, target = action.workload, action.target
    obj = _scalable(kube, wl.namespace, wl.kind, wl.name)
    if not provisional(target):
        _destination(kube, target)
    label = kube.keys.workload_label(wl.namespace, wl.name)
    onboarded = has_preference(_affinity(obj.spec.template.spec, kube), label)
    replicas = kube.replicas(wl.kind, wl.namespace, wl.name)
    scaled = Scaled(wl.kind, wl.namespace, wl.name, selector_text(obj.spec.selector))
    return Addition(scaled, str(wl), target, label, onboarded, replicas)


@dataclass(frozen=True)
class Addition:
    """Label the destination, scale +1, verify the new pod is Ready there, unlabel; when the
    verification fails, scale back taking the new pod."""

    scaled: Scaled
    workload: str
    target: str
    label: str
    onboarded: bool
    replicas: int

    @property
    def note(self) -> str:
        """What the account adds for a workload that is not onboarded."""
        return _not_onboarded(self.onboarded, self.workload)

    def would(self) -> str:
        """What :meth:`apply` would do."""
        wl, replicas, target = self.workload, self.replicas, self.target
        return (
            f"would label node {target} {self.label}, scale {wl} {replicas} -> {replicas + 1}, "
            f"wait for the new pod to be Ready on {target}, unlabel{self.note}"
        )

    def apply(self, kube: KubePort) -> str:
        """Carry the addition out, verified (rolled back when it fails)."""
        scaled, replicas, target = self.scaled, self.replicas, self.target
        before = _uids(kube.pods(scaled.namespace, scaled.selector))
        scaled.journal(kube, replicas, replicas + 1, before)
        verdict = _onto(
            kube,
            _Landing(scaled.namespace, scaled.selector, target, self.label, self.onboarded),
            before,
            lambda: scaled.scale(kube, replicas, replicas + 1),
            f"a new pod of {self.workload} on {target}",
        )
        if not verdict.ok:
            raise ActionFailed(f"{verdict.reason}; {withdraw(kube, scaled, before, replicas)}")
        settled(kube)
        return verdict.reason + self.note


def check_remove(kube: KubePort, action: Remove) -> Removal:
    """The pod is there and movable, its workload scalable (no HPA owns it)."""
    namespace, name = action.pod.namespace, action.pod.name
    pod = _pod(kube, namespace, name, action.pod.node)
    _, kind, workload = _workload_of(kube, pod)
    obj = _scalable(kube, namespace, kind, workload)
    replicas = kube.replicas(kind, namespace, workload)
    return Removal(
        pod, Scaled(kind, namespace, workload, selector_text(obj.spec.selector)), replicas
    )


@dataclass(frozen=True)
class Removal:
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

    def apply(self, kube: KubePort) -> str:
        """Carry the removal out, verified (rolled back when it fails)."""
        scaled, replicas = self.scaled, self.replicas
        scaled.journal(kube, replicas, replicas - 1)
        verdict = take(kube, scaled, self.pod, replicas, rollback=False)
        if not verdict.ok:
            raise ActionFailed(f"{verdict.reason}; {restore(kube, scaled, replicas)}")
        settled(kube)
        name = f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"
        return f"pod {name} removed ({scaled} at {replicas - 1})"


def check_remove_node(kube: KubePort, action: RemoveNode) -> NodeRemoval | Gone:
    """The node is not refused and every pod to evict may move (a node already gone needs
    nothing)."""
    name = action.node
    node = kube.node(name)
    if node is None:
        return Gone(name)
    refusal = checks.node_refusal(node)
    if refusal:
        raise ActionFailed(refusal)
    pods = tuple(
        p
        for p in kube.pods_on(name)
        if not checks.follows_node(p) and not p.metadata.deletion_timestamp
    )
    for pod in pods:
        refusal = checks.not_movable(pod)
        if refusal:
            raise ActionFailed(f"node {name} cannot be emptied: {refusal}")
    return NodeRemoval(name, pods, kube.settings.node_removal)


@dataclass(frozen=True)
class Gone:
    """A node to remove that is already gone."""

    node: str

    def would(self) -> str:
        """Nothing to do."""
        return f"node {self.node} is already gone"

    def apply(self, kube: KubePort) -> str:
        """Nothing to do."""
        return self.would()


@dataclass(frozen=True)
class NodeRemoval:
    """Cordon and taint, evict what is left (DaemonSet/mirror pods excepted), then remove the
    node per ``execute.node_removal``; on failure the cordon and taint are undone."""

    node: str
    pods: tuple[Any, ...]
    mode: str

    def would(self) -> str:
        """What :meth:`apply` would do."""
        return (
            f"would cordon and taint node {self.node}, evict {len(self.pods)} pod(s), "
            f"then {_disposal(self.mode)}"
        )

    def apply(self, kube: KubePort) -> str:
        """Carry the node removal out, verified (cordon and taint undone when it fails)."""
        name, mode = self.node, self.mode
        _marked_node(kube, name, lambda n: drain_node(n, kube.keys))
        handed_over = False
        try:
            for pod in self.pods:
                kube.evict(pod)
            verdict = kube.wait_pods_on(name, checks.drained, what=f"node {name} to be emptied")
            if not verdict.ok:
                raise ActionFailed(verdict.reason)
            if mode == "delete-node":
                kube.delete_node(name)
                handed_over = True
                return _gone(kube, name, "deleted")
            if mode == "command":
                _run_command(kube, name)
            _leave_for_removal(kube, name)
            handed_over = True
            if mode == "command":
                return _gone(kube, name, "removed by the provider command")
            return f"node {name} emptied and left cordoned for the cluster autoscaler"
        finally:
            if not handed_over:
                _undo_node_changes(kube, name)


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


def _run_command(kube: KubePort, node: str) -> None:
    argv = [*kube.settings.node_removal_command, node]
    run_command(argv, "node removal command", kube.settings.verify_timeout_s)
