"""What a pod asks of the node it runs on, as values: its tolerations, node selector and
required node affinity, pod affinity and anti-affinity terms (required and preferred),
topology spread constraints, host ports, volume topology and extended resources
(:class:`Constraints`), and the label selectors, taints and well-known keys they are made of.
The rules that judge them are :mod:`tuner.model.scheduling` and :mod:`tuner.model.census`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

HOSTNAME_KEY = "kubernetes.io/hostname"


ZONE_KEY = "topology.kubernetes.io/zone"


CORDON_TAINT_KEY = "node.kubernetes.io/unschedulable"
"""The taint the node lifecycle controller mirrors a cordon in."""


ANY_IP = "0.0.0.0"


Labels = tuple[tuple[str, str], ...]
"""Labels as sorted (key, value) pairs: hashable, so constraints can key caches."""


def freeze_labels(labels: Mapping[str, str] | None) -> Labels:
    """Labels as a sorted tuple of pairs."""
    return tuple(sorted((labels or {}).items()))


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key operator values`` requirement of a node or label selector."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` satisfy this requirement."""
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                value, bound = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return value > bound if self.operator == "Gt" else value < bound
        return False


NodeSelectorTerms = tuple[tuple[Requirement, ...], ...]
"""A required node selector: terms ORed, the requirements of a term ANDed."""


def selects_node(terms: NodeSelectorTerms, labels: Mapping[str, str]) -> bool:
    """True when one of the terms matches the node's labels."""
    return any(all(r.matches(labels) for r in term) for term in terms)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A label selector: matchLabels and matchExpressions, all ANDed."""

    match_labels: Labels = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` are selected."""
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.expressions
        )

    def narrowed(self, other: LabelSelector) -> LabelSelector:
        """The selector of what both select."""
        return LabelSelector(
            tuple(sorted(set(self.match_labels) | set(other.match_labels))),
            self.expressions + other.expressions,
        )


NOTHING = LabelSelector(expressions=(Requirement("", "In", ()),))
"""What a missing ``labelSelector`` of an affinity term or spread constraint selects: no pod."""


NAMESPACE_NAME_KEY = "kubernetes.io/metadata.name"
"""The label every namespace carries with its own name."""


Namespaces = tuple[str, ...] | None
"""The namespaces a term names (None: every namespace)."""


Scope = tuple[Namespaces, LabelSelector | None]
"""Namespaces a pod must be in: named, or picked by a selector over the namespace's name."""


Group = tuple[LabelSelector, tuple[Scope, ...]]
"""Pods a rule counts: selected by the selector, in every one of the scopes."""


def in_scope(scope: Scope, namespace: str) -> bool:
    """True when the namespace is in the scope."""
    names, selector = scope
    return (
        names is None
        or namespace in names
        or (selector is not None and selector.matches({NAMESPACE_NAME_KEY: namespace}))
    )


def in_group(group: Group, namespace: str, labels: Mapping[str, str]) -> bool:
    """True when a pod of this namespace and labels is one the group counts."""
    selector, scopes = group
    return all(in_scope(s, namespace) for s in scopes) and selector.matches(labels)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod affinity or anti-affinity term: the pods it selects, and the topology key whose
    domains it speaks of."""

    selector: LabelSelector
    namespaces: Namespaces
    topology_key: str = HOSTNAME_KEY
    namespace_selector: LabelSelector | None = None
    """A ``namespaceSelector`` over namespace names (see the module's notes)."""

    @property
    def group(self) -> Group:
        """The pods the term selects."""
        return (self.selector, ((self.namespaces, self.namespace_selector),))

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """True when a pod with this namespace and labels is selected by the term."""
        return in_group(self.group, namespace, labels)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A preferred (soft) pod affinity or anti-affinity term and its weight (1-100)."""

    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint; ``selector`` already holds the pod's ``matchLabelKeys``."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    hard: bool = True
    """``whenUnsatisfiable: DoNotSchedule`` (else ``ScheduleAnyway``)."""
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_taints: bool = False

    def __str__(self) -> str:
        kind = "topology spread" if self.hard else "soft topology spread"
        return f"{kind} on {self.topology_key} (maxSkew {self.max_skew})"


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    """A host port a container asks for."""

    port: int
    protocol: str = "TCP"
    ip: str = ANY_IP

    def conflicts(self, other: HostPort) -> bool:
        """The NodePorts plugin's rule: same protocol and port, and either IP is the wildcard
        or both are the same."""
        return (
            self.port == other.port
            and self.protocol == other.protocol
            and (self.ip == other.ip or ANY_IP in (self.ip, other.ip))
        )

    def __str__(self) -> str:
        return f"{self.protocol} {self.ip}:{self.port}"


@dataclass(frozen=True, slots=True)
class VolumeAffinity:
    """Where one of a pod's volumes can be reached: nodes that match ``terms``."""

    volume: str
    """What the rule comes from, e.g. ``PersistentVolume pv-1 (claim shop/data)``."""
    terms: NodeSelectorTerms


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


CORDON = Taint(CORDON_TAINT_KEY, "", "NoSchedule")


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """True when this toleration tolerates ``taint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Constraints:
    """Everything about a pod that restricts where it may run (hashable: pods share them)."""

    tolerations: tuple[Toleration, ...] = ()
    node_selector: Labels = ()
    node_affinity: NodeSelectorTerms = ()
    """Required node affinity: terms are ORed, requirements within a term ANDed."""
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    """Required pod anti-affinity."""
    affinity: tuple[PodAffinityTerm, ...] = ()
    """Required pod affinity (all terms must hold)."""
    preferred: tuple[PreferredTerm, ...] = ()
    """Preferred pod affinity."""
    preferred_anti: tuple[PreferredTerm, ...] = ()
    """Preferred pod anti-affinity."""
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volumes: tuple[VolumeAffinity, ...] = ()
    extended: tuple[tuple[str, int], ...] = ()
    """Requests of resources other than CPU and memory (extended resources such as
    ``nvidia.com/gpu``, ``ephemeral-storage``, ``hugepages-*``), by name, sorted."""
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        key = (
            self.tolerations,
            self.node_selector,
            self.node_affinity,
            self.anti_affinity,
            self.affinity,
            self.preferred,
            self.preferred_anti,
            self.spread,
            self.host_ports,
            self.volumes,
            self.extended,
        )
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        """Computed once: constraints key the snapshot's caches on every question."""
        return self._hash

    @property
    def counts_pods(self) -> bool:
        """Whether a rule of these constraints counts other pods (inter-pod affinity, spread)."""
        return bool(
            self.anti_affinity
            or self.affinity
            or self.spread
            or self.preferred
            or self.preferred_anti
        )
