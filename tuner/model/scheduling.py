"""The fit rules of "does pod P fit on node N", one predicate each, over a pod's constraints.

:func:`static_fit` (rules that do not depend on load), :func:`resource_room` (CPU, memory, pod
slots against what is free, for one node or for all at once) and :class:`Census` (the rules
that count other pods: extended resources, host ports, inter-pod affinity and anti-affinity,
topology spread, with :func:`spread_eligible`, :func:`global_minimum` and :func:`skew_limit`)
are the only implementations of the rules: :mod:`tuner.model.snapshot` batches them over all
nodes (property tests hold the two to the same answers), the simulator's scheduler, the
take-back and the replay checker call them one node at a time.

Modelled, as kube-scheduler's filter plugins decide them:

- cordon, taints (``NoSchedule``/``NoExecute``) against tolerations, ``nodeSelector``, required
  node affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt);
- volume topology (VolumeBinding, VolumeZone): a pod whose PersistentVolumeClaim is bound to a
  PersistentVolume with ``nodeAffinity`` (zonal disks, ``local`` volumes) or zone/region labels
  only goes to nodes that match it (see :mod:`tuner.monitor.dump` for how claims are read);
- extended and other scalar resources (NodeResourcesFit): ``nvidia.com/gpu``,
  ``ephemeral-storage``, ``hugepages-*``: node allocatable minus its pods' requests, integers;
- host ports (NodePorts): a (hostIP, protocol, port) a pod asks for conflicts with one in use on
  the node with the same protocol and port when either IP is ``0.0.0.0`` or both are equal;
- inter-pod affinity (InterPodAffinity) on any topology key: the pod's required anti-affinity
  (no selected pod in the node's domain), every placed pod's required anti-affinity that
  selects the pod (both directions), the pod's required affinity (a pod matching all its terms
  in the node's domain for each term, or none anywhere and the pod matches them itself: the
  first of a group). Namespaces: the term's list, else its own; a ``namespaceSelector`` is read
  from the namespace's name (``kubernetes.io/metadata.name``, which every namespace carries);
  namespace labels are not in the input, so a selector on any other key is approximated: for
  anti-affinity as every namespace (it repels more), for affinity as none beyond the list (it
  attracts less);
- topology spread (PodTopologySpread), following "Pod Topology Spread Constraints"
  (kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints) and the
  plugin's filter: ``whenUnsatisfiable: DoNotSchedule`` constraints with ``maxSkew`` over any
  ``topologyKey``. Pods counted: in the incoming pod's namespace, selected by ``labelSelector``
  ANDed with the incoming pod's own values of ``matchLabelKeys`` (no ``labelSelector``: no pod).
  Eligible domains: the values of the topology key over the nodes that carry every hard
  constraint's key and, under ``nodeAffinityPolicy: Honor`` (the default), match the pod's
  nodeSelector and required node affinity, and, under ``nodeTaintsPolicy: Honor`` (not the
  default, ``Ignore``), have no untolerated ``NoSchedule``/``NoExecute`` taint (a cordoned node
  carries ``node.kubernetes.io/unschedulable``). A node passes when it carries the key and
  ``pods in its domain + (1 if the pod matches the selector) - global minimum <= maxSkew``,
  the global minimum being the least count over eligible domains, or 0 when there are fewer
  than ``minDomains`` (default 1) of them.

Soft rules, which kube-scheduler only scores:

- ``whenUnsatisfiable: ScheduleAnyway`` spread: *kept as close as it was*. The census records
  each such constraint's skew (most minus fewest matching pods over its eligible domains) as
  the cluster stood when it was built; a pod may then go to a node only if the domain it joins
  ends no further than ``max(maxSkew, that skew)`` above the global minimum, so no placement
  lifts the constraint's skew past the larger of the two. A pod the census never saw in the
  starting cluster gets ``maxSkew`` alone. Only the tuner's own plans keep this rule
  (``soft=True``); the simulated kube-scheduler and autoscalers do not, as the real ones do not.
- Preferred inter-pod affinity and anti-affinity: the snapshot *prefers* destinations that
  honour them (the highest total weight of honoured terms first, then the best fit); a plan
  is never refused for one.
- kube-scheduler's system default spreading (hostname maxSkew 3, zone maxSkew 5,
  ``ScheduleAnyway``, for pods of a Service, ReplicaSet or StatefulSet without constraints of
  their own) is *not modelled*: it is a score whose selector comes from Services, which the
  input does not hold, neither autoscaler simulates it, and keeping it "no worse" would cap
  every Deployment at three pods a node, which kube-scheduler itself does not do.

During a drain the node is cordoned but still a domain of its pods (``nodeTaintsPolicy``
Ignore), so for a hard constraint the census and snapshot count a node the plan closes, with
the pods it still has, until it is deleted (a pod the scheduler would leave Pending until then
is not planned); under Honor it stops being a domain once closed. A soft constraint is kept as
close as it was in the cluster the plan leaves, without the nodes it closes.

Not modelled: StorageClass ``allowedTopologies`` for claims not yet bound (a claim that waits
for its first consumer is provisioned where the pod lands: no rule), volume counts per node
(NodeVolumeLimits), the ``matchLabelKeys``/``mismatchLabelKeys`` of pod affinity terms beyond
what the API server has merged into their selectors, dynamic resource allocation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, overload

from tuner.model.resources import Resources

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

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


class NodeTraits(Protocol):
    """The parts of a node that static fit rules read."""

    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def taints(self) -> tuple[Taint, ...]: ...
    @property
    def unschedulable(self) -> bool: ...


class NodeRoom(NodeTraits, Protocol):
    """A node as the census reads it: its traits and what it offers beyond CPU and memory."""

    @property
    def extended(self) -> Mapping[str, int]: ...


class PodTraits(Protocol):
    """The parts of a pod that the rules counting other pods read."""

    @property
    def namespace(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def constraints(self) -> Constraints: ...
    @property
    def key(self) -> str: ...


def untolerated(constraints: Constraints, taints: Iterable[Taint]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint the constraints do not tolerate."""
    for taint in taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in constraints.tolerations
        ):
            return taint
    return None


