"""Karpenter's bin packing (:mod:`tuner.sim.karpenter`): the room of nodes, existing or starting,
first-fit onto them, and first-fit decreasing onto new node claims, each launched as the cheapest
instance type its pods still fit on. A placeholder's node selector (a pool's label) is honoured:
Karpenter launches a claim only from a NodePool whose labels the pod's requirements admit, and
simulates its moves with kube-scheduler's filters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.model.census import Census
from tuner.model.constraints import HOSTNAME_KEY
from tuner.model.resources import Resources
from tuner.model.scheduling import NodeRoom, resource_fit, static_fit
from tuner.sim.prices import NodeType
from tuner.sim.state import SimPod, TemplateNode, pool_labels


@dataclass(frozen=True, slots=True)
class Offering:
    """An instance type Karpenter may launch, from one of the scenario's pools."""

    pool: str
    node_type: NodeType
    max_nodes: int = 100
    zone: str = ""


class Room:
    """Free CPU, memory and pod slots of a node, existing or planned; ``node`` names a ready
    node of the census, or is a starting one (not in it yet); ``host`` is the node whose labels
    a placeholder's node selector and affinity are checked against."""

    __slots__ = ("cpu", "host", "memory", "node", "pods", "starting")

    def __init__(
        self,
        cpu: int,
        memory: int,
        pods: int,
        node: str = "",
        starting: NodeRoom | None = None,
        host: NodeRoom | None = None,
    ) -> None:
        self.cpu, self.memory, self.pods = cpu, memory, pods
        self.node, self.starting = node, starting
        self.host = host if host is not None else starting

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
        """The pod's rules that count other pods admit this node, and so do a placeholder's own
        node selector and affinity (the only pods with static node rules here)."""
        if pod.placeholder and self.host is not None and not placeholder_admits(pod, self.host):
            return False
        if census is None or not pod.counted:
            return True
        if self.starting is not None:
            return census.would_fit(pod, self.node, self.starting) is None
        return census.why_not(pod, self.node) is None


def placeholder_admits(pod: SimPod, node: NodeRoom) -> bool:
    """A placeholder's node selector, required affinity and tolerations admit ``node``."""
    return static_fit(pod.constraints, node) is None


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
class PlannedNode:
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
) -> tuple[list[PlannedNode], list[SimPod]]:
    """First-fit decreasing onto new claims; returns them and the pods no offering fits (with
    ``census``, a pod's rules that count pods must admit an offering's new node)."""
    claims: list[PlannedNode] = []
    unfit: list[SimPod] = []

    def admits(offering: Offering, pod: SimPod) -> bool:
        if not pod.placeholder and (census is None or not pod.counted):
            return True
        name = f"{offering.pool}-claim-{len(claims)}"
        labels = pool_labels(offering.node_type, offering.pool, pool_label, offering.zone)
        node = TemplateNode({**labels, HOSTNAME_KEY: name})
        if pod.placeholder and not placeholder_admits(pod, node):
            return False  # a NodePool whose labels its node selector does not match
        return census is None or not pod.counted or census.would_fit(pod, name, node) is None

    def fitting(claim: PlannedNode, pod: SimPod) -> list[Offering]:
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
            claim = PlannedNode(list(offerings))
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
