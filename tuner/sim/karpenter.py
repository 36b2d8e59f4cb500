"""Karpenter in place of the Cluster Autoscaler: provisioning and consolidation.

Defaults read from ``kubernetes-sigs/karpenter`` (numbers and rules only):

- Batching (``pkg/operator/options/options.go``): a provisioning batch closes once no new pod
  has been pending for ``BATCH_IDLE_DURATION`` (1 s), or ``BATCH_MAX_DURATION`` (10 s) after it
  opened. With the simulator's 5 s tick this launches on the tick after the pods appeared.
- Provisioning: pods that fit on no node are packed first onto the room of nodes still starting
  (minus their DaemonSet pods), then first-fit decreasing onto new node claims; a claim keeps
  every offered instance type its pods still fit on (DaemonSet overhead included) and is launched
  as the cheapest of them. Offered types are the scenario's pools'; a pool's maximum caps its
  nodes. A node is ready after the same provisioning delay as the Cluster Autoscaler model's.
- Disruption controller (``pkg/controllers/disruption``): polled every 10 s
  (``controller.go`` ``pollingPeriod``); a command is re-validated 15 s after it is computed
  (``consolidation.go`` ``commandValidationDelay``) and dropped if no longer valid. A pass that
  found nothing is not repeated until the cluster changes, or for 5 minutes
  (``consolidation.go`` ``IsConsolidated``, ``state/cluster.go`` ``ConsolidationState``).
- NodePool defaults (``pkg/apis/v1/nodepool.go``): ``consolidationPolicy:
  WhenEmptyOrUnderutilized``, ``consolidateAfter: 0s`` (a node is a candidate once its pods
  have not changed for that long), one budget of ``nodes: 10%``, rounded up, minus the nodes
  already being disrupted (``helpers.go`` ``BuildDisruptionBudgetMapping``: initialized nodes
  only).
- Methods, in Karpenter's order, one command per poll: *emptiness* (delete candidates without
  reschedulable pods, up to the budget); *multi-node* consolidation (candidates sorted by savings
  ratio, price over 1 + pod eviction costs, at most 100; the largest prefix of two or more, found
  by binary search, whose pods fit on the other nodes plus at most one new node cheaper than
  them all and, if its type is one of theirs, cheaper than that type
  (``multinodeconsolidation.go``): delete or replace); *single-node* consolidation (the first
  candidate, in the same order, whose pods fit on the other nodes, or on them plus one new node
  cheaper than it).
  Pending pods take their room on the other nodes first; if one fits on no ready node
  (it waits for a starting node, or for one yet to be launched) nothing is consolidated
  (``helpers.go``: no decision on uninitialized nodes). A replaced node is cordoned, its
  replacement launched, and it is deleted (its pods evicted) once the replacement is ready.
- Pods it will not disrupt: a node with a pod whose PodDisruptionBudget allows no disruption now
  is no candidate (nor would be one with a ``karpenter.sh/do-not-disrupt`` pod, but no simulated
  workload carries that annotation). DaemonSet pods go with their node.

- Scheduling rules: Karpenter simulates with kube-scheduler's filters, so a pod's rules that
  count other pods (topology spread, pod affinity and anti-affinity) hold wherever it places
  one: on a ready node through the census (which follows the simulated moves), on a starting
  node or a new claim's offering (its pool's zone) as a new, empty node of the census, each pod
  checked alone rather than against the others packed beside it.

Not modelled: spot capacity and spot-to-spot consolidation, drift and expiry, NodePool resource
limits (a pool's node maximum stands in), Karpenter's own topology domain choice beyond that
check, the 3-minute single-node timeout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tuner.model.census import Census
from tuner.model.constraints import HOSTNAME_KEY, Taint
from tuner.model.resources import Resources
from tuner.model.scheduling import NodeRoom, resource_fit
from tuner.sim.prices import NodeType
from tuner.sim.state import SimCluster, SimNode, SimPod, TemplateNode, pool_labels
from tuner.sim.workloads import Service

BATCH_IDLE = 1.0
BATCH_MAX = 10.0
POLL = 10.0
VALIDATION_DELAY = 15.0
BUDGET_SHARE = 0.10
MULTI_NODE_MAX = 100
CONSOLIDATED_FOR = 300.0
PER_NODE_BASE_COST = 1.0
DISRUPTED_TAINT = Taint("karpenter.sh/disrupted", "", "NoSchedule")


@dataclass(frozen=True, slots=True)
class Offering:
    """An instance type Karpenter may launch, from one of the scenario's pools."""

    pool: str
    node_type: NodeType
    max_nodes: int = 100
    zone: str = ""


