"""Pure decisions of the executor over live API objects: which pods may be touched, and the
verification conditions the actions wait on (used as :data:`tuner.execute.watch.Check`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tuner.execute.watch import Check, Verdict
from tuner.model.cluster import Node, Pod
from tuner.model.movability import (
    OTHER_AUTOSCALER_TAINTS,
    Policy,
    disruption_blocker,
    pod_blocker,
)
from tuner.monitor.kube import parse_live

MIRROR = "kubernetes.io/config.mirror"


def owner(obj: Any) -> tuple[str, str] | None:
    """(kind, name) of the controller owning an object."""
    ref = next((r for r in obj.metadata.owner_references or () if r.controller), None)
    return (str(ref.kind), str(ref.name)) if ref else None


def follows_node(pod: Any) -> bool:
    """DaemonSet and mirror pods stay with their node and vanish with it."""
    kind = (owner(pod) or ("", ""))[0]
    return kind in ("DaemonSet", "Node") or MIRROR in (pod.metadata.annotations or {})


AS_ITSELF = Policy(excluded_namespaces=frozenset())
"""No operator policy: the executor asks again what the fresh pod says of itself (its owner,
its annotations). The window's policy and budgets were the plan's; the Eviction API enforces
the budgets again."""


def not_movable(obj: Mapping[str, Any]) -> str | None:
    """Why the tuner must not evict this pod (its API form, read now), or None: the model's
    rule (:func:`~tuner.model.movability.pod_blocker`) on the pod as the monitor parses it, and
    its owner must be its controller (the parser also takes an owner that is not): only
    pods of a ReplicaSet move; StatefulSet pods never do, whatever a plan says."""
    pod, problem = _parsed("Pod", obj)
    reason = pod_blocker(pod, {}, AS_ITSELF) if isinstance(pod, Pod) else problem
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    if reason is None and not any(r.get("controller") for r in refs):
        reason = "no owner of it is its controller (nothing would re-create it)"
    return None if reason is None else f"pod {_key(obj)} may not move: {reason}"


def node_refusal(obj: Mapping[str, Any]) -> str | None:
    """Why the tuner must leave a node alone (its API form, read now), or None: the model's
    rule (:func:`~tuner.model.movability.disruption_blocker`) on the node as the monitor
    parses it."""
    node, problem = _parsed("Node", obj)
    reason = disruption_blocker(node) if isinstance(node, Node) else problem
    return None if reason is None else f"node {_key(obj)}: {reason}"


def _parsed(kind: str, obj: Mapping[str, Any]) -> tuple[Node | Pod | None, str | None]:
    """The object as the monitor's parser reads it, or why it cannot be read."""
    parsed = parse_live(kind, obj)
    if parsed.problems:
        return None, f"cannot be read ({parsed.problems[0]})"
    value = parsed.value
    if not isinstance(value, Node | Pod):
        return None, "finished or terminating"
    return value, None


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def autoscaler_taint(node: Any) -> str | None:
    """The Cluster Autoscaler's or Karpenter's deletion taint on a node, or None."""
    return next((t.key for t in node.spec.taints or () if t.key in OTHER_AUTOSCALER_TAINTS), None)


def ready(pod: Any) -> bool:
    """The pod's Ready condition is True."""
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or ())


def _live(pods: Iterable[Any], before: frozenset[str]) -> list[Any]:
    return [p for p in pods if p.metadata.uid not in before and not p.metadata.deletion_timestamp]


def new_pod_on(
    before: frozenset[str], target: str, avoid: Mapping[str, str], *, strict: bool
) -> Check:
    """Check: a pod not in ``before`` is Ready where it must be.

    ``strict`` (the workload is onboarded, the tuner steered the pod): Ready on ``target``; a
    new pod scheduled elsewhere, with none on the target, fails. Otherwise (the scheduler
    chose): Ready on any node but those of ``avoid`` (node -> what it is: the pod's source, a
    node the transition empties). Either way a new pod bound to a node of ``avoid`` fails at
    once: it went back where it came from, or would be evicted a second time.
    """

    def check(pods: Mapping[str, Any]) -> Verdict | None:
        placed = [p for p in _live(pods.values(), before) if p.spec.node_name]
        for pod in placed:
            where = pod.spec.node_name
            if ready(pod) and (where == target if strict else where not in avoid):
                return Verdict(True, f"pod {pod.metadata.name} is Ready on {where}", where)
        for pod in placed:
            where = pod.spec.node_name
            if where in avoid:
                return Verdict(
                    False,
                    f"pod {pod.metadata.name} was scheduled on {where}, {avoid[where]}",
                    where,
                )
        wrong = [p for p in placed if p.spec.node_name != target]
        if strict and wrong and len(wrong) == len(placed):
            pod = wrong[0]
            where = pod.spec.node_name
            return Verdict(
                False, f"pod {pod.metadata.name} was scheduled on {where}, not {target}", where
            )
        return None

    return check


def only_pod_went(uid: str, others: Mapping[str, str]) -> Check:
    """Check: the pod ``uid`` is deleted (or terminating) and none of ``others`` (uid -> name)
    is; a pod that went is named even when it is already gone from the API (a Pending pod is
    deleted at once, with no terminating phase to see)."""

    def gone(pods: Mapping[str, Any], key: str) -> bool:
        return key not in pods or bool(pods[key].metadata.deletion_timestamp)

    def check(pods: Mapping[str, Any]) -> Verdict | None:
        went = sorted(name for key, name in others.items() if gone(pods, key))
        if went:
            return Verdict(False, f"scale-down removed {', '.join(went)} instead")
        if gone(pods, uid):
            return Verdict(True, "the chosen pod went, no other")
        return None

    return check


def live_count(count: int) -> Check:
    """Check: at least ``count`` pods that are not terminating (a scale-up's pods exist)."""

    def check(pods: Mapping[str, Any]) -> Verdict | None:
        live = _live(pods.values(), frozenset())
        return Verdict(True, f"{len(live)} pods") if len(live) >= count else None

    return check


def drained(pods: Mapping[str, Any]) -> Verdict | None:
    """Check: only DaemonSet and mirror pods are left on the node."""
    left = [p for p in pods.values() if not follows_node(p)]
    return Verdict(True, "node emptied") if not left else None
