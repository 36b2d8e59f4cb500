"""The scheduling rules that count other pods, batched over every node of a
:class:`~tuner.model.snapshot.Snapshot`: inter-pod affinity and anti-affinity (required and
preferred) and topology spread.

Each rule is :mod:`tuner.model.scheduling`'s, asked for all nodes at once: a label index
holds, per label set, how many placed pods carry it on each node; a group's counts (the pods a
selector and namespaces pick) are summed from it once and kept current as pods are placed and
unplaced; per topology key each node's domain is numbered, so a rule's count per domain is one
``bincount``. The snapshot owns the node occupancy and the journal; this owns only the counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tuner.model.census import all_of, spread_group
from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.constraints import (
    Constraints,
    Group,
    Labels,
    PodAffinityTerm,
    SpreadConstraint,
    freeze_labels,
    in_group,
)
from tuner.model.scheduling import global_minimum, skew_limit, spread_eligible

Mask = npt.NDArray[np.bool_]
Counts = npt.NDArray[np.int64]
LabelSet = tuple[str, Labels]
"""A pod's namespace and labels: what the rules counting pods select on."""


@dataclass(frozen=True, slots=True)
class _Domains:
    """The domains of one topology key: each node's domain (-1: the node lacks the key)."""

    of: Counts
    size: int


