"""The four actions on a live cluster, each verified, each undoing its temporary changes.

An action reads and checks first (these reads are all a dry run does), then changes the
cluster, waits (watch) for the outcome, and in a ``finally`` removes what it added for the
duration (node label, cordon, taint, pod-deletion-cost). It returns a one-line account of
what happened or raises :class:`~tuner.execute.retry.ActionFailed`. An add or remove journals
its replica change before scaling (:func:`undo_scale` restores it after a crash).
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.execute import checks
from tuner.execute.affinity import has_preference
from tuner.execute.journal import Journal
from tuner.execute.kube import Kube, now_iso, selector_text
from tuner.execute.marks import (
    cheapest_pod,
    drain_node,
    hand_over,
    label_node,
    undo_node,
    undo_pod,
)
from tuner.execute.retry import ActionFailed
from tuner.execute.watch import Verdict
from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode

log = logging.getLogger(__name__)

SCALABLE = ("Deployment", "ReplicaSet")


def perform(kube: Kube, action: Action, *, dry_run: bool) -> str:
    """Carry out (or, in a dry run, check and describe) one action."""
    match action:
        case Migrate():
            return migrate(kube, action, dry_run=dry_run)
        case Add():
            return add(kube, action, dry_run=dry_run)
        case Remove():
            return remove(kube, action, dry_run=dry_run)
        case RemoveNode():
            return remove_node(kube, action, dry_run=dry_run)


# ------------------------------------------------------------------ reads/checks --
def _pod(kube: Kube, namespace: str, name: str, node: str | None) -> Any:
    pod = kube.pod(namespace, name)
    if pod is None or pod.metadata.deletion_timestamp:
        raise ActionFailed(f"pod {namespace}/{name} is gone")
    if node and pod.spec.node_name != node:
        raise ActionFailed(f"pod {namespace}/{name} is on {pod.spec.node_name}, not {node}")
    refusal = checks.not_movable(pod)
    if refusal:
        raise ActionFailed(refusal)
    return pod


def _workload_of(kube: Kube, pod: Any) -> tuple[Any, str, str]:
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


def _scalable(kube: Kube, namespace: str, kind: str, name: str) -> Any:
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


def _destination(kube: Kube, name: str) -> Any:
    node = kube.node(name)
    if node is None:
        raise ActionFailed(f"node {name} is gone")
    if node.spec.unschedulable:
        raise ActionFailed(f"node {name} is cordoned")
    refusal = checks.node_refusal(node)
    if refusal:
        raise ActionFailed(refusal)
    return node


def _affinity(api_obj: Any, kube: Kube) -> dict[str, Any] | None:
    affinity = api_obj.affinity if api_obj is not None else None
    if affinity is None:
        return None
    serialized: dict[str, Any] = kube.core.api_client.sanitize_for_serialization(affinity)
    return serialized


def _uids(pods: list[Any]) -> frozenset[str]:
    return frozenset(p.metadata.uid for p in pods)


# -------------------------------------------------------------- cleanup helpers --
def _undo(what: str, fn: Callable[[], object]) -> None:
    """Undo a temporary change; a failure is logged (``recover`` removes it later)."""
    try:
        fn()
    except ActionFailed as err:
        log.error("could not undo %s (the next recovery will): %s", what, err)


def _undo_node_changes(kube: Kube, node: str) -> None:
    _undo(
        f"the changes on node {node}",
        lambda: kube.patch_node(node, lambda n: undo_node(n, kube.keys)),
    )


def _marked_node(kube: Kube, name: str, build: Callable[[Any], Any]) -> None:
    def checked(node: Any) -> Any:
        try:
            return build(node)
        except ValueError as err:
            raise ActionFailed(str(err)) from err

    if kube.patch_node(name, checked) is None:
        raise ActionFailed(f"node {name} is gone")


# ----------------------------------------------------------------------- actions --
def migrate(kube: Kube, action: Migrate, *, dry_run: bool) -> str:
    """Label the destination, evict the pod, verify its replacement is Ready there, unlabel."""
    namespace, target = action.pod.namespace, action.target
    pod = _pod(kube, namespace, action.pod.name, action.source)
    rs, _, workload = _workload_of(kube, pod)
    _destination(kube, target)
    label = kube.keys.workload_label(namespace, workload)
    onboarded = has_preference(_affinity(pod.spec, kube), label)
    note = (
        ""
        if onboarded
        else f" (workload {namespace}/{workload} not onboarded: no placement control)"
    )
    if dry_run:
        return (
            f"would label node {target} {label}, evict pod {namespace}/{pod.metadata.name}, "
            f"wait for its replacement to be Ready on {target}, unlabel{note}"
        )
    selector = selector_text(rs.spec.selector)
    before = _uids(kube.pods(namespace, selector))
    _marked_node(kube, target, lambda n: label_node(n, kube.keys, label))
    try:
        kube.evict(pod)
        verdict = kube.wait_pods(
            namespace,
            selector,
            checks.new_pod_on(before, target, strict=onboarded),
            what=f"the replacement of {namespace}/{pod.metadata.name} on {target}",
        )
    finally:
        _undo_node_changes(kube, target)
    if not verdict.ok:
        raise ActionFailed(verdict.reason)
    return verdict.reason + note


def add(kube: Kube, action: Add, *, dry_run: bool) -> str:
    """Label the destination, scale +1, verify the new pod is Ready there, unlabel; when the
    verification fails, scale back taking the new pod."""
    wl, target = action.workload, action.target
    obj = _scalable(kube, wl.namespace, wl.kind, wl.name)
    _destination(kube, target)
    label = kube.keys.workload_label(wl.namespace, wl.name)
    onboarded = has_preference(_affinity(obj.spec.template.spec, kube), label)
    note = "" if onboarded else f" (workload {wl} not onboarded: no placement control)"
    replicas = kube.replicas(wl.kind, wl.namespace, wl.name)
    if dry_run:
        return (
            f"would label node {target} {label}, scale {wl} {replicas} -> {replicas + 1}, "
            f"wait for the new pod to be Ready on {target}, unlabel{note}"
        )
    scaled = _Scaled(wl.kind, wl.namespace, wl.name, selector_text(obj.spec.selector))
    before = _uids(kube.pods(wl.namespace, scaled.selector))
    scaled.journal(kube, replicas, replicas + 1, before)
    _marked_node(kube, target, lambda n: label_node(n, kube.keys, label))
    try:
        scaled.scale(kube, replicas, replicas + 1)
        verdict = kube.wait_pods(
            wl.namespace,
            scaled.selector,
            checks.new_pod_on(before, target, strict=onboarded),
            what=f"a new pod of {wl} on {target}",
        )
    finally:
        _undo_node_changes(kube, target)
    if not verdict.ok:
        raise ActionFailed(f"{verdict.reason}; {_withdraw(kube, scaled, before, replicas)}")
    _settled(kube)
    return verdict.reason + note


def remove(kube: Kube, action: Remove, *, dry_run: bool) -> str:
    """Give the pod the lowest pod-deletion-cost, scale −1, verify exactly that pod went; when
    another pod went instead (or none), scale back."""
    namespace, name = action.pod.namespace, action.pod.name
    pod = _pod(kube, namespace, name, action.pod.node)
    _, kind, workload = _workload_of(kube, pod)
    obj = _scalable(kube, namespace, kind, workload)
    replicas = kube.replicas(kind, namespace, workload)
    if dry_run:
        return (
            f"would set the lowest pod-deletion-cost on {namespace}/{name}, scale {kind} "
            f"{namespace}/{workload} {replicas} -> {replicas - 1}, verify exactly that pod went"
        )
    scaled = _Scaled(kind, namespace, workload, selector_text(obj.spec.selector))
    scaled.journal(kube, replicas, replicas - 1)
    verdict = _take(kube, scaled, pod, replicas, rollback=False)
    if not verdict.ok:
        raise ActionFailed(f"{verdict.reason}; {_restore(kube, scaled, replicas)}")
    _settled(kube)
    return f"pod {namespace}/{name} removed ({scaled} at {replicas - 1})"


@dataclass(frozen=True)
class _Scaled:
    """The Deployment or ReplicaSet an add or remove scales, and its pods' label selector."""

    kind: str
    namespace: str
    name: str
    selector: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def scale(self, kube: Kube, expected: int, to: int) -> None:
        """Replicas from ``expected`` to ``to`` (see :meth:`Kube.scale`)."""
        kube.scale(self.kind, self.namespace, self.name, expected, to)

    def journal(
        self, kube: Kube, replicas: int, to: int, pods: frozenset[str] = frozenset()
    ) -> None:
        """Journal the change ``replicas`` -> ``to`` about to be made (``pods``: the uids of the
        pods before an add), so that :func:`undo_scale` can restore ``replicas`` after a crash."""
        record = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "selector": self.selector,
            "replicas": replicas,
            "to": to,
            "pods": sorted(pods),
        }
        Journal(kube).scaling(record)


