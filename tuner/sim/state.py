"""The simulated cluster's mutable state: nodes, pods, and its immutable domain-model view.

The simulator mutates this state; the tuner only ever sees :meth:`SimCluster.view`, a
:class:`~tuner.model.cluster.Cluster` value built from it (cached until the next change), its
own placeholder pods among the others, as bare pods with the ``<prefix>/placeholder`` label
(what the Kubernetes API shows the daemon).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tuner.model.census import Census
from tuner.model.cluster import Cluster, Hpa, Node, Pdb, Pod
from tuner.model.constraints import ZONE_KEY, Constraints, LabelSelector, Taint
from tuner.model.conventions import DEFAULT_PREFIX, Keys, workload_label
from tuner.model.resources import Resources
from tuner.sim.prices import NodeType
from tuner.sim.workloads import Service

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
HOSTNAME = "kubernetes.io/hostname"
DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"
NO_EXTENDED: Mapping[str, int] = MappingProxyType({})
NON_ZERO_CPU = 100
"""Millicores kube-scheduler's resource scoring counts for a container without a CPU request
(``schedutil.DefaultMilliCPURequest``)."""
NON_ZERO_MEMORY = 200 * 2**20
"""Bytes it counts for one without a memory request (``DefaultMemoryRequest``)."""


def pool_labels(node_type: NodeType, pool: str, pool_label: str, zone: str = "") -> dict[str, str]:
    """The labels every node of a pool carries (its template's), its zone's among them."""
    labels = {INSTANCE_TYPE: node_type.name}
    if pool_label:
        labels[pool_label] = pool
    if zone:
        labels[ZONE_KEY] = zone
    return labels


def scored_requests(service: Service) -> tuple[int, int]:
    """A pod's CPU and memory requests as kube-scheduler's NodeResourcesFit scoring counts them:
    one the simulator leaves at 0 (none set) at the non-zero defaults."""
    return service.cpu or NON_ZERO_CPU, service.memory or NON_ZERO_MEMORY


def affinity_label(service: Service) -> str:
    """The per-workload node label the tuner's onboarding gives a preferred affinity to."""
    return workload_label(DEFAULT_PREFIX, service.namespace, service.name)


@dataclass(frozen=True)
class TemplateNode:
    """A node that does not exist yet (a pool's next one, a planned claim), as the fit rules
    read it: its labels, schedulable, untainted, no extended resources."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    extended: Mapping[str, int] = field(default_factory=lambda: NO_EXTENDED)


@dataclass(eq=False)
class SimNode:
    """A node (a VM): billed from ``created`` on, schedulable from ``ready_at`` on."""

    name: str
    type: NodeType
    created: float
    ready_at: float
    pool: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    registered: bool = True
    """False while a node whose Node object was deleted re-registers (its VM still runs)."""
    cpu: int = 0
    memory: int = 0
    scored_cpu: int = 0
    """Its pods' CPU requests as kube-scheduler's resource scoring counts them
    (:func:`scored_requests`); ``scored_memory`` likewise."""
    scored_memory: int = 0
    pods: set[int] = field(default_factory=set)

    def ready(self, now: float) -> bool:
        """Registered and past its provisioning delay."""
        return self.registered and now >= self.ready_at

    @property
    def allocatable(self) -> Resources:
        """What pods may use."""
        return self.type.allocatable

    def free(self) -> Resources:
        """Allocatable minus requests."""
        alloc = self.type.allocatable
        return Resources(alloc.cpu - self.cpu, alloc.memory - self.memory)

    @property
    def extended(self) -> Mapping[str, int]:
        """Extended resources it offers: none (no simulated node type has GPUs)."""
        return NO_EXTENDED


@dataclass
class PodTotals:
    """Pending pods, and the count and requests of the non-DaemonSet pods."""

    pending: int = 0
    pods: int = 0
    cpu: int = 0
    memory: int = 0

    def add(self, pod: SimPod, sign: int) -> None:
        """Count a pod in (sign 1, as created: pending) or out (-1); placeholders are not."""
        if pod.placeholder:
            return
        if pod.node is None:
            self.pending += sign
        if not pod.daemon:
            self.pods += sign
            self.cpu += sign * pod.service.cpu
            self.memory += sign * pod.service.memory


@dataclass(eq=False)
class SimPod:
    """A pod of a service; ``node`` is None while it is pending."""

    uid: int
    name: str
    service: Service
    created: float
    node: str | None = None
    bound_at: float = 0.0
    own: Constraints | None = None
    """A placeholder's node selector, required affinity and tolerations; None for a
    workload's pod (which has its service's)."""
    value: Pod | None = field(default=None, repr=False)
    """Its domain-model view, made once per node it is on (:func:`_pod_value`)."""
    constraints: Constraints = field(init=False, repr=False)
    """Where it may run: a placeholder's own constraints, else its service's rules (this and
    the two below are attributes: the scheduler and every census read them of every pod)."""
    namespace: str = field(init=False, repr=False)
    """Its service's namespace."""
    labels: Mapping[str, str] = field(init=False, repr=False)
    """Its labels (``app``: its service's name)."""

    def __post_init__(self) -> None:
        self.constraints = self.own if self.own is not None else self.service.rules
        self.namespace, self.labels = self.service.namespace, self.service.labels

    @property
    def placeholder(self) -> bool:
        """The tuner's placeholder (asks the autoscaler for a node): no workload's pod, so not
        counted among the pending or running pods."""
        return self.own is not None

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.service.namespace}/{self.name}"

    @property
    def counted(self) -> bool:
        """Whether a rule about other pods, or a host port, applies to it."""
        rules = self.constraints
        return rules.counts_pods or bool(rules.host_ports or rules.extended)

    @property
    def requests(self) -> Resources:
        """Its scheduling requests."""
        return Resources(self.service.cpu, self.service.memory)

    @property
    def daemon(self) -> bool:
        """DaemonSet pods follow their node."""
        return self.service.kind == "DaemonSet"


