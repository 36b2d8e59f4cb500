"""Pure decisions of the executor over live API objects: which pods may be touched, and the
verification conditions the actions wait on (used as :data:`tuner.execute.watch.Check`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tuner.execute.watch import Check, Verification
from tuner.model.cluster import Node, Pod
from tuner.model.movability import (
    Policy,
    busy_with_other_autoscaler,
    disruption_blocker,
    pod_blocker,
)
from tuner.monitor.dump import FINISHED_PHASES
from tuner.monitor.kube import parse_live
from tuner.monitor.owners import MIRROR_ANNOTATION


def selector_text(selector: Any) -> str:
    """A V1LabelSelector as the ``labelSelector`` query string."""
    parts = [f"{k}={v}" for k, v in sorted((selector.match_labels or {}).items())]
    for expr in selector.match_expressions or ():
        values = ",".join(expr.values or ())
        match expr.operator:
            case "In":
                parts.append(f"{expr.key} in ({values})")
            case "NotIn":
                parts.append(f"{expr.key} notin ({values})")
            case "Exists":
                parts.append(expr.key)
            case "DoesNotExist":
                parts.append(f"!{expr.key}")
    return ",".join(parts)


def owner(obj: Any) -> tuple[str, str] | None:
    """(kind, name) of the controller owning an object."""
    ref = next((r for r in obj.metadata.owner_references or () if r.controller), None)
    return (str(ref.kind), str(ref.name)) if ref else None


def follows_node(pod: Any) -> bool:
    """DaemonSet and mirror pods stay with their node and vanish with it (the parser's rule,
    :attr:`~tuner.model.cluster.Pod.follows_node`, on a client object: the drain's wait keeps
    a terminating pod counted until it is gone, and the parser drops terminating pods)."""
    kind = (owner(pod) or ("", ""))[0]
    return kind in ("DaemonSet", "Node") or MIRROR_ANNOTATION in (pod.metadata.annotations or {})


AS_ITSELF = Policy(excluded_namespaces=frozenset())
"""No operator policy: the executor asks again what the fresh pod says of itself (its owner,
its annotations). The window's policy and budgets were the plan's; the Eviction API enforces
the budgets again."""


def not_movable(obj: Mapping[str, Any]) -> str | None:
    """Why the tuner must not evict this pod (its API form, read now), or None: the model's
    rule (:func:`~tuner.model.movability.pod_blocker`) on the pod as the monitor parses it
    (whose workload is its controller, as Kubernetes' ``GetControllerOf`` says): only pods of
    a ReplicaSet move; StatefulSet and bare pods never do, whatever a plan says."""
    pod = _parsed("Pod", obj)
    reason = pod_blocker(pod, {}, AS_ITSELF) if isinstance(pod, Pod) else pod
    return None if reason is None else f"pod {_key(obj)} may not move: {reason}"


def to_evict(obj: Mapping[str, Any]) -> bool:
    """Whether emptying the pod's node needs this pod evicted (its API form, read now): not
    when, as the monitor parses it, it follows its node (DaemonSet, mirror) or is finished or
    terminating; a pod that cannot be read is to evict (and :func:`not_movable` refuses it)."""
    pod = _parsed("Pod", obj)
    return not (isinstance(pod, Pod) and pod.follows_node) and pod != FINISHED


def node_refusal(obj: Mapping[str, Any], *, removing: bool = True) -> str | None:
    """Why the tuner must not empty and remove a node (``removing``; else: place pods on it)
    now (its API form, read now), or None: the model's rule
    (:func:`~tuner.model.movability.disruption_blocker`) on the node as the monitor parses
    it."""
    node = _parsed("Node", obj)
    reason = disruption_blocker(node, removing=removing) if isinstance(node, Node) else node
    return None if reason is None else f"node {_key(obj)}: {reason}"


def destination_refusal(obj: Mapping[str, Any]) -> str | None:
    """Why no pod may be placed on this node now (its API form, read now), or None: cordoned,
    as the monitor parses it, or :func:`node_refusal` for a destination."""
    node = _parsed("Node", obj)
    if isinstance(node, Node) and node.unschedulable:
        return f"node {_key(obj)} is cordoned"
    return node_refusal(obj, removing=False)


def other_autoscaler(obj: Mapping[str, Any]) -> str | None:
    """Why a node (its API form, read now) may be another autoscaler's: the Cluster
    Autoscaler's or Karpenter's taint, as
    :func:`~tuner.model.movability.busy_with_other_autoscaler` finds it on the parsed node; a
    node that cannot be read counts as one (its taints unknown, the tuner leaves it alone).
    None: no other autoscaler has it."""
    node = _parsed("Node", obj)
    if isinstance(node, Node):
        return busy_with_other_autoscaler(node)
    return f"node {_key(obj)}: {node}"


FINISHED = "finished or terminating"


def _parsed(kind: str, obj: Mapping[str, Any]) -> Node | Pod | str:
    """The object as the monitor's parser reads it, or why it cannot be read (or
    :data:`FINISHED`)."""
    parsed = parse_live(kind, obj)
    if parsed.problems:
        return f"cannot be read ({parsed.problems[0]})"
    value = parsed.value
    return value if isinstance(value, Node | Pod) else FINISHED


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def ready(pod: Any) -> bool:
    """The pod's Ready condition is True."""
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or ())