def _settled(kube: Kube) -> None:
    """The scaling was verified: off the journal (a failure is only logged: the end of the
    transition drops the journal anyway)."""
    try:
        Journal(kube).settled()
    except ActionFailed as err:
        log.warning("the journal still records a verified scaling: %s", err)


def undo_scale(kube: Kube, text: str) -> str:
    """Restore the replica count an add or remove journaled (:meth:`_Scaled.journal`) before a
    crash interrupted it, as its own rollback does, but only when the count is still the one
    it set (nobody, e.g. an HPA or a user, changed it since). One line on how that went."""
    try:
        record = json.loads(text)
        scaled = _Scaled(record["kind"], record["namespace"], record["name"], record["selector"])
        replicas, to, pods = int(record["replicas"]), int(record["to"]), frozenset(record["pods"])
    except (ValueError, TypeError, KeyError) as err:
        return f"the interrupted scaling's record is unreadable, nothing restored: {err!r}"
    try:
        current = kube.replicas(scaled.kind, scaled.namespace, scaled.name)
    except ActionFailed as err:
        return f"{scaled} not restored to {replicas} replicas: {err}"
    if current == replicas:
        return f"{scaled} is at {replicas} replicas, as before the interrupted scaling"
    if current != to:
        return (
            f"{scaled} left at {current} replicas: the interrupted scaling set {to} (from "
            f"{replicas}) and someone has changed it since"
        )
    return (
        _withdraw(kube, scaled, pods, replicas)
        if to > replicas
        else _restore(kube, scaled, replicas)
    )


