"""A **surge move**: the lone pod of a one-replica Deployment moved by restarting its rollout
(:mod:`tuner.plan.rollout`), so that the workload is served throughout, where an eviction leaves
it without a pod until its replacement starts (``execute.surge_lone_pods``).

- :func:`surge_of` (the checks): the pod's Deployment surges first (one replica, a
  ``RollingUpdate`` of at least one surge and none unavailable, not paused), its last rollout is
  complete (the move starts none over another), and no PodDisruptionBudget over its pods allows
  no disruption now (its eviction would be refused: so is the move). Otherwise the pod is
  evicted as any other.
- :class:`SurgeMove` (the action): marked as a migration is (the destination's workload label,
  the source's cordon), the restart journaled, the pod template annotated with
  :attr:`~tuner.model.conventions.Keys.moved_at`; the Deployment controller starts the new pod
  (steered as an evicted pod's replacement is) and deletes the old one once the new one is
  available. Verified: a new pod Ready off the source and the nodes the transition empties, and
  the old pod gone. Failed: the annotation is set back, the controller deletes the new pod (the
  old one never went), and the action fails.
- :func:`undo_restart` (recovery after a crash mid-move): the journaled annotation is set back
  when it still holds what the move wrote and the rollout it started is not complete; a
  complete one is left (the move was done but for its verification).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tuner.execute import checks
from tuner.execute.allowance import disruptions_allowed, template_labels
from tuner.execute.events import Sink
from tuner.execute.journal import Journal
from tuner.execute.kube import now_iso
from tuner.execute.landing import Landing, marked, marks_said, not_onboarded, verified
from tuner.execute.onboard import rolled_out
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.execute.scaling import undo
from tuner.execute.step import Done
from tuner.execute.watch import Check, Verification
from tuner.plan.rollout import surges_first


def surge_of(kube: KubePort, namespace: str, name: str) -> Any | None:
    """The Deployment ``namespace/name`` when its lone pod moves by a surge (see the module),
    else None (evicted); refused (:class:`ActionFailed`) when a PodDisruptionBudget over its
    pods allows no disruption now."""
    if not kube.settings.surge_lone_pods:
        return None
    deployment = kube.deployment(namespace, name)
    if deployment is None:
        return None
    spec = deployment.spec
    strategy = spec.strategy
    rolling = None if strategy is None else strategy.rolling_update
    replicas = 1 if spec.replicas is None else int(spec.replicas)
    if not surges_first(
        None if strategy is None else strategy.type,
        None if rolling is None else rolling.max_surge,
        None if rolling is None else rolling.max_unavailable,
        replicas,
        bool(spec.paused),
    ):
        return None
    if not _rolled_out(deployment):
        return None
    if disruptions_allowed(kube, namespace, template_labels(deployment)) == 0:
        raise ActionFailed(
            f"Deployment {namespace}/{name}: a PodDisruptionBudget over its pods allows no "
            "disruption now"
        )
    return deployment


def _rolled_out(deployment: Any) -> bool:
    """Its last rollout is complete (:func:`~tuner.execute.onboard.rolled_out` on its own
    generation)."""
    verdict = rolled_out(int(deployment.metadata.generation or 0))({"deployment": deployment})
    return verdict is not None and verdict.ok


def annotated(deployment: Any, key: str, value: str | None) -> dict[str, Any]:
    """The merge patch that sets the pod template's annotation ``key`` to ``value`` (None:
    removes it), conditional on the Deployment's version."""
    return {
        "metadata": {"resourceVersion": deployment.metadata.resource_version},
        "spec": {"template": {"metadata": {"annotations": {key: value}}}},
    }


def template_annotation(deployment: Any, key: str) -> str | None:
    """The pod template's annotation ``key`` (None: not set)."""
    meta = deployment.spec.template.metadata
    value = ((meta and meta.annotations) or {}).get(key)
    return None if value is None else str(value)


