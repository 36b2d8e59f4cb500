"""Pure decisions of the executor over live API objects: which pods may be touched, and the
verification conditions the actions wait on (used as :data:`tuner.execute.watch.Check`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tuner.execute.watch import Check, Verdict
from tuner.model.movability import DO_NOT_DISRUPT, OTHER_AUTOSCALER_TAINTS, SAFE_TO_EVICT

MIRROR = "kubernetes.io/config.mirror"


def owner(obj: Any) -> tuple[str, str] | None:
    """(kind, name) of the controller owning an object."""
    ref = next((r for r in obj.metadata.owner_references or () if r.controller), None)
    return (str(ref.kind), str(ref.name)) if ref else None


def follows_node(pod: Any) -> bool:
    """DaemonSet and mirror pods stay with their node and vanish with it."""
    kind = (owner(pod) or ("", ""))[0]
    return kind in ("DaemonSet", "Node") or MIRROR in (pod.metadata.annotations or {})


def not_movable(pod: Any) -> str | None:
    """Why the tuner must not evict this pod, or None. Only ReplicaSet-owned pods move;
    StatefulSet pods never do, whatever a plan says."""
    key = f"{pod.metadata.namespace}/{pod.metadata.name}"
    annotations = pod.metadata.annotations or {}
    ref = owner(pod)
    if ref is None:
        return f"pod {key} has no controller (a bare pod is never moved)"
    if ref[0] != "ReplicaSet":
        return f"pod {key} is owned by a {ref[0]} (never moved)"
    if annotations.get(SAFE_TO_EVICT) == "false":
        return f"pod {key} is annotated {SAFE_TO_EVICT}=false"
    if annotations.get(DO_NOT_DISRUPT) == "true":
        return f"pod {key} is annotated {DO_NOT_DISRUPT}=true"
    return None


def node_refusal(node: Any) -> str | None:
    """Why the tuner must leave a node alone (another autoscaler is acting on it), or None."""
    name = node.metadata.name
    taint = autoscaler_taint(node)
    if taint is not None:
        return f"node {name} carries {taint}: another autoscaler is acting on it"
    if (node.metadata.annotations or {}).get(DO_NOT_DISRUPT) == "true":
        return f"node {name} is annotated {DO_NOT_DISRUPT}=true"
    return None


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