def _take(kube: Kube, scaled: _Scaled, pod: Any, replicas: int, *, rollback: bool) -> Verdict:
    """Scale ``replicas`` -> ``replicas - 1`` with ``pod`` the cheapest to delete: whether
    exactly that pod went. Its deletion cost is restored whatever happens; raises when the
    scale-down was not made."""
    namespace, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
    others = frozenset(
        p.metadata.uid
        for p in kube.pods(namespace, scaled.selector)
        if p.metadata.uid != uid and not p.metadata.deletion_timestamp
    )
    if kube.patch_pod(namespace, name, lambda p: cheapest_pod(p, kube.keys)) is None:
        raise ActionFailed(f"pod {namespace}/{name} is gone")
    try:
        scaled.scale(kube, replicas, replicas - 1)
        return kube.wait_pods(
            namespace,
            scaled.selector,
            checks.only_pod_went(uid, others),
            what=f"pod {namespace}/{name} to go",
            rollback=rollback,
        )
    finally:
        _undo(
            f"the deletion cost of {namespace}/{name}",
            lambda: kube.patch_pod(namespace, name, lambda p: undo_pod(p, kube.keys)),
        )


def _withdraw(kube: Kube, scaled: _Scaled, before: frozenset[str], replicas: int) -> str:
    """Undo a failed add: back to ``replicas``, taking the pod the add created (the newest
    one not in ``before``). One line on how that went."""
    try:
        new = [
            p
            for p in kube.pods(scaled.namespace, scaled.selector)
            if p.metadata.uid not in before and not p.metadata.deletion_timestamp
        ]
        if not new:
            scaled.scale(kube, replicas + 1, replicas)
            return f"scaled {scaled} back to {replicas} (no new pod had been created)"
        pod = max(new, key=lambda p: p.metadata.creation_timestamp)
        verdict = _take(kube, scaled, pod, replicas + 1, rollback=True)
    except ActionFailed as err:
        return f"not scaled back, {scaled} may keep an extra replica: {err}"
    back = f"scaled {scaled} back to {replicas}"
    if not verdict.ok:
        return f"{back}, but not by removing the new pod {pod.metadata.name}: {verdict.reason}"
    return f"{back}, removing the new pod {pod.metadata.name}"