@dataclass(frozen=True, slots=True)
class KarpenterConfig:
    """The NodePool's disruption settings (Karpenter's defaults) and the start-up delay."""

    provisioning_delay: float = 120.0
    consolidate_after: float = 0.0
    budget: float = BUDGET_SHARE


@dataclass(frozen=True, slots=True)
class Command:
    """Delete ``nodes``; launch ``replacement`` first (None: plain deletion)."""

    nodes: tuple[str, ...]
    replacement: Offering | None = None


class Room:
    """Free CPU, memory and pod slots of a node, existing or planned; ``node`` names a ready
    node of the census, or is a starting one (not in it yet)."""

    __slots__ = ("cpu", "memory", "node", "pods", "starting")

    def __init__(
        self, cpu: int, memory: int, pods: int, node: str = "", starting: NodeRoom | None = None
    ) -> None:
        self.cpu, self.memory, self.pods = cpu, memory, pods
        self.node, self.starting = node, starting

    def take(self, pod: SimPod, census: Census | None = None) -> bool:
        """Reserve the pod's requests if they fit, and its rules that count pods allow it."""
        if not self.fits(pod.requests) or not self.allows(pod, census):
            return False
        self.cpu -= pod.service.cpu
        self.memory -= pod.service.memory
        self.pods -= 1
        if census is not None and self.starting is None:
            census.add(self.node, pod)
        return True

    def fits(self, requests: Resources) -> bool:
        """The model's resource rule (CPU, memory, a pod slot) on this room."""
        return resource_fit(requests, Resources(self.cpu, self.memory), self.pods) is None

    def allows(self, pod: SimPod, census: Census | None) -> bool:
        """The pod's rules that count other pods admit this node."""
        if census is None or not pod.counted:
            return True
        if self.starting is not None:
            return census.would_fit(pod, self.node, self.starting) is None
        return census.why_not(pod, self.node) is None


def first_fit(
    pods: Sequence[SimPod], rooms: Sequence[Room], census: Census | None = None
) -> list[SimPod]:
    """Place pods, largest first, each on the first room it fits; returns those left over.
    Rooms too small for the smallest pod are not scanned."""
    if not pods:
        return []
    smallest = Resources(min(p.service.cpu for p in pods), min(p.service.memory for p in pods))
    open_ = [r for r in rooms if r.fits(smallest)]
    return [p for p in by_size(pods) if not any(r.take(p, census) for r in open_)]


@dataclass
class Claim:
    """A planned node: its pods' requests and the offerings they all still fit on."""

    offerings: list[Offering]
    cpu: int = 0
    memory: int = 0
    pods: int = 0

    def cheapest(self) -> Offering:
        """The offering Karpenter launches for this claim."""
        return min(self.offerings, key=lambda o: (o.node_type.price, o.node_type.name))


def by_size(pods: Sequence[SimPod]) -> list[SimPod]:
    """Largest requests first (CPU, then memory), oldest first on ties."""
    return sorted(pods, key=lambda p: (-p.service.cpu, -p.service.memory, p.uid))