def affinity_fit(constraints: Constraints, labels: Mapping[str, str]) -> bool:
    """The pod's nodeSelector and required node affinity admit a node with these labels."""
    if not constraints.node_selector and not constraints.node_affinity:
        return True
    return all(labels.get(k) == v for k, v in constraints.node_selector) and (
        not constraints.node_affinity or selects_node(constraints.node_affinity, labels)
    )


def static_fit(constraints: Constraints, node: NodeTraits) -> str | None:
    """Why the pod can never be placed on the node regardless of load, or None if it can."""
    if node.unschedulable:
        return "node is cordoned"
    taint = untolerated(constraints, node.taints)
    if taint is not None:
        return f"taint {taint.key}={taint.value}:{taint.effect} not tolerated"
    labels = node.labels
    for key, value in constraints.node_selector:
        if labels.get(key) != value:
            return f"nodeSelector {key}={value} not matched"
    if constraints.node_affinity and not selects_node(constraints.node_affinity, labels):
        return "required node affinity not matched"
    for volume in constraints.volumes:
        if not selects_node(volume.terms, labels):
            return f"{volume.volume} is not reachable from the node (volume node affinity)"
    return None


@overload
def resource_room(
    requests: Resources, cpu: int, memory: int, slots: int
) -> tuple[bool, bool, bool]: ...
@overload
def resource_room(
    requests: Resources,
    cpu: npt.NDArray[np.int64],
    memory: npt.NDArray[np.int64],
    slots: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]: ...
def resource_room(requests: Resources, cpu: Any, memory: Any, slots: Any) -> tuple[Any, Any, Any]:
    """Whether the free ``cpu``, ``memory`` and pod ``slots`` hold the requests' CPU, their
    memory and the pod: for one node (integers), or for every node at once (arrays, as the
    snapshot asks)."""
    return cpu >= requests.cpu, memory >= requests.memory, slots >= 1


def resource_fit(requests: Resources, free: Resources, free_slots: int) -> str | None:
    """Why ``requests`` do not fit in ``free`` CPU, memory and pod slots now, or None."""
    cpu, memory, slot = resource_room(requests, free.cpu, free.memory, free_slots)
    if not cpu:
        return "not enough free CPU"
    if not memory:
        return "not enough free memory"
    if not slot:
        return "no free pod slot"
    return None


def extended_fit(constraints: Constraints, free: Callable[[str], int]) -> str | None:
    """Why the pod's extended-resource requests do not fit in what ``free`` says is left."""
    for name, amount in constraints.extended:
        if amount > free(name):
            return f"not enough free {name}"
    return None


def port_fit(constraints: Constraints, used: Iterable[HostPort]) -> str | None:
    """Why the pod's host ports clash with ``used`` ones on the node, or None."""
    taken = list(used)
    for port in constraints.host_ports:
        if any(port.conflicts(other) for other in taken):
            return f"host port {port} is in use"
    return None


