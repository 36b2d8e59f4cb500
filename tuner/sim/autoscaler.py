"""The Cluster Autoscaler, with its default flags.

Scale-up (every scan): pending pods that fit on no ready node are packed first-fit onto the
free room of nodes already coming up, then onto new template nodes (with their DaemonSet
pods); that many nodes are requested and become ready after ``provisioning_delay``.

Scale-down (every scan): a node is *unneeded* when its utilization, max(CPU, memory) requests
(DaemonSet pods included) over allocatable, is below ``utilization_threshold`` (0.5) and all its
pods can be placed on the other nodes (pods already hinted onto a node count there; nodes found
removable in the same pass are not destinations). It carries the ``PreferNoSchedule``
``DeletionCandidateOfClusterAutoscaler`` taint while unneeded. A node unneeded for
``unneeded_time`` (10 min) is deleted and its pods are evicted and rescheduled: empty nodes
up to ``max_empty_bulk_delete`` (10) at once, one node with pods per scan. Nothing is deleted
within ``delay_after_add`` (10 min) of a scale-up. Nodes running pods of ``kube-system`` that
are not DaemonSet pods are skipped (``--skip-nodes-with-system-pods=true``), and so are nodes
with bare pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.model.resources import Resources
from tuner.model.scheduling import Taint
from tuner.sim.prices import NodeType
from tuner.sim.state import DELETION_CANDIDATE, SimCluster, SimNode, SimPod
from tuner.sim.workloads import Service

CANDIDATE_TAINT = Taint(DELETION_CANDIDATE, "", "PreferNoSchedule")


@dataclass(frozen=True, slots=True)
class AutoscalerConfig:
    """Cluster Autoscaler flags (defaults of the CA) and the node pool."""

    node_type: NodeType
    min_nodes: int = 1
    max_nodes: int = 100
    scan_interval: float = 10.0
    provisioning_delay: float = 120.0
    """Seconds from the scale-up decision until the node is Ready (a VM boot and kubelet join;
    an assumption, typical of GCE/EC2)."""
    utilization_threshold: float = 0.5
    unneeded_time: float = 600.0
    delay_after_add: float = 600.0
    max_empty_bulk_delete: int = 10
    skip_nodes_with_system_pods: bool = True
    pool: str = "pool"


@dataclass
class ClusterAutoscaler:
    """The autoscaler's state between scans."""

    config: AutoscalerConfig
    daemonsets: tuple[Service, ...]
    unneeded_since: dict[str, float] = field(default_factory=dict)
    last_scale_up: float = -1e18
    next_scan: float = 0.0
    scale_ups: int = 0
    scale_downs: int = 0

    # -- scale-up ------------------------------------------------------------------------------

    def _template_free(self) -> Resources:
        alloc = self.config.node_type.allocatable
        used = Resources.total([Resources(s.cpu, s.memory) for s in self.daemonsets])
        return alloc - used

    def scale_up(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> int:
        """Request nodes for pods that fit nowhere; returns how many."""
        if not unschedulable:
            return 0
        template = self._template_free()
        slots = self.config.node_type.max_pods - len(self.daemonsets)
        bins: list[list[int]] = [
            [n.free().cpu, n.free().memory, n.type.max_pods - len(n.pods)]
            for n in cluster.nodes.values()
            if not n.ready(now) and n.registered
        ]
        upcoming = len(bins)
        for pod in sorted(unschedulable, key=lambda p: (-p.service.cpu, p.uid)):
            req = pod.requests
            if not req.fits_in(template):
                continue
            for room in bins:
                if room[0] >= req.cpu and room[1] >= req.memory and room[2] >= 1:
                    break
            else:
                room = [template.cpu, template.memory, slots]
                bins.append(room)
            room[0] -= req.cpu
            room[1] -= req.memory
            room[2] -= 1
        wanted = len(bins) - upcoming
        room_left = self.config.max_nodes - len(cluster.nodes)
        count = max(min(wanted, room_left), 0)
        for _ in range(count):
            cluster.add_node(
                self.config.node_type, now, self.config.provisioning_delay, self.config.pool
            )
        if count:
            self.last_scale_up = now
            self.scale_ups += count
        return count

    # -- scale-down ----------------------------------------------------------------------------

    def _blocked(self, cluster: SimCluster, node: SimNode) -> bool:
        for pod in cluster.pods_on(node):
            if pod.daemon:
                continue
            if self.config.skip_nodes_with_system_pods and pod.service.namespace == "kube-system":
                return True
        return False

    @staticmethod
    def utilization(node: SimNode) -> float:
        """max(CPU, memory) requests over allocatable."""
        alloc = node.allocatable
        return max(node.cpu / alloc.cpu, node.memory / alloc.memory)

    def find_unneeded(self, cluster: SimCluster, now: float) -> list[str]:
        """Nodes removable now, in the order the autoscaler found them."""
        nodes = sorted((n for n in cluster.nodes.values() if n.ready(now)), key=lambda n: n.name)
        room = {n.name: [*_free(n), n.type.max_pods - len(n.pods)] for n in nodes}
        removable: list[str] = []
        for node in nodes:
            if self.utilization(node) >= self.config.utilization_threshold:
                continue
            if self._blocked(cluster, node):
                continue
            moved = [p for p in cluster.pods_on(node) if not p.daemon]
            plan: list[tuple[str, SimPod]] = []
            targets = [
                n
                for n in nodes
                if n is not node
                and n.name not in removable
                and not n.unschedulable
                and not any(t.effect in ("NoSchedule", "NoExecute") for t in n.taints)
            ]
            for pod in sorted(moved, key=lambda p: (-p.service.cpu, p.uid)):
                req = pod.requests
                target = next(
                    (
                        t
                        for t in targets
                        if room[t.name][0] >= req.cpu
                        and room[t.name][1] >= req.memory
                        and room[t.name][2] >= 1
                    ),
                    None,
                )
                if target is None:
                    break
                plan.append((target.name, pod))
                r = room[target.name]
                r[0] -= req.cpu
                r[1] -= req.memory
                r[2] -= 1
            if len(plan) < len(moved):
                for target_name, pod in plan:  # undo the partial hints
                    r = room[target_name]
                    r[0] += pod.service.cpu
                    r[1] += pod.service.memory
                    r[2] += 1
                continue
            removable.append(node.name)
        return removable

    def scale_down(self, cluster: SimCluster, now: float) -> list[SimPod]:
        """Track unneeded nodes and delete the ripe ones; returns the evicted pods."""
        unneeded = self.find_unneeded(cluster, now)
        self.unneeded_since = {n: self.unneeded_since.get(n, now) for n in unneeded}
        for node in cluster.nodes.values():
            tainted = CANDIDATE_TAINT in node.taints
            if node.name in self.unneeded_since and not tainted:
                node.taints = (*node.taints, CANDIDATE_TAINT)
                cluster.changed()
            elif node.name not in self.unneeded_since and tainted:
                node.taints = tuple(t for t in node.taints if t != CANDIDATE_TAINT)
                cluster.changed()
        if now - self.last_scale_up < self.config.delay_after_add:
            return []
        ripe = [n for n in unneeded if now - self.unneeded_since[n] >= self.config.unneeded_time]
        ready = sum(1 for n in cluster.nodes.values() if n.ready(now))
        budget = max(ready - self.config.min_nodes, 0)
        empty = [n for n in ripe if all(cluster.pods[u].daemon for u in cluster.nodes[n].pods)]
        doomed = empty[: min(self.config.max_empty_bulk_delete, budget)]
        if not doomed and budget:
            busy = [n for n in ripe if n not in empty]
            doomed = busy[:1]
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


def _free(node: SimNode) -> tuple[int, int]:
    free = node.free()
    return free.cpu, free.memory
