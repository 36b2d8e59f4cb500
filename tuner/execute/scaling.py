"""Scaling a Deployment or ReplicaSet by one, verified, and its rollback.

An add scales +1 and must see its new pod Ready; a remove gives its pod the lowest
pod-deletion-cost, scales −1 and must see exactly that pod go. Both journal the replica change
before making it (:meth:`Scaled.journal`), so that :func:`undo_scale` can restore the count
after a crash, as their own rollbacks (:func:`withdraw`, :func:`restore`) do after a failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.execute import checks
from tuner.execute.journal import Journal
from tuner.execute.marks import cheapest_pod, undo_pod
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.execute.watch import Verification

log = logging.getLogger(__name__)


def undo(what: str, fn: Callable[[], object]) -> None:
    """Undo a temporary change; a failure is logged (``recover`` removes it later)."""
    try:
        fn()
    except ActionFailed as err:
        log.error("could not undo %s (the next recovery will): %s", what, err)


@dataclass(frozen=True)
class Scaled:
    """The Deployment or ReplicaSet an add or remove scales, and its pods' label selector."""

    kind: str
    namespace: str
    name: str
    selector: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    def scale(self, kube: KubePort, expected: int, to: int) -> None:
        """Replicas from ``expected`` to ``to`` (see :meth:`KubePort.scale`)."""
        kube.scale(self.kind, self.namespace, self.name, expected, to)

    def journal(
        self, kube: KubePort, replicas: int, to: int, pods: frozenset[str] = frozenset()
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


def settled(kube: KubePort) -> None:
    """The scaling was verified: off the journal (a failure is only logged: the end of the
    transition drops the journal anyway)."""
    try:
        Journal(kube).settled()
    except ActionFailed as err:
        log.warning("the journal still records a verified scaling: %s", err)


def undo_scale(kube: KubePort, text: str) -> str:
    """Restore the replica count an add or remove journaled (:meth:`Scaled.journal`) before a
    crash interrupted it, as its own rollback does, but only when the count is still the one
    it set (nobody, e.g. an HPA or a user, changed it since). One line on how that went."""
    try:
        record = json.loads(text)
        scaled = Scaled(record["kind"], record["namespace"], record["name"], record["selector"])
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
        withdraw(kube, scaled, pods, replicas) if to > replicas else restore(kube, scaled, replicas)
    )


def take(
    kube: KubePort, scaled: Scaled, pod: Any, replicas: int, *, rollback: bool
) -> Verification:
    """Scale ``replicas`` -> ``replicas - 1`` with ``pod`` the cheapest to delete: whether
    exactly that pod went. Its deletion cost is restored whatever happens; raises when the
    scale-down was not made."""
    namespace, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
    others = {
        p.metadata.uid: p.metadata.name
        for p in kube.pods(namespace, scaled.selector)
        if p.metadata.uid != uid and not p.metadata.deletion_timestamp
    }
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
        undo(
            f"the deletion cost of {namespace}/{name}",
            lambda: kube.patch_pod(namespace, name, lambda p: undo_pod(p, kube.keys)),
        )


def withdraw(kube: KubePort, scaled: Scaled, before: frozenset[str], replicas: int) -> str:
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
        verdict = take(kube, scaled, pod, replicas + 1, rollback=True)
    except ActionFailed as err:
        return f"not scaled back, {scaled} may keep an extra replica: {err}"
    back = f"scaled {scaled} back to {replicas}"
    if not verdict.ok:
        return f"{back}, but not by removing the new pod {pod.metadata.name}: {verdict.reason}"
    return f"{back}, removing the new pod {pod.metadata.name}"


def restore(kube: KubePort, scaled: Scaled, replicas: int) -> str:
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