def spread_eligible(
    constraints: Constraints, spread: SpreadConstraint, node: NodeTraits, cordoned: bool
) -> bool:
    """Whether the node's domain counts for ``spread`` (the node inclusion policies) — the
    node carrying every key is checked by the caller."""
    if spread.honor_node_affinity and not affinity_fit(constraints, node.labels):
        return False
    if spread.honor_taints:
        taints = (*node.taints, CORDON) if cordoned or node.unschedulable else node.taints
        if untolerated(constraints, taints) is not None:
            return False
    return True


def global_minimum(counts: Collection[int], min_domains: int) -> int:
    """The global minimum of a spread constraint over its eligible domains' counts (one per
    domain)."""
    return 0 if len(counts) < min_domains else min(counts)


def skew_limit(spread: SpreadConstraint, baseline: int) -> int:
    """How far above the global minimum the domain a pod joins may end: ``maxSkew``, for a soft
    constraint at least the skew it had when the census or snapshot was built (``baseline``)."""
    return spread.max_skew if spread.hard else max(spread.max_skew, baseline)


class Census:
    """Where pods are, as the rules that count other pods read it: one node at a time.

    Nodes are given by name; pods are added to and removed from them as a plan runs. Counts of
    the pods each rule selects are built the first time the rule is asked and kept current
    after, so asking costs a pass over the nodes, not over the pods. ``soft`` spread baselines
    are taken from the pods placed when the census is built.
    """

    def __init__(
        self,
        nodes: Mapping[str, NodeRoom],
        residents: Mapping[str, Iterable[PodTraits]],
        label_counts: Callable[[], Mapping[tuple[str, Labels], Mapping[str, int]]] | None = None,
    ) -> None:
        """``label_counts``: what gives the residents per node by namespace and labels, when
        known (:attr:`tuner.model.cluster.Cluster.label_counts`), asked only when a rule first
        needs them; without it they are counted then."""
        self.nodes = dict(nodes)
        self.residents: dict[str, list[PodTraits]] = {
            name: list(residents.get(name, ())) for name in self.nodes
        }
        self.cordoned: set[str] = set()
        self._journal: list[tuple[int, str, PodTraits]] = []
        self._groups: dict[Group, Counter[str]] = {}
        self._holders: dict[PodAffinityTerm, Counter[str]] | None = None
        self._sets: dict[tuple[str, Labels], Counter[str]] | None = None
        self._known_counts = label_counts
        self._eligible: dict[
            tuple[Constraints, SpreadConstraint, tuple[str, ...]], list[tuple[str, str]]
        ] = {}
        self._baseline: dict[tuple[str, Constraints, int], int] = {}
        softly = {
            (p.namespace, p.constraints): p
            for pods in self.residents.values()
            for p in pods
            if p.constraints.spread and any(not c.hard for c in p.constraints.spread)
        }
        for pod in softly.values():
            self._remember_skew(pod)

    # -- changes -------------------------------------------------------------------------

    def add(self, node: str, pod: PodTraits) -> None:
        """A pod starts on a node."""
        self.residents[node].append(pod)
        self._count(node, pod, +1)
        self._journal.append((+1, node, pod))

    def remove(self, node: str, pod: PodTraits) -> None:
        """A pod leaves a node."""
        self.residents[node].remove(pod)
        self._count(node, pod, -1)
        self._journal.append((-1, node, pod))

    def fork(self) -> int:
        """A marker to :meth:`revert` the pods' moves to."""
        return len(self._journal)

    def revert(self, marker: int) -> None:
        """Undo every add and remove since ``fork()`` returned ``marker``."""
        while len(self._journal) > marker:
            sign, node, pod = self._journal.pop()
            if sign > 0:
                self.residents[node].remove(pod)
            else:
                self.residents[node].append(pod)
            self._count(node, pod, -sign)

    def add_node(self, name: str, node: NodeRoom) -> None:
        """A node joins, empty."""
        self.nodes[name] = node
        self.residents[name] = []
        self._eligible.clear()

    def remove_node(self, name: str) -> None:
        """An empty node leaves."""
        if self.residents[name]:
            raise ValueError(f"node {name} still has pods")
        del self.nodes[name]
        del self.residents[name]
        self._eligible.clear()
        for counts in (
            *self._groups.values(),
            *(self._holders or {}).values(),
            *(self._sets or {}).values(),
        ):
            counts.pop(name, None)

    def would_fit(self, pod: PodTraits, name: str, node: NodeRoom) -> str | None:
        """Why the pod could not go to ``node``, a node not in the census yet, once it joins
        empty (None: it could)."""
        self.add_node(name, node)
        try:
            return self.why_not(pod, name)
        finally:
            self.remove_node(name)

    def cordon(self, name: str) -> None:
        """The node is cordoned (it is being drained): its domain still counts for spread
        unless a constraint honours taints."""
        self.cordoned.add(name)
        self._eligible.clear()

    # -- the rules -----------------------------------------------------------------------

    def why_not(self, pod: PodTraits, node: str, *, soft: bool = False) -> str | None:
        """Why the rules that count other pods keep the pod off the node, or None; with
        ``soft``, soft spread is kept as close as it was too."""
        constraints = pod.constraints
        residents = self.residents[node]
        if constraints.extended:
            room = self.nodes[node].extended
            used: Counter[str] = Counter()
            for other in residents:
                used.update(dict(other.constraints.extended))
            why = extended_fit(constraints, lambda name: room.get(name, 0) - used[name])
            if why is not None:
                return why
        if constraints.host_ports:
            why = port_fit(constraints, (p for o in residents for p in o.constraints.host_ports))
            if why is not None:
                return why
        return (
            self._anti_affinity(pod, node)
            or self._affinity(pod, node)
            or self._spread(pod, node, soft=soft)
        )

    def _anti_affinity(self, pod: PodTraits, node: str) -> str | None:
        labels = self.nodes[node].labels
        for term in pod.constraints.anti_affinity:
            if term.topology_key in labels:
                other = self._member(term.group, term.topology_key, labels[term.topology_key])
                if other is not None:
                    return _anti_message(other, term)
        holders = self._term_holders()
        for term, where in holders.items():
            key = term.topology_key
            if key not in labels or not term.selects(pod.namespace, pod.labels):
                continue
            value = labels[key]
            for name, count in where.items():
                if count > 0 and self.nodes[name].labels.get(key) == value:
                    other = next(o for o in self.residents[name] if term in _anti(o))
                    return _anti_message(other, term)
        return None

    def _affinity(self, pod: PodTraits, node: str) -> str | None:
        terms = pod.constraints.affinity
        if not terms:
            return None
        labels = self.nodes[node].labels
        missing = next((t.topology_key for t in terms if t.topology_key not in labels), None)
        if missing is not None:
            return f"node lacks label {missing} (required pod affinity)"
        group = all_of(terms)
        counts = self._group(group)
        empty = True
        unmet: PodAffinityTerm | None = None
        for term in terms:
            key, value = term.topology_key, labels[term.topology_key]
            found = 0
            for name, count in counts.items():
                node_labels = self.nodes[name].labels if count > 0 else {}
                if key in node_labels:
                    empty = False
                    found += count if node_labels[key] == value else 0
            if not found and unmet is None:
                unmet = term
        if unmet is None or (empty and in_group(group, pod.namespace, pod.labels)):
            return None
        where = f"{unmet.topology_key}={labels[unmet.topology_key]}"
        return f"required pod affinity: no matching pod in {where}"

    def _spread(self, pod: PodTraits, node: str, *, soft: bool) -> str | None:
        constraints = pod.constraints
        if not constraints.spread:
            return None
        labels = self.nodes[node].labels
        keys = {
            hard: [c.topology_key for c in constraints.spread if c.hard is hard]
            for hard in (True, False)
        }
        for position, spread in enumerate(constraints.spread):
            if not (spread.hard or soft):
                continue
            key = spread.topology_key
            if key not in labels:
                if spread.hard:
                    return f"node lacks label {key} ({spread})"
                continue
            counts = self.domain_counts(pod, spread, keys[spread.hard])
            minimum = global_minimum(counts.values(), spread.min_domains)
            joined = counts.get(labels[key], 0) + spread.selector.matches(pod.labels)
            bound = skew_limit(
                spread, self._baseline.get((pod.namespace, constraints, position), 0)
            )
            if joined - minimum > bound:
                return (
                    f"{spread} would be broken: {joined} pods in {key}={labels[key]} "
                    f"against a minimum of {minimum}"
                )
        return None

    def domain_counts(
        self, pod: PodTraits, spread: SpreadConstraint, keys: Iterable[str]
    ) -> dict[str, int]:
        """Matching pods per eligible domain of ``spread`` for ``pod`` (``keys``: the topology
        keys every counted node must carry)."""
        per_node = self._group(spread_group(spread, pod.namespace))
        counts: dict[str, int] = {}
        for name, value in self._domains(pod.constraints, spread, tuple(keys)):
            counts[value] = counts.get(value, 0) + per_node.get(name, 0)
        return counts

    def _domains(
        self, constraints: Constraints, spread: SpreadConstraint, keys: tuple[str, ...]
    ) -> list[tuple[str, str]]:
        """The eligible nodes of ``spread`` for a pod with ``constraints`` and their domain
        (cached until a node joins, leaves or is cordoned)."""
        cached = self._eligible.get((constraints, spread, keys))
        if cached is None:
            cached = []
            for name, node in self.nodes.items():
                labels = node.labels
                cordoned = name in self.cordoned
                if (
                    all(k in labels for k in keys)
                    and (spread.hard or not cordoned)
                    and spread_eligible(constraints, spread, node, cordoned)
                ):
                    cached.append((name, labels[spread.topology_key]))
            self._eligible[(constraints, spread, keys)] = cached
        return cached

    # -- counting ------------------------------------------------------------------------

    def _remember_skew(self, pod: PodTraits) -> None:
        constraints = pod.constraints
        keys = [c.topology_key for c in constraints.spread if not c.hard]
        for position, spread in enumerate(constraints.spread):
            key = (pod.namespace, constraints, position)
            if spread.hard:
                continue
            if key not in self._baseline:
                counts = self.domain_counts(pod, spread, keys)
                minimum = global_minimum(counts.values(), spread.min_domains)
                self._baseline[key] = max(counts.values(), default=0) - minimum

    def _group(self, group: Group) -> Counter[str]:
        counts = self._groups.get(group)
        if counts is None:
            counts = Counter()
            for (namespace, labels), where in self._label_sets().items():
                if in_group(group, namespace, dict(labels)):
                    counts.update(where)
            self._groups[group] = counts
        return counts

    def _label_sets(self) -> dict[tuple[str, Labels], Counter[str]]:
        """Pods per node by namespace and labels (built once, then kept current): a group's
        counts are the sum over the label sets it selects, each matched once."""
        if self._sets is None:
            sets: dict[tuple[str, Labels], Counter[str]] = {}
            if self._known_counts is not None:  # as the census began, then its moves since
                for key, where in self._known_counts().items():
                    sets[key] = Counter({n: c for n, c in where.items() if n in self.nodes})
                found: Counter[tuple[tuple[str, Labels], str]] = Counter()
                for sign, name, pod in self._journal:
                    found[((pod.namespace, freeze_labels(pod.labels)), name)] += sign
            else:
                found = Counter(
                    ((pod.namespace, freeze_labels(pod.labels)), name)
                    for name, pods in self.residents.items()
                    for pod in pods
                )
            for (key, name), count in found.items():
                if key not in sets:
                    sets[key] = Counter()
                sets[key][name] += count
            self._sets = sets
        return self._sets

    def _member(self, group: Group, key: str, value: str) -> PodTraits | None:
        """A pod of ``group`` on a node whose ``key`` is ``value``, if there is one."""
        for name, count in self._group(group).items():
            if count > 0 and self.nodes[name].labels.get(key) == value:
                return next(
                    p for p in self.residents[name] if in_group(group, p.namespace, p.labels)
                )
        return None

    def _term_holders(self) -> dict[PodAffinityTerm, Counter[str]]:
        if self._holders is None:
            self._holders = {}
            for name, pods in self.residents.items():
                for pod in pods:
                    for term in _anti(pod):
                        self._holders.setdefault(term, Counter())[name] += 1
        return self._holders

    def _count(self, node: str, pod: PodTraits, sign: int) -> None:
        if self._sets is not None:
            self._sets.setdefault((pod.namespace, freeze_labels(pod.labels)), Counter())[node] += (
                sign
            )
        for group, counts in self._groups.items():
            if in_group(group, pod.namespace, pod.labels):
                counts[node] += sign
        if self._holders is not None:
            for term in _anti(pod):
                self._holders.setdefault(term, Counter())[node] += sign


def spread_group(spread: SpreadConstraint, namespace: str) -> Group:
    """The pods a spread constraint counts for a pod of ``namespace``: its own namespace's."""
    return (spread.selector, (((namespace,), None),))


def _anti(pod: PodTraits) -> tuple[PodAffinityTerm, ...]:
    return pod.constraints.anti_affinity


def _anti_message(other: PodTraits, term: PodAffinityTerm) -> str:
    where = "" if term.topology_key == HOSTNAME_KEY else f" in one {term.topology_key}"
    return f"required pod anti-affinity with {other.key}{where}"


def all_of(terms: Iterable[PodAffinityTerm]) -> Group:
    """The pods every term selects (required pod affinity counts pods matching all terms)."""
    selector = LabelSelector()
    scopes: list[Scope] = []
    for term in terms:
        selector = selector.narrowed(term.selector)
        scopes += term.group[1]
    return (selector, tuple(scopes))