@dataclass(frozen=True)
class Restart:
    """The rollout restart a surge move makes: the Deployment, the annotation it sets and its
    value before and after."""

    namespace: str
    name: str
    key: str
    before: str | None
    after: str

    def __str__(self) -> str:
        return f"Deployment {self.namespace}/{self.name}"

    def record(self) -> dict[str, str | None]:
        """What the journal holds of it (:func:`undo_restart` reads it back)."""
        return asdict(self)

    def set_back(self, kube: KubePort, *, unless_rolled_out: bool) -> str:
        """Set the annotation back to its value before, when it still holds this restart's (and,
        with ``unless_rolled_out``, the rollout is not complete). One line on how that went."""
        why = "it is gone"

        def build(deployment: Any) -> dict[str, Any] | None:
            nonlocal why
            if template_annotation(deployment, self.key) != self.after:
                why = f"someone changed {self.key} since"
            elif unless_rolled_out and _rolled_out(deployment):
                why = (
                    "its rollout completed before the interruption: the pod moved, where it "
                    "landed not verified"
                )
            else:
                return annotated(deployment, self.key, self.before)
            return None

        if kube.patch_deployment(self.namespace, self.name, build) is None:
            return f"{self} left as it is: {why}"
        return f"{self}: its rollout restart set back ({self.key} restored)"


def moved(before: frozenset[str], avoid: Mapping[str, str], old: str) -> Check:
    """Check: a new pod (not in ``before``) Ready off the nodes of ``avoid`` and the pod whose
    uid is ``old`` gone (or being deleted)."""
    landed = checks.new_pod_on(before, avoid)

    def check(pods: Mapping[str, Any]) -> Verification | None:
        verdict = landed(pods)
        if verdict is None or not verdict.ok:
            return verdict
        left = pods.get(old)
        if left is not None and not left.metadata.deletion_timestamp:
            return None
        return verdict

    return check


@dataclass(frozen=True)
class SurgeMove:
    """Move a one-replica Deployment's pod by restarting its rollout (see the module)."""

    pod: Any
    deployment: Any
    landing: Landing
    workload: str
    cordon: str | None
    """The source, when the move must cordon it (None: a node the transition empties)."""

    def would(self) -> str:
        """What :meth:`apply` would do."""
        first, last = marks_said(self.landing, self.cordon)
        meta = self.pod.metadata
        restart = (
            f"restart the rollout of Deployment {self.workload} (its one pod "
            f"{meta.namespace}/{meta.name} replaced by a new one started first)"
        )
        awaited = f"the new pod to be {self.landing.wait()} and {meta.name} to be gone"
        unsteered = not_onboarded(self.landing.onboarded, self.workload)
        return f"would {first}{restart}, wait for {awaited}{last}{unsteered}"

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Carry the move out, verified (the restart set back when it fails)."""
        landing, meta = self.landing, self.deployment.metadata
        key = kube.keys.moved_at
        restart = Restart(
            meta.namespace,
            meta.name,
            key,
            template_annotation(self.deployment, key),
            now_iso(),
        )
        before = frozenset(p.metadata.uid for p in kube.pods(landing.namespace, landing.selector))
        check = moved(before, landing.avoid, self.pod.metadata.uid)
        with marked(kube, [landing], [self.cordon]):
            journal = Journal(kube)
            journal.restarting(restart.record())
            patched = kube.patch_deployment(
                restart.namespace,
                restart.name,
                lambda live: annotated(live, key, restart.after),
            )
            if patched is None:
                raise ActionFailed(f"{restart} is gone")
            what = f"a new pod of {self.workload} and {self.pod.metadata.name} gone"
            verdict = kube.wait_pods(landing.namespace, landing.selector, check, what=what)
            if not verdict.ok:
                undone = restart.set_back(kube, unless_rolled_out=False)
                raise ActionFailed(f"{verdict.reason}; {undone}")
            undo("the journal's restart record", journal.restarted)
        return verified(verdict, landing, self.workload)


def undo_restart(kube: KubePort, text: str) -> str:
    """Set back the rollout restart a surge move journaled (:meth:`Restart.record`) before a
    crash interrupted it, unless its rollout is complete or someone changed the annotation
    since. One line on how that went."""
    try:
        restart = Restart(**json.loads(text))
    except (ValueError, TypeError) as err:
        return f"the interrupted restart's record is unreadable, nothing set back: {err!r}"
    try:
        return restart.set_back(kube, unless_rolled_out=True)
    except ActionFailed as err:
        return f"{restart} not set back: {err}"