class SimCluster:
    """Nodes and pods, with incremental per-node requests, and a cached domain-model view."""

    def __init__(self) -> None:
        self.nodes: dict[str, SimNode] = {}
        self.pods: dict[int, SimPod] = {}
        self.by_service: dict[Service, set[int]] = {}
        self.by_name: dict[str, int] = {}
        self.waiting: dict[int, SimPod] = {}
        """Pending pods by uid, oldest first (a pod is pending from its creation until it is
        bound; it is never unbound)."""
        self.version = 0
        self.totals = PodTotals()
        """Running totals of the pods (for per-tick measurements without a pass over pods)."""
        self.bound: dict[Service, int] = {}
        """Bound pods per service."""
        self.recent_binds: deque[tuple[float, SimPod]] = deque()
        """(bound at, pod) of recent bindings, oldest first, for readiness after startup."""
        self.evictions = 0
        """Pods evicted so far, by any actor."""
        self.surges: dict[Service, int] = {}
        """The new pod (uid) of each workload in a surge move: its new ReplicaSet's, which the
        workload's ReplicaSet does not count until the handover."""
        self.touched_nodes: set[str] = set()
        """Nodes that joined, left, were cordoned or had pods start or stop on them since the
        simulation last collected them (for the window's per-node stability)."""
        self.touched_services: set[Service] = set()
        """Services whose pod count changed since last collected."""
        self.bound_services: set[Service] = set()
        """Services with a pod bound (not ready until its startup passed) since last collected."""
        self.counted = 0
        """Pods a rule about other pods (or a host port) applies to: the census is needed."""
        self.placeholders = 0
        """The tuner's placeholder pods (pending or bound): preemption has victims to look for."""
        self._uid = 0
        self._node_seq = 0
        self._view: tuple[int, tuple[Hpa, ...], Cluster] | None = None

    # -- nodes ---------------------------------------------------------------------------------

    def add_node(
        self,
        node_type: NodeType,
        now: float,
        delay: float,
        pool: str,
        pool_label: str = "",
        zone: str = "",
    ) -> SimNode:
        """Request a node of ``pool``; it becomes ready after ``delay`` seconds. With
        ``pool_label``, the node carries the pool's name under that label key; with ``zone``,
        its zone under ``topology.kubernetes.io/zone``."""
        self._node_seq += 1
        name = f"{pool}-{self._node_seq:04d}"
        labels = {HOSTNAME: name, **pool_labels(node_type, pool, pool_label, zone)}
        node = SimNode(name, node_type, created=now, ready_at=now + delay, pool=pool, labels=labels)
        self.nodes[name] = node
        self.touched_nodes.add(name)
        self.changed()
        return node

    def delete_node(self, name: str) -> list[SimPod]:
        """Delete a node (the VM goes): its pods are evicted first (counted), its DaemonSet
        pods go with it; returns the evicted pods (their ReplicaSets re-create them)."""
        node = self.nodes[name]
        evicted = [p for p in self.pods_on(node) if not p.daemon]
        for pod in evicted:
            self.evict(pod)
        for pod in self.pods_on(node):
            self._forget(pod)
        del self.nodes[name]
        self.touched_nodes.add(name)
        self.changed()
        return evicted

    def pool_size(self, pool: str) -> int:
        """Nodes of ``pool`` that exist (booting ones included)."""
        return sum(1 for n in self.nodes.values() if n.pool == pool)

    # -- pods ----------------------------------------------------------------------------------

    def create_pod(
        self, service: Service, now: float, constraints: Constraints | None = None
    ) -> SimPod:
        """A new pending pod of ``service`` (a placeholder with ``constraints``)."""
        self._uid += 1
        name = f"{service.name}-{self._uid:06d}"
        pod = SimPod(self._uid, name, service, created=now, own=constraints)
        self.totals.add(pod, 1)
        self.counted += pod.counted
        self.placeholders += pod.placeholder
        self.pods[pod.uid] = pod
        self.waiting[pod.uid] = pod
        self.by_service.setdefault(service, set()).add(pod.uid)
        self.by_name[name] = pod.uid
        self.touched_services.add(service)
        self.changed()
        return pod

    def bind(self, pod: SimPod, node: SimNode, now: float) -> None:
        """Place a pending pod on a node."""
        pod.node = node.name
        pod.bound_at = now
        del self.waiting[pod.uid]
        if not pod.placeholder:
            self.totals.pending -= 1
        self.bound[pod.service] = self.bound.get(pod.service, 0) + 1
        self.recent_binds.append((now, pod))
        node.pods.add(pod.uid)
        node.cpu += pod.service.cpu
        node.memory += pod.service.memory
        cpu, memory = scored_requests(pod.service)
        node.scored_cpu += cpu
        node.scored_memory += memory
        self.touched_nodes.add(node.name)
        self.bound_services.add(pod.service)
        self.changed()

    def delete_pod(self, pod: SimPod) -> None:
        """Remove a pod from the cluster."""
        if pod.node is not None:
            node = self.nodes[pod.node]
            node.pods.discard(pod.uid)
            node.cpu -= pod.service.cpu
            node.memory -= pod.service.memory
            cpu, memory = scored_requests(pod.service)
            node.scored_cpu -= cpu
            node.scored_memory -= memory
            self.touched_nodes.add(node.name)
        self.touched_services.add(pod.service)
        self._forget(pod)
        self.changed()

    def evict(self, pod: SimPod) -> None:
        """Evict a pod: it is deleted (its ReplicaSet re-creates it) and counted."""
        self.delete_pod(pod)
        self.evictions += 1

    def disruptions_allowed(self, service: Service) -> int | None:
        """How many more pods of ``service`` its PodDisruptionBudget lets go now (bound pods
        count as healthy, its ReplicaSet's as expected); None without a PodDisruptionBudget."""
        budget = service.pdb_max_unavailable
        if budget is None:
            return None
        uids = self.by_service.get(service, ())
        healthy = sum(1 for uid in uids if self.pods[uid].node is not None)
        return healthy - (self.replica_count(service) - budget)

    def _forget(self, pod: SimPod) -> None:
        self.totals.add(pod, -1)
        self.counted -= pod.counted
        self.placeholders -= pod.placeholder
        if pod.node is not None:
            self.bound[pod.service] -= 1
        del self.pods[pod.uid]
        self.waiting.pop(pod.uid, None)
        self.by_service[pod.service].discard(pod.uid)
        del self.by_name[pod.name]
        if self.surges.get(pod.service) == pod.uid:
            del self.surges[pod.service]

    def pending(self) -> list[SimPod]:
        """Pods waiting for a node, oldest first (placeholders too)."""
        return list(self.waiting.values())

    def pods_of(self, service: Service) -> list[SimPod]:
        """Every pod of a service."""
        return [self.pods[uid] for uid in sorted(self.by_service.get(service, ()))]

    def count(self, service: Service) -> int:
        """How many pods a service has."""
        return len(self.by_service.get(service, ()))

    def replica_count(self, service: Service) -> int:
        """How many pods its ReplicaSet counts: all but a surge move's new pod (the controllers
        ask it of every workload at every tick: no call inside)."""
        return len(self.by_service.get(service, ())) - (service in self.surges)

    def pods_on(self, node: SimNode) -> list[SimPod]:
        """Pods on a node."""
        return [self.pods[uid] for uid in sorted(node.pods)]

    def changed(self) -> None:
        """Invalidate the cached view."""
        self.version += 1

    def census(self, now: float) -> Census | None:
        """The ready nodes and their pods as the rules that count pods read them (what
        kube-scheduler's snapshot holds), or None when no pod has such a rule."""
        if not self.counted:
            return None
        nodes = {n.name: n for n in self.nodes.values() if n.ready(now)}
        return Census(nodes, {name: self.pods_on(node) for name, node in nodes.items()})

    # -- the tuner's view ----------------------------------------------------------------------

    def view(self, now: float, hpas: Iterable[Hpa] = ()) -> Cluster:
        """The cluster as the tuner sees it: registered, ready nodes and their pods, and the
        services' PodDisruptionBudgets with the disruptions they allow now."""
        hpas = tuple(hpas)
        if self._view is not None and self._view[:2] == (self.version, hpas):
            return self._view[2]
        nodes = tuple(
            _node_value(n)
            for n in sorted(self.nodes.values(), key=lambda n: n.name)
            if n.ready(now)
        )
        names = {n.name for n in nodes}
        pods = tuple(
            _pod_value(p)
            for p in sorted(self.pods.values(), key=lambda p: p.uid)
            if p.node is None or p.node in names
        )
        pdbs = tuple(
            Pdb(
                service.namespace,
                service.name,
                LabelSelector(tuple(sorted(service.labels.items()))),
                self.disruptions_allowed(service) or 0,
            )
            for service in sorted(self.by_service, key=lambda s: (s.namespace, s.name))
            if service.pdb_max_unavailable is not None
        )
        cluster = Cluster(nodes=nodes, pods=pods, hpas=hpas, pdbs=pdbs)
        self._view = (self.version, hpas, cluster)
        return cluster


def _node_value(node: SimNode) -> Node:
    return Node(
        name=node.name,
        capacity=node.type.capacity,
        allocatable=node.type.allocatable,
        max_pods=node.type.max_pods,
        labels=MappingProxyType(dict(node.labels)),
        taints=tuple(node.taints),
        unschedulable=node.unschedulable,
    )


PLACEHOLDER_LABEL = Keys(DEFAULT_PREFIX).placeholder
"""The label of the tuner's placeholder pods (its value: the pod's name)."""


def _pod_value(pod: SimPod) -> Pod:
    """The pod as the domain model sees it, made again only once it moved."""
    if pod.value is not None and pod.value.node == pod.node:
        return pod.value
    service = pod.service
    labels = dict(service.labels)
    if pod.placeholder:
        labels[PLACEHOLDER_LABEL] = pod.name
    pod.value = Pod(
        namespace=service.namespace,
        name=pod.name,
        node=pod.node,
        requests=pod.requests,
        workload=service.workload,
        owner_kind=service.kind,
        labels=MappingProxyType(labels),
        constraints=pod.constraints,
        phase="Running" if pod.node else "Pending",
    )
    return pod.value
