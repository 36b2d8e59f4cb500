"""Immutable values for a cluster: nodes, pods, workloads, PDBs, HPAs and pod templates."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from tuner.model.constraints import Constraints, Labels, LabelSelector, Taint, freeze_labels
from tuner.model.resources import Resources

EMPTY: Mapping[str, str] = MappingProxyType({})


def _no_labels() -> Mapping[str, str]:
    return EMPTY


def _no_amounts() -> Mapping[str, int]:
    return MappingProxyType({})


def _no_templates() -> Mapping[Workload, frozenset[str]]:
    return MappingProxyType({})


INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")


@dataclass(frozen=True, slots=True, order=True)
class Workload:
    """What a pod is an instance of (the thesis' pod "type"): ``namespace/Kind/name``."""

    namespace: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"

    @staticmethod
    def parse(text: str) -> Workload:
        """Inverse of ``str()``; ValueError when the text is not ``namespace/Kind/name``."""
        parts = text.split("/", 2)
        if len(parts) < 3 or not all(parts):
            raise ValueError(f"{text!r} is not namespace/Kind/name")
        namespace, kind, name = parts
        return Workload(namespace, kind, name)


@dataclass(frozen=True, slots=True)
class Node:
    """A node: capacity is what you pay for, allocatable is what pods may use."""

    name: str
    capacity: Resources
    allocatable: Resources
    max_pods: int = 110
    labels: Mapping[str, str] = field(default_factory=_no_labels)
    annotations: Mapping[str, str] = field(default_factory=_no_labels)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    extended: Mapping[str, int] = field(default_factory=_no_amounts)
    """Allocatable resources other than CPU, memory and pods (e.g. ``nvidia.com/gpu``)."""

    @property
    def instance_type(self) -> str:
        """The instance type label, or ``""``."""
        for key in INSTANCE_TYPE_LABELS:
            if key in self.labels:
                return self.labels[key]
        return ""

    @property
    def shape(self) -> tuple[str, int, int]:
        """What makes two nodes interchangeable: instance type and capacity."""
        return (self.instance_type, self.capacity.cpu, self.capacity.memory)


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as the tuner sees it; ``requests`` are the effective scheduling requests."""

    namespace: str
    name: str
    node: str | None
    requests: Resources
    workload: Workload
    owner_kind: str
    """Controller kind: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, Node (mirror) or ""."""
    labels: Mapping[str, str] = field(default_factory=_no_labels)
    annotations: Mapping[str, str] = field(default_factory=_no_labels)
    constraints: Constraints = field(default_factory=Constraints)
    phase: str = "Running"
    ready: bool = True

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def follows_node(self) -> bool:
        """DaemonSet and mirror pods stay with their node and vanish with it."""
        return self.owner_kind in ("DaemonSet", "Node")

    @property
    def pending(self) -> bool:
        """Not bound to a node yet, or bound but still in phase Pending."""
        return self.node is None or self.phase == "Pending"


@dataclass(frozen=True, slots=True)
class Pdb:
    """A PodDisruptionBudget and how many disruptions it allows now."""

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int

    def covers(self, pod: Pod) -> bool:
        """True when the budget selects the pod."""
        return pod.namespace == self.namespace and self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class Hpa:
    """A HorizontalPodAutoscaler and the workload it scales."""

    namespace: str
    name: str
    target: Workload
    min_replicas: int
    max_replicas: int
    usage_ratio: float | None = None
    """Its current metric over its target, as it last measured them (``status.currentMetrics``'
    ``averageUtilization`` over the spec's, the highest of its CPU and memory Utilization
    metrics), over its pods Ready then; None where not known (a metric of another type, or not
    measured yet)."""


@dataclass(frozen=True)
class Cluster:
    """A snapshot of the cluster. Pods without a node are pending."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    pdbs: tuple[Pdb, ...] = ()
    hpas: tuple[Hpa, ...] = ()
    preferred_labels: Mapping[Workload, frozenset[str]] = field(default_factory=_no_templates)
    """For each Deployment and ReplicaSet whose object the source holds, the node label keys
    its pod template's preferred node affinity selects on (a workload missing here: unknown)."""

    @cached_property
    def node_by_name(self) -> Mapping[str, Node]:
        """Nodes by name."""
        return MappingProxyType({n.name: n for n in self.nodes})

    @cached_property
    def pods_by_node(self) -> Mapping[str, tuple[Pod, ...]]:
        """Scheduled pods grouped by node name (every node has an entry)."""
        grouped: dict[str, list[Pod]] = defaultdict(list)
        for pod in self.pods:
            if pod.node is not None:
                grouped[pod.node].append(pod)
        return MappingProxyType({n.name: tuple(grouped.get(n.name, ())) for n in self.nodes})

    @cached_property
    def label_counts(self) -> Mapping[tuple[str, Labels], Mapping[str, int]]:
        """Scheduled pods per node by namespace and labels (sorted pairs): what the rules that
        count pods select on, computed once for every snapshot and census of the cluster."""
        pairs = Counter(
            ((p.namespace, freeze_labels(p.labels)), p.node) for p in self.pods if p.node
        )
        out: dict[tuple[str, Labels], dict[str, int]] = {}
        for (key, node), count in pairs.items():
            where = out.get(key)
            if where is None:
                where = out[key] = {}
            where[node or ""] = count
        return MappingProxyType(out)

    @cached_property
    def pods_per_workload(self) -> Mapping[Workload, int]:
        """How many pods each workload has (pending ones too)."""
        return MappingProxyType(Counter(p.workload for p in self.pods))

    @cached_property
    def ready_per_workload(self) -> Mapping[Workload, int]:
        """How many bound, Ready pods each workload has."""
        return MappingProxyType(
            Counter(p.workload for p in self.pods if p.node is not None and p.ready)
        )

    @cached_property
    def workload_requests(self) -> Mapping[Workload, Resources]:
        """Each workload's pod requests (its last pod's)."""
        return MappingProxyType({p.workload: p.requests for p in self.pods})

    @cached_property
    def total_requests(self) -> Resources:
        """Sum of the requests of every pod (pending ones too)."""
        return Resources.total([p.requests for p in self.pods])

    @cached_property
    def hpa_targets(self) -> frozenset[Workload]:
        """Workloads whose replica count an HPA owns."""
        return frozenset(h.target for h in self.hpas)

    def requested(self, node: str) -> Resources:
        """Sum of the requests of the pods on a node."""
        return Resources.total([p.requests for p in self.pods_by_node[node]])
