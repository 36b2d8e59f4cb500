"""Which pods the tuner may move and which nodes it may remove."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tuner.model.cluster import Cluster, Node, Pdb, Pod, Workload

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
DELETING_TAINTS = frozenset({"ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted"})
"""Taints an autoscaler puts on a node it has started deleting."""
OTHER_AUTOSCALER_TAINTS = DELETING_TAINTS | {"DeletionCandidateOfClusterAutoscaler"}
"""Every taint an autoscaler marks a node with: deleting it, or a candidate for deletion."""
MOVABLE_OWNERS = ("Deployment", "ReplicaSet")
SYSTEM_NAMESPACE = "kube-system"
"""Excluded by default; a pod of it that a PodDisruptionBudget covers is movable all the same, as
the Cluster Autoscaler removes a node running such pods under its default
``--skip-nodes-with-system-pods=true`` (its FAQ, "What types of pods can prevent CA from
removing a node?": kube-system pods without a PDB, or whose PDB is too restrictive)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """Operator choices that restrict what the tuner touches."""

    excluded_namespaces: frozenset[str] = frozenset({"kube-system"})
    kept_nodes: frozenset[str] = frozenset()
    """Nodes not to remove: taken back from an autoscaler that did not remove them."""
    unsettled_nodes: frozenset[str] = frozenset()
    """Nodes that changed over the window (``windows.scope: touched``): a plan neither drains
    them nor places pods on them."""
    unsettled_workloads: frozenset[Workload] = frozenset()
    """Workloads whose replicas changed, rolled out or were not ready over the window: a plan
    neither moves, adds nor removes their pods."""
    deletion_candidates: bool = True
    """Whether a node the Cluster Autoscaler marked a deletion candidate may be removed (the
    tuner's rule, :func:`disruption_blocker`); the 2019 tuner's re-implementation keeps the
    rule it was raced with (no node any autoscaler marked)."""


def pod_blocker(
    pod: Pod,
    exhausted_pdbs: Mapping[str, Sequence[Pdb]],
    policy: Policy,
    pdbs: Mapping[str, Sequence[Pdb]] | None = None,
) -> str | None:
    """Why the pod must not be moved, or None when it is movable.

    ``exhausted_pdbs`` holds, by namespace, the budgets that allow no disruption now; ``pdbs``
    every budget by namespace (None: none known): a :data:`SYSTEM_NAMESPACE` pod one of them
    covers is not held by its namespace's exclusion (the budget decides, as for any pod).
    """
    if pod.owner_kind not in MOVABLE_OWNERS:
        return f"owned by {pod.owner_kind or 'nothing (bare pod)'}"
    if pod.namespace in policy.excluded_namespaces and not _budgeted_system_pod(pod, pdbs):
        return f"namespace {pod.namespace} is excluded"
    if pod.workload in policy.unsettled_workloads:
        return f"workload {pod.workload} changed during the window"
    if pod.node is not None and pod.node in policy.unsettled_nodes:
        return f"its node {pod.node} changed during the window"
    if pod.annotations.get(SAFE_TO_EVICT) == "false":
        return f"annotated {SAFE_TO_EVICT}=false"
    if pod.annotations.get(DO_NOT_DISRUPT) == "true":
        return f"annotated {DO_NOT_DISRUPT}=true"
    for pdb in exhausted_pdbs.get(pod.namespace, ()):
        if pdb.covers(pod):
            return f"PodDisruptionBudget {pdb.namespace}/{pdb.name} allows no disruption now"
    return None


def _budgeted_system_pod(pod: Pod, pdbs: Mapping[str, Sequence[Pdb]] | None) -> bool:
    """A :data:`SYSTEM_NAMESPACE` pod that a PodDisruptionBudget covers."""
    if pod.namespace != SYSTEM_NAMESPACE or not pdbs:
        return False
    return any(pdb.covers(pod) for pdb in pdbs.get(pod.namespace, ()))


def node_blocker(node: Node) -> str | None:
    """Why the node itself must not be removed (its pods aside), or None."""
    if any(key in node.labels for key in CONTROL_PLANE_LABELS):
        return "control-plane node"
    if node.unschedulable:
        return "cordoned: someone is draining it, or it is already left for removal"
    if node.annotations.get(SCALE_DOWN_DISABLED) == "true":
        return f"annotated {SCALE_DOWN_DISABLED}=true"
    return disruption_blocker(node, removing=True)


def disruption_blocker(node: Node, *, removing: bool) -> str | None:
    """Why no one may disrupt the node now (annotated do-not-disrupt, or another autoscaler
    acting on it), to remove it (``removing``) or to move pods onto it, or None; the executor
    asks it again of the node as it is when each action runs. Another autoscaler acts on a node
    it is deleting; for pods moved onto it also on one it marked a candidate for deletion (the
    Cluster Autoscaler's ``DeletionCandidateOfClusterAutoscaler``): that node it found unneeded
    too, so the tuner may remove it, sooner than the autoscaler's unneeded time, but places
    nothing there."""
    if node.annotations.get(DO_NOT_DISRUPT) == "true":
        return f"annotated {DO_NOT_DISRUPT}=true"
    taint = busy_with_other_autoscaler(node, DELETING_TAINTS if removing else None)
    if taint:
        return f"tainted {taint} by another autoscaler"
    return None


def busy_with_other_autoscaler(node: Node, taints: frozenset[str] | None = None) -> str | None:
    """The Cluster Autoscaler / Karpenter taint the node carries among ``taints`` (None: any of
    theirs, :data:`OTHER_AUTOSCALER_TAINTS`), if any."""
    keys = OTHER_AUTOSCALER_TAINTS if taints is None else taints
    return next((t.key for t in node.taints if t.key in keys), None)


@dataclass(frozen=True)
class Movability:
    """Movable pods and removable nodes of one cluster, with reasons for the rest."""

    pod_reasons: dict[str, str]
    """Unmovable pod key -> reason (pods that follow their node are not listed)."""
    node_reasons: dict[str, str]
    """Unremovable node name -> reason."""
    closed: frozenset[str] = frozenset()
    """Nodes no pod may be placed on by a plan (they changed during the window)."""
    later: Movability | None = None
    """The same cluster judged without the window's unsettled nodes and workloads (None when
    there were none): an option blocked only by them is blocked for now, not for good."""

    def movable(self, pod: Pod) -> bool:
        """True when the tuner may move (evict and re-create elsewhere) the pod."""
        return not pod.follows_node and pod.key not in self.pod_reasons


def assess(cluster: Cluster, policy: Policy) -> Movability:
    """Classify every pod and node of the cluster."""
    exhausted: dict[str, list[Pdb]] = defaultdict(list)
    pdbs: dict[str, list[Pdb]] = defaultdict(list)
    for pdb in cluster.pdbs:
        pdbs[pdb.namespace].append(pdb)
        if pdb.disruptions_allowed < 1:
            exhausted[pdb.namespace].append(pdb)
    pod_reasons: dict[str, str] = {}
    for pod in cluster.pods:
        if pod.follows_node:
            continue
        reason = pod_blocker(pod, exhausted, policy, pdbs)
        if reason is not None:
            pod_reasons[pod.key] = reason
    node_reasons: dict[str, str] = {}
    for node in cluster.nodes:
        reason = node_blocker(node)
        if reason is None and not policy.deletion_candidates:
            taint = busy_with_other_autoscaler(node)
            reason = None if taint is None else f"tainted {taint} by another autoscaler"
        if reason is None and node.name in policy.kept_nodes:
            reason = "left for the autoscaler earlier and not removed: kept"
        if reason is None and node.name in policy.unsettled_nodes:
            reason = "changed during the window"
        if reason is None:
            stuck = next((p for p in cluster.pods_by_node[node.name] if p.key in pod_reasons), None)
            if stuck is not None:
                reason = f"holds unmovable pod {stuck.key} ({pod_reasons[stuck.key]})"
        if reason is not None:
            node_reasons[node.name] = reason
    closed = frozenset(n.name for n in cluster.nodes if n.name in policy.unsettled_nodes)
    later = None
    if policy.unsettled_nodes or policy.unsettled_workloads:
        settled = replace(policy, unsettled_nodes=frozenset(), unsettled_workloads=frozenset())
        later = assess(cluster, settled)
    return Movability(pod_reasons, node_reasons, closed, later)
