"""The fit rules that count other pods, one node at a time (:class:`Census`): extended
resources, host ports, inter-pod affinity and anti-affinity, topology spread; see
:mod:`tuner.model.scheduling` for what each rule models."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache

from tuner.model.constraints import (
    HOSTNAME_KEY,
    Constraints,
    Group,
    Labels,
    LabelSelector,
    PodAffinityTerm,
    Scope,
    SpreadConstraint,
    freeze_labels,
    in_group,
)
from tuner.model.scheduling import (
    NodeRoom,
    PodTraits,
    extended_fit,
    global_minimum,
    port_fit,
    skew_limit,
    spread_eligible,
)


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
                if _selects(group, namespace, labels):
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


@lru_cache(maxsize=65536)
def _selects(group: Group, namespace: str, labels: Labels) -> bool:
    """:func:`in_group` of a label set (kept: each census asks it again of the same sets)."""
    return in_group(group, namespace, dict(labels))


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
