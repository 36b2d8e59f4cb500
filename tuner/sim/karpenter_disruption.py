"""Karpenter's disruption controller (:mod:`tuner.sim.karpenter`): its budget, its candidates,
emptiness, multi-node and single-node consolidation, a command re-validated after its delay and
carried out, a replaced node deleted once its replacement is ready."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tuner.model.census import Census
from tuner.model.constraints import Taint
from tuner.model.resources import Resources
from tuner.sim.karpenter_packing import Offering, PlannedNode, Room, first_fit, pack_claims
from tuner.sim.state import SimCluster, SimNode, SimPod
from tuner.sim.workloads import Service

POLL = 10.0
VALIDATION_DELAY = 15.0
BUDGET_SHARE = 0.10
MULTI_NODE_MAX = 100
CONSOLIDATED_FOR = 300.0
PER_NODE_BASE_COST = 1.0
DISRUPTED_TAINT = Taint("karpenter.sh/disrupted", "", "NoSchedule")
WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"


@dataclass(frozen=True, slots=True)
class KarpenterConfig:
    """The NodePool's disruption settings (Karpenter's defaults) and the start-up delay.

    ``consolidation_policy``: ``WhenEmptyOrUnderutilized`` (the default) runs emptiness,
    multi-node and single-node consolidation; ``WhenEmpty`` only emptiness
    (``consolidation.go`` ``ShouldDisrupt``: a WhenEmpty pool's non-empty node is no
    candidate). ``consolidate_after``: seconds a node's pods must have been unchanged before it
    is a candidate (``IsUnderConsolidateAfter``, from the NodeClaim's last pod event); for an
    empty node, how long it has been empty."""

    provisioning_delay: float = 120.0
    consolidate_after: float = 0.0
    budget: float = BUDGET_SHARE
    consolidation_policy: str = WHEN_EMPTY_OR_UNDERUTILIZED


@dataclass(frozen=True, slots=True)
class Command:
    """Delete ``nodes``; launch ``replacement`` first (None: plain deletion)."""

    nodes: tuple[str, ...]
    replacement: Offering | None = None


@dataclass
class DisruptionController:
    """Karpenter's disruption controller and what it shares with the provisioner: the offerings,
    the DaemonSet overhead, launching a node."""

    offerings: tuple[Offering, ...]
    daemonsets: tuple[Service, ...]
    config: KarpenterConfig = KarpenterConfig()
    pool_label: str = ""
    next_poll: float = -math.inf
    pending_command: tuple[float, Command] | None = None
    replacing: dict[str, str] = field(default_factory=dict)
    """Node being replaced -> its replacement (launched, not yet ready)."""
    changed_at: dict[str, tuple[float, tuple[int, int, int]]] = field(default_factory=dict)
    """Node -> (when its pods last changed, their count and requests then)."""
    consolidated: tuple[int, float] | None = None
    """(cluster version, 5-minute period) of the last pass that found nothing to do."""
    launched: int = 0
    commands: dict[str, int] = field(default_factory=dict)
    """Executed commands by method (empty, multi, single)."""

    @property
    def overhead(self) -> Resources:
        """DaemonSet requests every node carries."""
        return Resources(
            sum(d.cpu for d in self.daemonsets), sum(d.memory for d in self.daemonsets)
        )

    def _launch(self, cluster: SimCluster, offerings: Sequence[Offering], now: float) -> str | None:
        """Launch the cheapest offering whose pool has room; returns the node's name."""
        open_ = [o for o in offerings if cluster.pool_size(o.pool) < o.max_nodes]
        if not open_:
            return None
        offering = PlannedNode(open_).cheapest()
        node = cluster.add_node(
            offering.node_type,
            now,
            self.config.provisioning_delay,
            offering.pool,
            self.pool_label,
            offering.zone,
        )
        self.launched += 1
        return node.name

    # -- disruption ----------------------------------------------------------------------------

    def _track_changes(self, cluster: SimCluster, now: float) -> None:
        seen: dict[str, tuple[float, tuple[int, int, int]]] = {}
        for node in cluster.nodes.values():
            pods = (len(node.pods), node.cpu, node.memory)
            before = self.changed_at.get(node.name)
            seen[node.name] = before if before is not None and before[1] == pods else (now, pods)
        self.changed_at = seen

    def _finish_replacements(self, cluster: SimCluster, now: float) -> list[SimPod]:
        evicted: list[SimPod] = []
        for old, new in list(self.replacing.items()):
            replacement = cluster.nodes.get(new)
            if replacement is not None and not replacement.ready(now):
                continue
            del self.replacing[old]
            if old in cluster.nodes:
                evicted += cluster.delete_node(old)
        return evicted

    def budget(self, cluster: SimCluster, now: float) -> int:
        """Nodes the default budget lets Karpenter disrupt now: 10 % of the initialized nodes,
        rounded up, minus those not ready or being deleted."""
        initialized = [n for n in cluster.nodes.values() if n.ready(now)]
        disrupting = sum(1 for n in initialized if n.name in self.replacing)
        return max(math.ceil(len(initialized) * self.config.budget - 1e-9) - disrupting, 0)

    def candidates(self, cluster: SimCluster, now: float) -> list[SimNode]:
        """Ready nodes not being disrupted, unchanged for ``consolidateAfter``, whose pods may
        all be evicted; by savings ratio (price over 1 + one per pod), highest first. A node
        cordoned by someone else (the tuner leaving an emptied node to it) is a candidate:
        Karpenter's ``ValidateNodeDisruptable`` does not look at ``unschedulable``."""
        out = []
        blocked: dict[Service, bool] = {}
        for node in cluster.nodes.values():
            if not node.ready(now) or DISRUPTED_TAINT in node.taints or node.name in self.replacing:
                continue  # a cordon of someone else's does not stop it (statenode.go)
            since = self.changed_at.get(node.name, (now, ()))[0]
            if now - since < self.config.consolidate_after:
                continue
            pods = [p for p in cluster.pods_on(node) if not p.daemon]
            for pod in pods:
                if pod.service not in blocked:
                    blocked[pod.service] = not evictable(cluster, pod)
            if not any(blocked[p.service] for p in pods):
                out.append(node)
        return sorted(out, key=lambda n: (-savings_ratio(cluster, n), n.name))

    def _disrupt(self, cluster: SimCluster, pending: list[SimPod], now: float) -> list[SimPod]:
        if self.pending_command is not None:
            due, computed = self.pending_command
            if now < due:
                return []
            self.pending_command = None
            return self._execute(cluster, computed, pending, now)
        if self.consolidated == (cluster.version, now - now % CONSOLIDATED_FOR):
            return []  # nothing changed since the last pass found nothing
        budget = self.budget(cluster, now)
        if budget < 1:
            return []
        candidates = self.candidates(cluster, now)
        empty = [n for n in candidates if not movable_pods(cluster, n)][:budget]
        if empty:
            self.commands["empty"] = self.commands.get("empty", 0) + 1
            return self._delete(cluster, [n.name for n in empty])
        if self.config.consolidation_policy == WHEN_EMPTY:
            return []  # a node emptied for consolidateAfter is a change Karpenter acts on
        command = self.consolidation(
            cluster, candidates[: min(budget, MULTI_NODE_MAX)], pending, now, cluster.census(now)
        )
        if command is not None:
            self.pending_command = (now + VALIDATION_DELAY, command)
        else:
            self.consolidated = (cluster.version, now - now % CONSOLIDATED_FOR)
        return []

    def consolidation(
        self,
        cluster: SimCluster,
        candidates: Sequence[SimNode],
        pending: list[SimPod],
        now: float,
        census: Census | None = None,
    ) -> Command | None:
        """Multi-node consolidation, else single-node, over candidates in order."""
        low, high, best = 1, len(candidates) - 1, None
        while low <= high:
            mid = (low + high) // 2
            command = self.evaluate(cluster, candidates[: mid + 1], pending, now, census)
            if command is not None:
                best, low = command, mid + 1
            else:
                high = mid - 1
        if best is not None:
            return best
        for node in candidates:
            command = self.evaluate(cluster, [node], pending, now, census)
            if command is not None:
                return command
        return None

    def evaluate(
        self,
        cluster: SimCluster,
        nodes: Sequence[SimNode],
        pending: list[SimPod],
        now: float,
        census: Census | None = None,
    ) -> Command | None:
        """Delete ``nodes`` if their pods fit on the other ready nodes (after the pending pods),
        or replace them with one new node cheaper than them all; None if neither, or if a
        pending pod fits on no ready node (Karpenter does not decide on nodes still starting).
        ``census``: the cluster's (see :meth:`SimCluster.census`), left as it was."""
        marker = census.fork() if census is not None else 0
        try:
            return self._evaluate(cluster, nodes, pending, now, census)
        finally:
            if census is not None:
                census.revert(marker)

    def _evaluate(
        self,
        cluster: SimCluster,
        nodes: Sequence[SimNode],
        pending: list[SimPod],
        now: float,
        census: Census | None,
    ) -> Command | None:
        names = {n.name for n in nodes}
        rooms = [
            Room(*_free(n), n.type.max_pods - len(n.pods), n.name, host=n)
            for n in sorted(cluster.nodes.values(), key=lambda n: n.name)
            if n.name not in names
            and n.ready(now)
            and not n.unschedulable
            and n.name not in self.replacing
        ]
        if first_fit(pending, rooms, census):
            return None  # a pending pod needs a node that is starting or yet to be launched
        leaving = [p for n in nodes for p in movable_pods(cluster, n)]
        if census is not None:
            for pod in leaving:
                if pod.node is not None:
                    census.remove(pod.node, pod)
        left = first_fit(leaving, rooms, census)
        if not left:
            return Command(tuple(sorted(names)))
        claims, unfit = pack_claims(
            left, self.offerings, self.overhead, len(self.daemonsets), census, self.pool_label
        )
        if unfit or len(claims) != 1:
            return None
        price = sum(n.type.price for n in nodes)
        options = claims[0].offerings
        if len(nodes) > 1:  # not N nodes for one of a type among them: delete the others
            kept = {n.type.name for n in nodes} & {o.node_type.name for o in options}
            price = min([price, *(o.node_type.price for o in options if o.node_type.name in kept)])
        cheaper = [o for o in options if o.node_type.price < price - 1e-12]
        if not cheaper:
            return None
        return Command(tuple(sorted(names)), PlannedNode(cheaper).cheapest())

    def _execute(
        self, cluster: SimCluster, command: Command, pending: list[SimPod], now: float
    ) -> list[SimPod]:
        """Re-validate a command after its delay, then carry it out."""
        nodes = [cluster.nodes.get(name) for name in command.nodes]
        if any(n is None for n in nodes):
            return []
        live = [n for n in nodes if n is not None]
        still = {n.name for n in self.candidates(cluster, now)}
        if any(n.name not in still for n in live):
            return []
        if self.evaluate(cluster, live, pending, now, cluster.census(now)) != command:
            return []
        method = "single" if len(live) == 1 else "multi"
        self.commands[method] = self.commands.get(method, 0) + 1
        if command.replacement is None:
            return self._delete(cluster, list(command.nodes))
        new = self._launch(cluster, [command.replacement], now)
        if new is None:
            return []
        for node in live:
            node.unschedulable = True
            node.taints = (*node.taints, DISRUPTED_TAINT)
            self.replacing[node.name] = new
        cluster.changed()
        return []

    def _delete(self, cluster: SimCluster, names: list[str]) -> list[SimPod]:
        evicted: list[SimPod] = []
        for name in names:
            evicted += cluster.delete_node(name)
        return evicted


def movable_pods(cluster: SimCluster, node: SimNode) -> list[SimPod]:
    """The pods Karpenter reschedules when it removes a node (DaemonSet pods go with it)."""
    return [p for p in cluster.pods_on(node) if not p.daemon]


def evictable(cluster: SimCluster, pod: SimPod) -> bool:
    """DaemonSet pods stay; others only if their PodDisruptionBudget allows one more."""
    if pod.daemon:
        return True
    allowed = cluster.disruptions_allowed(pod.service)
    return allowed is None or allowed > 0


def savings_ratio(cluster: SimCluster, node: SimNode) -> float:
    """Price over the disruption cost of rescheduling its pods (1 per node + 1 per pod)."""
    return node.type.price / (PER_NODE_BASE_COST + len(movable_pods(cluster, node)))


def _free(node: SimNode) -> tuple[int, int]:
    free = node.free()
    return free.cpu, free.memory