def _restore(kube: Kube, scaled: _Scaled, replicas: int) -> str:
    """Undo a failed remove: back to ``replicas`` (a replacement for a pod that went goes
    where the scheduler puts it). One line on how that went."""
    try:
        scaled.scale(kube, replicas - 1, replicas)
    except ActionFailed as err:
        return f"not scaled back, {scaled} may miss a replica: {err}"
    verdict = kube.wait_pods(
        scaled.namespace,
        scaled.selector,
        checks.live_count(replicas),
        what=f"{replicas} pods of {scaled}",
        rollback=True,
    )
    back = f"scaled {scaled} back to {replicas}"
    return back if verdict.ok else f"{back}, but {verdict.reason}"


def remove_node(kube: Kube, action: RemoveNode, *, dry_run: bool) -> str:
    """Cordon and taint, evict what is left (DaemonSet/mirror pods excepted), then remove the
    node per ``execute.node_removal``; on failure the cordon and taint are undone."""
    name, mode = action.node, kube.settings.node_removal
    node = kube.node(name)
    if node is None:
        return f"node {name} is already gone"
    refusal = checks.node_refusal(node)
    if refusal:
        raise ActionFailed(refusal)
    pods = [
        p
        for p in kube.pods_on(name)
        if not checks.follows_node(p) and not p.metadata.deletion_timestamp
    ]
    for pod in pods:
        refusal = checks.not_movable(pod)
        if refusal:
            raise ActionFailed(f"node {name} cannot be emptied: {refusal}")
    if dry_run:
        return (
            f"would cordon and taint node {name}, evict {len(pods)} pod(s), then {_disposal(mode)}"
        )
    _marked_node(kube, name, lambda n: drain_node(n, kube.keys))
    handed_over = False
    try:
        for pod in pods:
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


def _gone(kube: Kube, name: str, how: str) -> str:
    verdict = kube.wait_node_gone(name, kube.settings.verify_timeout_s)
    if not verdict.ok:
        raise ActionFailed(verdict.reason)
    return f"node {name} {how}"


def _leave_for_removal(kube: Kube, name: str) -> None:
    """Hand the cordoned node over (:func:`~tuner.execute.marks.hand_over`): it is someone
    else's now (already gone is fine: a provider command may delete it at once)."""
    when = now_iso()
    kube.patch_node(name, lambda n: hand_over(n, kube.keys, when))


def _run_command(kube: Kube, node: str) -> None:
    argv = [*kube.settings.node_removal_command, node]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=kube.settings.verify_timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ActionFailed(f"node removal command {argv[0]}: {err}") from err
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        raise ActionFailed(f"node removal command exited {done.returncode}: {last}")