def _finished(pod: Any) -> bool:
    return bool(pod.status) and pod.status.phase in FINISHED_PHASES


def _live(pods: Iterable[Any], before: frozenset[str]) -> list[Any]:
    return [p for p in pods if p.metadata.uid not in before and not p.metadata.deletion_timestamp]


def new_pod_on(before: frozenset[str], avoid: Mapping[str, str], count: int = 1) -> Check:
    """Check: ``count`` pods not in ``before`` are Ready on any node but those of ``avoid``
    (node -> what it is: a pod's source, a node the transition empties). A new pod bound to a
    node of ``avoid`` fails at once: it went back where it came from, or would be evicted a
    second time. Where they land otherwise is the scheduler's choice (a destination's label is
    only a preferred affinity): the verdict names the nodes, and the caller compares them with
    the plan's. A new pod seen and gone before it was Ready (the workload's HPA scaled it in
    meanwhile, and a ReplicaSet deletes an unready pod first) counts as done once no other new
    pod is still starting: nothing is left to wait for (verified on no node).
    """
    seen: set[str] = set()

    def check(pods: Mapping[str, Any]) -> Verification | None:
        live = _live(pods.values(), before)
        seen.update(p.metadata.uid for p in live)
        placed = [p for p in live if p.spec.node_name]
        landed = [p for p in placed if ready(p) and p.spec.node_name not in avoid][:count]
        ready_on = tuple((str(p.metadata.name), str(p.spec.node_name)) for p in landed)
        where = ready_on[0][1] if ready_on else None
        said = "; ".join(f"pod {name} is Ready on {node}" for name, node in ready_on)
        if len(landed) == count:
            return Verification(True, said, where, ready_on)
        for pod in placed:
            if pod.spec.node_name in avoid:
                at = pod.spec.node_name
                why = f"pod {pod.metadata.name} was scheduled on {at}, {avoid[at]}"
                return Verification(False, why, at)
        went = len(seen - {p.metadata.uid for p in live})
        if went and len(landed) + went >= count and len(live) == len(landed):
            gone = "the new pod went before it was" if went == 1 else f"{went} new pods went before"
            note = f"{gone} Ready (scaled in)"
            return Verification(True, f"{said}; {note}" if said else note, where, ready_on)
        return None

    return check


def only_pod_went(uid: str, others: Mapping[str, str]) -> Check:
    """Check: the pod ``uid`` is deleted (or terminating) and none of ``others`` (uid -> name)
    is; a pod that went is named even when it is already gone from the API (a Pending pod is
    deleted at once, with no terminating phase to see)."""

    def gone(pods: Mapping[str, Any], key: str) -> bool:
        return key not in pods or bool(pods[key].metadata.deletion_timestamp)

    def check(pods: Mapping[str, Any]) -> Verification | None:
        went = sorted(name for key, name in others.items() if gone(pods, key))
        if went:
            return Verification(False, f"scale-down removed {', '.join(went)} instead")
        if gone(pods, uid):
            return Verification(True, "the chosen pod went, no other")
        return None

    return check


def live_count(count: int) -> Check:
    """Check: at least ``count`` pods that are not terminating (a scale-up's pods exist)."""

    def check(pods: Mapping[str, Any]) -> Verification | None:
        live = _live(pods.values(), frozenset())
        return Verification(True, f"{len(live)} pods") if len(live) >= count else None

    return check


def drained(pods: Mapping[str, Any]) -> Verification | None:
    """Check: only DaemonSet and mirror pods, and finished ones, are left on the node."""
    left = [p for p in pods.values() if not follows_node(p) and not _finished(p)]
    return Verification(True, "node emptied") if not left else None