def pack_claims(
    pods: Sequence[SimPod],
    offerings: Sequence[Offering],
    overhead: Resources,
    slots: int,
    census: Census | None = None,
    pool_label: str = "",
) -> tuple[list[Claim], list[SimPod]]:
    """First-fit decreasing onto new claims; returns them and the pods no offering fits (with
    ``census``, a pod's rules that count pods must admit an offering's new node)."""
    claims: list[Claim] = []
    unfit: list[SimPod] = []

    def admits(offering: Offering, pod: SimPod) -> bool:
        if census is None or not pod.counted:
            return True
        name = f"{offering.pool}-claim-{len(claims)}"
        labels = pool_labels(offering.node_type, offering.pool, pool_label, offering.zone)
        node = TemplateNode({**labels, HOSTNAME_KEY: name})
        return census.would_fit(pod, name, node) is None

    def fitting(claim: Claim, pod: SimPod) -> list[Offering]:
        cpu = claim.cpu + pod.service.cpu + overhead.cpu
        memory = claim.memory + pod.service.memory + overhead.memory
        return [
            o
            for o in claim.offerings
            if resource_fit(
                Resources(cpu, memory),
                o.node_type.allocatable,
                o.node_type.max_pods - slots - claim.pods,
            )
            is None
            and admits(o, pod)
        ]

    for pod in by_size(pods):
        for claim in claims:
            still = fitting(claim, pod)
            if still:
                break
        else:
            claim = Claim(list(offerings))
            still = fitting(claim, pod)
            if not still:
                unfit.append(pod)
                continue
            claims.append(claim)
        claim.offerings = still
        claim.cpu += pod.service.cpu
        claim.memory += pod.service.memory
        claim.pods += 1
    return claims, unfit


@dataclass
class Karpenter:
    """Karpenter's provisioner and disruption controller over the simulated cluster."""

    offerings: tuple[Offering, ...]
    daemonsets: tuple[Service, ...]
    config: KarpenterConfig = KarpenterConfig()
    pool_label: str = ""
    batch_start: float | None = None
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

    # -- the autoscaler interface --------------------------------------------------------------

    def step(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> list[SimPod]:
        """Provision for pending pods, finish replacements, consolidate when a poll is due."""
        self._track_changes(cluster, now)
        evicted = self._finish_replacements(cluster, now)
        self._provision(cluster, unschedulable, now)
        if now >= self.next_poll and not evicted:  # evicted pods are rescheduled first
            self.next_poll = now + POLL
            evicted += self._disrupt(cluster, unschedulable, now)
        return evicted

    # -- provisioning --------------------------------------------------------------------------

    def _starting_rooms(self, cluster: SimCluster, now: float) -> list[Room]:
        overhead = self.overhead
        return [
            Room(
                n.type.allocatable.cpu - overhead.cpu - n.cpu,
                n.type.allocatable.memory - overhead.memory - n.memory,
                n.type.max_pods - len(self.daemonsets) - len(n.pods),
                n.name,
                n,
            )
            for n in sorted(cluster.nodes.values(), key=lambda n: n.name)
            if n.registered and not n.ready(now)
        ]

    def _provision(self, cluster: SimCluster, pending: list[SimPod], now: float) -> None:
        if not pending:
            self.batch_start = None
            return
        census = cluster.census(now)
        waiting = first_fit(pending, self._starting_rooms(cluster, now), census)
        if not waiting:
            self.batch_start = None
            return
        if self.batch_start is None:
            self.batch_start = now
        newest = max(p.created for p in waiting)
        if now - newest < BATCH_IDLE and now - self.batch_start < BATCH_MAX:
            return
        self.batch_start = None
        if all(cluster.pool_size(o.pool) >= o.max_nodes for o in self.offerings):
            return  # no claim could launch: pending pods on full pools cost no packing
        claims, _ = pack_claims(
            waiting, self.offerings, self.overhead, len(self.daemonsets), census, self.pool_label
        )
        for claim in claims:
            self._launch(cluster, claim.offerings, now)

    def _launch(self, cluster: SimCluster, offerings: Sequence[Offering], now: float) -> str | None:
        """Launch the cheapest offering whose pool has room; returns the node's name."""
        open_ = [o for o in offerings if cluster.pool_size(o.pool) < o.max_nodes]
        if not open_:
            return None
        offering = Claim(open_).cheapest()
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
            Room(*_free(n), n.type.max_pods - len(n.pods), n.name)
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
        return Command(tuple(sorted(names)), Claim(cheaper).cheapest())

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