class PodCounting:
    """Per-node counts of the placed pods each rule selects, and the rules' masks over them."""

    def __init__(
        self, cluster: Cluster, nodes: tuple[Node, ...], open_: Mask, everyone: Iterable[Pod]
    ) -> None:
        """``nodes`` are the snapshot's (the cluster's first), ``open_`` its mask of the nodes
        not being removed (shared, changed in place by the snapshot), ``everyone`` the placed
        and arriving pods (the soft spread constraints among them get their baseline now)."""
        self.cluster = cluster
        self.nodes = nodes
        self.open = open_
        self.index = {n.name: i for i, n in enumerate(nodes)}
        self._holders: dict[LabelSet, Counter[int]] = {}
        self._term_holders: dict[PodAffinityTerm, Counter[int]] = {}
        self._groups: dict[Group, Counts] = {}
        self._feeds: dict[LabelSet, list[Counts]] = {}
        """For each label set seen, the group counts its pods add to."""
        self._domains: dict[str, _Domains] = {}
        self._masks: dict[tuple[Constraints, SpreadConstraint, bool], Mask] = {}
        self._baseline: dict[tuple[str, Constraints, int], int] = {}
        self._index_cluster(everyone)

    @property
    def repelling(self) -> bool:
        """Whether some placed pod has a required anti-affinity term."""
        return bool(self._term_holders)

    def resize(self, nodes: tuple[Node, ...], open_: Mask) -> None:
        """The counts over ``nodes`` (the snapshot grew by empty nodes, or lost its last ones,
        emptied): the per-node caches are rebuilt when next asked."""
        self.nodes = nodes
        self.open = open_
        self.index = {n.name: i for i, n in enumerate(nodes)}
        for counter in (*self._holders.values(), *self._term_holders.values()):
            for gone in [n for n in counter if n >= len(nodes)]:
                del counter[gone]
        self._groups = {}
        self._feeds = {key: [] for key in self._holders}
        self._domains = {}
        self._masks = {}

    # -- the rules as masks ------------------------------------------------------------------

    def near(self, group: Group, key: str) -> Mask:
        """Nodes whose ``key`` domain holds a pod of ``group`` (False where the key is
        missing)."""
        domains = self._domain(key)
        has = domains.of >= 0
        per_domain = self._per_domain(self._group(group), domains, has)
        return has & (_at_nodes(per_domain, domains) > 0)

    def far(self, group: Group, key: str) -> Mask:
        """Nodes whose ``key`` domain holds no pod of ``group``."""
        return ~self.near(group, key)

    def repelled(self, pod: Pod) -> Mask:
        """Nodes where no placed pod's required anti-affinity forbids the pod."""
        mask = np.ones(len(self.nodes), dtype=np.bool_)
        labels = pod.labels
        for term, holders in self._term_holders.items():
            if not term.selects(pod.namespace, labels):
                continue
            domains = self._domain(term.topology_key)
            held = [domains.of[n] for n, c in holders.items() if c > 0 and domains.of[n] >= 0]
            if held:
                mask &= ~np.isin(domains.of, np.array(held, dtype=np.int64))
        return mask

    def attracted(self, pod: Pod) -> Mask:
        """Nodes where the pod's required pod affinity holds."""
        terms = pod.constraints.affinity
        group = all_of(terms)
        counts = self._group(group)
        every_key = np.ones(len(self.nodes), dtype=np.bool_)
        met = np.ones(len(self.nodes), dtype=np.bool_)
        anywhere = False
        for term in terms:
            domains = self._domain(term.topology_key)
            has = domains.of >= 0
            every_key &= has
            per_domain = self._per_domain(counts, domains, has)
            anywhere = anywhere or bool(per_domain.any())
            met &= has & (_at_nodes(per_domain, domains) > 0)
        if not anywhere and in_group(group, pod.namespace, pod.labels):
            return every_key
        return met

    def spread_mask(self, pod: Pod, position: int, spread: SpreadConstraint) -> Mask:
        """Nodes where the pod keeps the spread constraint (a soft one: as close as it was)."""
        constraints = pod.constraints
        domains = self._domain(spread.topology_key)
        per_domain, present = self._spread_counts(pod, spread)
        minimum = global_minimum(per_domain[present].tolist(), spread.min_domains)
        joined = _at_nodes(per_domain, domains) + int(spread.selector.matches(pod.labels))
        bound = skew_limit(spread, self._baseline.get((pod.namespace, constraints, position), 0))
        keeps = (domains.of >= 0) & (joined - minimum <= bound)
        return keeps if spread.hard else keeps | (domains.of < 0)

    # -- counting ----------------------------------------------------------------------------

    def count(self, pod: Pod, node: int, sign: int) -> None:
        """The pod placed on (sign 1) or taken off (-1) the node."""
        key = (pod.namespace, freeze_labels(pod.labels))
        holders = self._holders.get(key)
        if holders is None:
            holders = self._holders[key] = Counter()
            labels = dict(key[1])
            self._feeds[key] = [
                counts
                for group, counts in self._groups.items()
                if in_group(group, pod.namespace, labels)
            ]
        holders[node] += sign
        for counts in self._feeds[key]:
            counts[node] += sign
        for term in pod.constraints.anti_affinity:
            self._term_holders.setdefault(term, Counter())[node] += sign

    # -- internals ---------------------------------------------------------------------------

    def _domain(self, key: str) -> _Domains:
        domains = self._domains.get(key)
        if domains is None:
            ids: dict[str, int] = {}
            of = np.array(
                [
                    ids.setdefault(n.labels[key], len(ids)) if key in n.labels else -1
                    for n in self.nodes
                ],
                dtype=np.int64,
            )
            domains = self._domains[key] = _Domains(of, len(ids))
        return domains

    def _per_domain(self, counts: Counts, domains: _Domains, nodes: Mask) -> Counts:
        """``counts`` summed per domain over ``nodes`` (each of which carries the key)."""
        return np.bincount(domains.of[nodes], weights=counts[nodes], minlength=domains.size).astype(
            np.int64
        )

    def _spread_counts(
        self, pod: Pod, spread: SpreadConstraint, existing: bool = False
    ) -> tuple[Counts, Mask]:
        """Matching pods per domain of the spread's key over its eligible nodes, and which
        domains are eligible (``existing``: among the cluster's own nodes, not new ones)."""
        constraints = pod.constraints
        domains = self._domain(spread.topology_key)
        eligible = (
            np.arange(len(self.nodes)) < len(self.cluster.nodes)
            if existing
            else np.ones(len(self.nodes), dtype=np.bool_)
        )
        for other in constraints.spread:
            if other.hard is spread.hard:
                eligible &= self._domain(other.topology_key).of >= 0
        if not spread.hard:
            eligible &= self.open  # kept as close as it was in the cluster left behind
        if spread.honor_taints:
            eligible &= np.where(
                self.open,
                self._eligible(constraints, spread, cordoned=False),
                self._eligible(constraints, spread, cordoned=True),
            )
        elif spread.honor_node_affinity:
            eligible &= self._eligible(constraints, spread, cordoned=False)
        counts = self._group(spread_group(spread, pod.namespace))
        per_domain = self._per_domain(counts, domains, eligible)
        present = np.bincount(domains.of[eligible], minlength=domains.size) > 0
        return per_domain, present

    def _eligible(self, constraints: Constraints, spread: SpreadConstraint, cordoned: bool) -> Mask:
        """Per node and cached: :func:`~tuner.model.scheduling.spread_eligible`, the nodes
        ``cordoned`` or not."""
        key = (constraints, spread, cordoned)
        mask = self._masks.get(key)
        if mask is None:
            mask = self._masks[key] = np.array(
                [spread_eligible(constraints, spread, n, cordoned) for n in self.nodes],
                dtype=np.bool_,
            )
        return mask

    def _remember_skew(self, pod: Pod) -> None:
        """The skew of each of the pod's soft spread constraints now (its baseline)."""
        constraints = pod.constraints
        for position, spread in enumerate(constraints.spread):
            key = (pod.namespace, constraints, position)
            if spread.hard or key in self._baseline:
                continue
            per_domain, present = self._spread_counts(pod, spread, existing=True)
            most = int(per_domain[present].max()) if present.any() else 0
            self._baseline[key] = most - global_minimum(
                per_domain[present].tolist(), spread.min_domains
            )

    def _index_cluster(self, everyone: Iterable[Pod]) -> None:
        """The label index of the placed pods, their anti-affinity terms, and the baseline of
        every soft spread constraint."""
        index = self.index
        for key, where in self.cluster.label_counts.items():
            self._holders[key] = Counter({index[name]: count for name, count in where.items()})
            self._feeds[key] = []
        for pod in self.cluster.pods:
            if pod.node is not None:
                for term in pod.constraints.anti_affinity:
                    if term not in self._term_holders:
                        self._term_holders[term] = Counter()
                    self._term_holders[term][index[pod.node]] += 1
        softly = {
            (p.namespace, p.constraints): p
            for p in everyone
            if p.constraints.spread and _soft(p.constraints)
        }
        for pod in softly.values():
            self._remember_skew(pod)

    def _group(self, group: Group) -> Counts:
        """Per node, the placed pods the group selects (kept current once asked)."""
        counts = self._groups.get(group)
        if counts is None:
            counts = np.zeros(len(self.nodes), dtype=np.int64)
            for (namespace, labels), holders in self._holders.items():
                if in_group(group, namespace, dict(labels)):
                    for node, count in holders.items():
                        counts[node] += count
                    self._feeds[(namespace, labels)].append(counts)
            self._groups[group] = counts
        return counts


def _at_nodes(per_domain: Counts, domains: _Domains) -> Counts:
    """Each node's domain's count (0 where the node lacks the key, also when no node has it)."""
    return np.append(per_domain, 0)[domains.of]


def _soft(constraints: Constraints) -> bool:
    """Whether the constraints hold a soft spread constraint (it needs a baseline)."""
    return any(not c.hard for c in constraints.spread)
