"""The Cluster Autoscaler, with its default flags.

Scale-up (every scan): pending pods that fit on no ready node are packed first-fit onto the
free room of nodes already coming up; for the rest, each node pool estimates how many of its
template nodes (allocatable minus the DaemonSet pods) they need, first-fit, capped at the pool's
maximum; the ``--expander`` picks one pool (:mod:`tuner.sim.expander`) and that many of its
nodes are requested; they become ready after ``provisioning_delay``. A pod with constraints of
its own (the tuner's placeholder: a node selector, a required affinity) only counts for the
nodes and pool templates it may run on. Its priority (the placeholder's -10, at the default
``--expendable-pods-priority-cutoff``) is not expendable, so it triggers a scale-up as any
pod does. The Cluster Autoscaler simulates with kube-scheduler's filters, so a pod's rules
that count other pods (topology spread, pod affinity and anti-affinity) hold too: a pending
pod counts for a booting node or a pool's template only if it could go there as a new, empty
node of the census (each pod checked alone, not against the others packed beside it).

Scale-down (every scan): a node is *unneeded* when its utilization, max(CPU, memory) requests
(DaemonSet pods included) over allocatable, is below ``utilization_threshold`` (0.5) and all its
pods can be placed on the other nodes (pods already hinted onto a node count there; nodes found
removable in the same pass are not destinations; the census of the rules that count pods
follows the hinted moves, and a node whose pods break such a rule elsewhere stays). It carries
the ``PreferNoSchedule``
``DeletionCandidateOfClusterAutoscaler`` taint while unneeded. A node unneeded for
``unneeded_time`` (10 min) is deleted and its pods are evicted and rescheduled: empty nodes
up to ``max_empty_bulk_delete`` (10) at once, one node with pods per scan. Within
``delay_after_add`` (10 min) of a scale-up nothing is deleted and the taints are left as they
are (unneeded time still accrues): the Cluster Autoscaler updates its soft taints only when
scale-down is not in cooldown (``core/static_autoscaler.go``), so a node it just added is not
marked a deletion candidate before the pods it was added for reach it. No pool shrinks below its
minimum. Nodes
running ``kube-system`` pods that are neither DaemonSet pods nor covered by a
PodDisruptionBudget are skipped (``--skip-nodes-with-system-pods=true``), and so are nodes with
pods whose PodDisruptionBudget allows too few disruptions, and nodes with a pod no controller
owns (the tuner's placeholder; the Cluster Autoscaler FAQ's "pods that are not backed by a
controller object", which it would not re-create elsewhere).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from tuner.model.census import Census
from tuner.model.constraints import HOSTNAME_KEY, Constraints, Taint
from tuner.model.resources import Resources
from tuner.model.scheduling import resource_fit, static_fit
from tuner.sim.expander import ScaleUpOption, choose
from tuner.sim.pools import NodeGroup
from tuner.sim.state import (
    DELETION_CANDIDATE,
    SimCluster,
    SimNode,
    SimPod,
    TemplateNode,
    pool_labels,
)
from tuner.sim.workloads import Service

CANDIDATE_TAINT = Taint(DELETION_CANDIDATE, "", "PreferNoSchedule")


@dataclass(frozen=True, slots=True)
class AutoscalerConfig:
    """Cluster Autoscaler flags (the CA's defaults)."""

    scan_interval: float = 10.0
    provisioning_delay: float = 120.0
    """Seconds from the scale-up decision until the node is Ready (a VM boot and kubelet join;
    an assumption, typical of GCE/EC2)."""
    utilization_threshold: float = 0.5
    unneeded_time: float = 600.0
    delay_after_add: float = 600.0
    max_empty_bulk_delete: int = 10
    skip_nodes_with_system_pods: bool = True
    expander: str = "random"
    """``random`` (the CA's default), ``least-waste`` or ``price`` (:mod:`tuner.sim.expander`)."""


@dataclass
class ClusterAutoscaler:
    """The autoscaler's state between scans."""

    config: AutoscalerConfig
    pools: tuple[NodeGroup, ...]
    daemonsets: tuple[Service, ...]
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    pool_label: str = ""
    """The node label naming a node's pool (see
    :data:`tuner.model.conventions.POOL_LABEL_BY_SYSTEM`)."""
    unneeded_since: dict[str, float] = field(default_factory=dict)
    last_scale_up: float = -1e18
    next_scan: float = -math.inf
    """When the next scan is due; the first step scans (the warm-up runs at negative times)."""
    scale_ups: int = 0
    scale_downs: int = 0

    # -- scale-up ------------------------------------------------------------------------------

    def template_room(self, pool: NodeGroup) -> Resources:
        """What a new node of ``pool`` offers pods: allocatable minus its DaemonSet pods."""
        used = Resources.total([Resources(s.cpu, s.memory) for s in self.daemonsets])
        return pool.node_type.allocatable - used

    def estimate(
        self, pool: NodeGroup, pods: list[SimPod], size: int, census: Census | None = None
    ) -> ScaleUpOption | None:
        """How many new ``pool`` nodes the pods need, first-fit over template nodes, capped by
        the pool's maximum; None when no pod fits or the pool is full.

        First-fit places a pod in the first node it fits, so the nodes within the cap fill the
        same whether or not nodes beyond it are opened: a pod that fits none of them is passed
        over (it waits, as it would on a node the pool may not add), which keeps a full pool
        and a long queue of pending pods cheap."""
        cap = pool.max_nodes - size
        if cap <= 0:
            return None
        room = self.template_room(pool)
        slots = pool.node_type.max_pods - len(self.daemonsets)
        labels = pool_labels(pool.node_type, pool.name, self.pool_label, pool.zone)
        template = TemplateNode({**labels, HOSTNAME_KEY: f"{pool.name}-template"})
        bins: list[Bin] = []
        """One per new node."""
        for pod in pods:
            req = pod.requests
            if resource_fit(req, room, slots) is not None or not _allows(
                pod, template, census, f"{pool.name}-template"
            ):
                continue
            for free in bins:
                if free.fits(req):
                    break
            else:
                if len(bins) == cap:
                    continue
                free = Bin(room.cpu, room.memory, slots)
                bins.append(free)
            free.put(req)
        if not bins:
            return None
        count = sum(b.pods for b in bins)
        cpu = sum(b.packed_cpu for b in bins)
        memory = sum(b.packed_memory for b in bins)
        return ScaleUpOption(pool, len(bins), count, Resources(cpu, memory), room)

    def scale_up(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> int:
        """Request nodes for pods that fit nowhere, in the pool the expander picks; returns
        how many."""
        if not unschedulable:
            return 0
        booting = [n for n in cluster.nodes.values() if not n.ready(now) and n.registered]
        if not booting and all(cluster.pool_size(p.name) >= p.max_nodes for p in self.pools):
            return 0  # no room coming and none to ask for: pods that wait stay waiting
        bins = [Bin.free_on(n) for n in booting]
        census = cluster.census(now)
        waiting: list[SimPod] = []
        for pod in sorted(unschedulable, key=lambda p: (-p.service.cpu, p.uid)):
            req = pod.requests
            room = next(
                (
                    b
                    for b, n in zip(bins, booting, strict=True)
                    if b.fits(req) and _allows(pod, n, census, n.name)
                ),
                None,
            )
            if room is None:
                waiting.append(pod)
                continue
            room.put(req)
        if not waiting:
            return 0
        estimates = (
            self.estimate(p, waiting, cluster.pool_size(p.name), census) for p in self.pools
        )
        options = [o for o in estimates if o is not None]
        if not options:
            return 0
        chosen = choose(self.config.expander, options, self.rng)
        for _ in range(chosen.nodes):
            cluster.add_node(
                chosen.pool.node_type,
                now,
                self.config.provisioning_delay,
                chosen.pool.name,
                self.pool_label,
                chosen.pool.zone,
            )
        self.last_scale_up = now
        self.scale_ups += chosen.nodes
        return chosen.nodes

    # -- scale-down ----------------------------------------------------------------------------

    def _blocked(self, cluster: SimCluster, node: SimNode) -> bool:
        """A pod that may not be drained: a bare pod (a placeholder), a ``kube-system`` pod
        without a PodDisruptionBudget (under ``--skip-nodes-with-system-pods``), or pods whose
        budget allows fewer disruptions than the node holds of them."""
        on_node: dict[Service, int] = {}
        for pod in cluster.pods_on(node):
            if pod.daemon:
                continue
            if pod.placeholder:
                return True  # not replicated
            service = pod.service
            if service.pdb_max_unavailable is None:
                if self.config.skip_nodes_with_system_pods and service.namespace == "kube-system":
                    return True
                continue
            on_node[service] = on_node.get(service, 0) + 1
        return any((cluster.disruptions_allowed(s) or 0) < n for s, n in on_node.items())

    @staticmethod
    def utilization(node: SimNode) -> float:
        """max(CPU, memory) requests over allocatable."""
        alloc = node.allocatable
        return max(node.cpu / alloc.cpu, node.memory / alloc.memory)

    def find_unneeded(self, cluster: SimCluster, now: float) -> list[str]:
        """Nodes removable now, in the order the autoscaler found them."""
        nodes = sorted((n for n in cluster.nodes.values() if n.ready(now)), key=lambda n: n.name)
        room = {n.name: Bin.free_on(n) for n in nodes}
        schedulable = [n for n in nodes if static_fit(SERVICE_POD, n) is None]
        census = cluster.census(now)
        removable: dict[str, None] = {}
        """Insertion-ordered set: found removable, so no destination."""
        for node in nodes:
            if self.utilization(node) >= self.config.utilization_threshold:
                continue
            if self._blocked(cluster, node):
                continue
            moved = [p for p in cluster.pods_on(node) if not p.daemon]
            plan: list[tuple[str, SimPod]] = []
            targets = [n for n in schedulable if n is not node and n.name not in removable]
            marker = census.fork() if census is not None else 0
            for pod in sorted(moved, key=lambda p: (-p.service.cpu, p.uid)):
                req = pod.requests
                if census is not None:
                    census.remove(node.name, pod)
                target = next(
                    (
                        t
                        for t in targets
                        if room[t.name].fits(req)
                        and (census is None or census.why_not(pod, t.name) is None)
                    ),
                    None,
                )
                if target is None:
                    break
                plan.append((target.name, pod))
                if census is not None:
                    census.add(target.name, pod)
                room[target.name].put(req)
            if len(plan) < len(moved):
                for target_name, pod in plan:  # undo the partial hints
                    room[target_name].take_out(pod.requests)
                if census is not None:
                    census.revert(marker)
                continue
            removable[node.name] = None
        return list(removable)

    def scale_down(self, cluster: SimCluster, now: float) -> list[SimPod]:
        """Track unneeded nodes and delete the ripe ones; returns the evicted pods."""
        unneeded = self.find_unneeded(cluster, now)
        self.unneeded_since = {n: self.unneeded_since.get(n, now) for n in unneeded}
        if now - self.last_scale_up < self.config.delay_after_add:
            return []
        for node in cluster.nodes.values():
            tainted = CANDIDATE_TAINT in node.taints
            if node.name in self.unneeded_since and not tainted:
                node.taints = (*node.taints, CANDIDATE_TAINT)
                cluster.changed()
            elif node.name not in self.unneeded_since and tainted:
                node.taints = tuple(t for t in node.taints if t != CANDIDATE_TAINT)
                cluster.changed()
        ripe = [n for n in unneeded if now - self.unneeded_since[n] >= self.config.unneeded_time]
        budget = {p.name: cluster.pool_size(p.name) - p.min_nodes for p in self.pools}
        doomed: list[str] = []
        for name in ripe:  # empty nodes first, in bulk
            pool = cluster.nodes[name].pool
            if (
                len(doomed) < self.config.max_empty_bulk_delete
                and budget.get(pool, 0) > 0
                and all(cluster.pods[u].daemon for u in cluster.nodes[name].pods)
            ):
                doomed.append(name)
                budget[pool] -= 1
        if not doomed:  # else one node with pods
            doomed = [n for n in ripe if budget.get(cluster.nodes[n].pool, 0) > 0][:1]
        evicted: list[SimPod] = []
        for name in doomed:
            evicted += cluster.delete_node(name)
            self.unneeded_since.pop(name, None)
            self.scale_downs += 1
        return evicted

    def step(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> list[SimPod]:
        """One scan, if one is due: scale up, else consider scale-down."""
        if now < self.next_scan:
            return []
        self.next_scan = now + self.config.scan_interval
        if self.scale_up(cluster, unschedulable, now):
            return []
        return self.scale_down(cluster, now)


def _allows(pod: SimPod, node: SimNode | TemplateNode, census: Census | None, name: str) -> bool:
    """The pod's static rules admit the node, and so do its rules that count other pods were
    the node to join the census (as ``name``) empty."""
    if static_fit(pod.constraints, node) is not None:
        return False
    return census is None or not pod.counted or census.would_fit(pod, name, node) is None


SERVICE_POD = Constraints()
"""The constraints of a simulated service's pod (none): the drain simulation's static filter."""


class Bin:
    """The room left on one node, existing, booting or yet to be requested: free CPU, memory
    and pod slots, and what the pods packed onto it request."""

    __slots__ = ("cpu", "memory", "packed_cpu", "packed_memory", "pods", "slots")

    def __init__(self, cpu: int, memory: int, slots: int) -> None:
        self.cpu, self.memory, self.slots = cpu, memory, slots
        self.packed_cpu = self.packed_memory = self.pods = 0

    @classmethod
    def free_on(cls, node: SimNode) -> Bin:
        """The room a node has now."""
        free = node.free()
        return cls(free.cpu, free.memory, node.type.max_pods - len(node.pods))

    def fits(self, requests: Resources) -> bool:
        """The model's resource rule (CPU, memory, a pod slot) on this room."""
        return resource_fit(requests, Resources(self.cpu, self.memory), self.slots) is None

    def put(self, requests: Resources) -> None:
        """Pack a pod with these requests here."""
        self.cpu -= requests.cpu
        self.memory -= requests.memory
        self.slots -= 1
        self.packed_cpu += requests.cpu
        self.packed_memory += requests.memory
        self.pods += 1

    def take_out(self, requests: Resources) -> None:
        """Undo :meth:`put`."""
        self.cpu += requests.cpu
        self.memory += requests.memory
        self.slots += 1
        self.packed_cpu -= requests.cpu
        self.packed_memory -= requests.memory
        self.pods -= 1
