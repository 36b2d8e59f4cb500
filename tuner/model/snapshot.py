"""The scheduling simulation: fit, placement and "what if these pods move" (cf. the Cluster
Autoscaler's ClusterSnapshot): place and unplace pods, close nodes, fork and revert.

It is private, mutable working state inside pure functions: callers pass an immutable
:class:`~tuner.model.cluster.Cluster` and get immutable results back. Every fit rule comes from
:mod:`tuner.model.scheduling`; :meth:`Snapshot.fit_mask` asks them for all nodes at once (the
static rules cached per constraints, resources, pod slots and extended resources as numpy
vectors, host ports per node that holds any, and the rules that count pods — inter-pod affinity
and anti-affinity, topology spread — as per-node counts of the pods each rule selects, summed
per topology domain), so one "where can this pod go" question costs a few vector operations
instead of a Python loop over nodes, and :meth:`Snapshot.why_not` asks them for one node. The
counts exist only when some pod has such a rule (the label index is switched on then), extended
resources only when some pod requests them: a cluster without them pays nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import numpy.typing as npt

from tuner.model.census import all_of, spread_group
from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.constraints import (
    Constraints,
    Group,
    HostPort,
    Labels,
    NodeSelectorTerms,
    PodAffinityTerm,
    SpreadConstraint,
    freeze_labels,
    in_group,
    selects_node,
)
from tuner.model.resources import Resources
from tuner.model.scheduling import (
    global_minimum,
    port_fit,
    resource_fit,
    resource_room,
    skew_limit,
    spread_eligible,
    static_fit,
)

Mask = npt.NDArray[np.bool_]
Counts = npt.NDArray[np.int64]
LabelSet = tuple[str, Labels]
"""A pod's namespace and labels: what the rules counting pods select on."""
Component = tuple[str, Callable[[], Mask]]
"""A rule's reason and its mask over the nodes (computed when asked)."""


@dataclass(frozen=True, slots=True)
class Move:
    """A simulated move of a pod to the node at ``target`` (an index into the snapshot)."""

    pod: Pod
    target: int


@dataclass(frozen=True, slots=True)
class _Domains:
    """The domains of one topology key: each node's domain (-1: the node lacks the key)."""

    of: Counts
    size: int


class Snapshot:
    """Node occupancy of a cluster that answers fit and placement and can be changed (place,
    unplace, move, close) and rolled back (fork, revert)."""

    def __init__(
        self, cluster: Cluster, arriving: Iterable[Pod] = (), new_nodes: Iterable[Node] = ()
    ) -> None:
        """The cluster as it runs now; ``arriving`` are pods not in it that may be placed later
        (their rules that count pods, like the residents', switch the label index on); ``new_nodes``
        are nodes not in it yet (a pool's template under a provisional name), empty and open,
        indexed after the cluster's own."""
        self.cluster = cluster
        self.nodes: tuple[Node, ...] = (*cluster.nodes, *new_nodes)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        size = len(self.nodes)
        self.alloc_cpu = np.array([n.allocatable.cpu for n in self.nodes], dtype=np.int64)
        self.alloc_mem = np.array([n.allocatable.memory for n in self.nodes], dtype=np.int64)
        placed = [p for p in cluster.pods if p.node is not None]
        where = np.fromiter((self.index[p.node or ""] for p in placed), np.int64, len(placed))
        self.free_cpu = self.alloc_cpu.copy()
        self.free_mem = self.alloc_mem.copy()
        self.free_pods = np.array([n.max_pods for n in self.nodes], dtype=np.int64)
        np.subtract.at(
            self.free_cpu,
            where,
            np.fromiter((p.requests.cpu for p in placed), np.int64, len(placed)),
        )
        np.subtract.at(
            self.free_mem,
            where,
            np.fromiter((p.requests.memory for p in placed), np.int64, len(placed)),
        )
        np.subtract.at(self.free_pods, where, 1)
        self.open = np.ones(size, dtype=np.bool_)
        """False for nodes excluded as destinations (being removed: cordoned, then drained)."""
        self._static: dict[Constraints, Mask] = {}
        self._journal: list[Callable[[], None]] = []
        self._free_ext: dict[str, Counts] = {}
        """Free amount of each extended resource some pod requests, per node."""
        self._ports: dict[int, Counter[HostPort]] = {}
        """Host ports in use on the nodes that have any."""
        everyone = (*placed, *arriving)
        kinds = {id(c): c for c in [p.constraints for p in everyone]}.values()
        """Each distinct constraints object once (parsed pods share them)."""
        for constraints in kinds:
            self._track_extended(constraints)
        if any(c.extended or c.host_ports for c in kinds):
            for pod, node in zip(placed, where.tolist(), strict=True):
                if pod.constraints.extended or pod.constraints.host_ports:
                    self._use_node_resources(pod, node, +1)
        self._holders: dict[LabelSet, Counter[int]] = {}
        self._term_holders: dict[PodAffinityTerm, Counter[int]] = {}
        self._groups: dict[Group, Counts] = {}
        self._feeds: dict[LabelSet, list[Counts]] = {}
        """For each label set seen, the group counts its pods add to."""
        self._domains: dict[str, _Domains] = {}
        self._masks: dict[tuple[Constraints, SpreadConstraint, bool], Mask] = {}
        self._baseline: dict[tuple[str, Constraints, int], int] = {}
        self._counting = any(c.counts_pods for c in kinds)
        if self._counting:
            self._index_cluster(cluster, everyone)

    # -- questions -------------------------------------------------------------------------

    @property
    def counting(self) -> bool:
        """Whether some pod has a rule that counts other pods (then any move may change where
        another pod fits)."""
        return self._counting

    def static_mask(self, constraints: Constraints) -> Mask:
        """Nodes whose cordon, taints, selectors, node and volume affinity admit the pod
        (cached)."""
        mask = self._static.get(constraints)
        if mask is None:
            mask = np.array([static_fit(constraints, n) is None for n in self.nodes], dtype=bool)
            self._static[constraints] = mask
        return mask

    def fit_mask(self, pod: Pod, leaving: int | None = None) -> Mask:
        """Open nodes the pod fits on right now (every rule; resources and slots are
        :func:`~tuner.model.scheduling.resource_room` over all nodes at once). ``leaving``: the
        node the pod runs on and is about to leave (it no longer counts there, as an evicted
        pod does not for the scheduler; that node's own answer is as if it had left)."""
        if leaving is None:
            return self._fit_mask(pod)
        with self._gone(pod, leaving):
            return self._fit_mask(pod)

    def _fit_mask(self, pod: Pod) -> Mask:
        mask = self.static_mask(pod.constraints) & self.open & self._room(pod)
        for _, rule in self._components(pod):
            if not mask.any():
                break
            mask &= rule()
        return mask

    def why_not(self, pod: Pod, node: int, leaving: int | None = None) -> str | None:
        """Why the pod cannot be placed on the node right now, or None when it fits
        (``leaving``: as for :meth:`fit_mask`)."""
        if leaving is None:
            return self._why_not(pod, node)
        with self._gone(pod, leaving):
            return self._why_not(pod, node)

    def _why_not(self, pod: Pod, node: int) -> str | None:
        if not self.open[node]:
            return "node is being removed"
        free = Resources(int(self.free_cpu[node]), int(self.free_mem[node]))
        why = static_fit(pod.constraints, self.nodes[node]) or resource_fit(
            pod.requests, free, int(self.free_pods[node])
        )
        if why is not None:
            return why
        return next((reason for reason, rule in self._components(pod) if not rule()[node]), None)

    def refusal(self, pod: Pod, allowed: Mask | None = None, leaving: int | None = None) -> str:
        """Which rule leaves the pod no node (among ``allowed``): the first that, applied in
        the order of :meth:`why_not`, rules out every node the rules before it admit."""
        if leaving is None:
            return self._refusal(pod, allowed)
        with self._gone(pod, leaving):
            return self._refusal(pod, allowed)

    def _refusal(self, pod: Pod, allowed: Mask | None) -> str:
        constraints = pod.constraints
        mask = self.open.copy() if allowed is None else self.open & allowed
        if not mask.any():
            return "no open node"
        volumes = constraints.volumes
        core = replace(constraints, volumes=())
        steps: list[Component] = [
            ("cordon, taints, nodeSelector or node affinity", lambda: self.static_mask(core)),
            *(
                (
                    f"{v.volume} is reachable from none of them (volume node affinity)",
                    partial(self._reachable, v.terms),
                )
                for v in volumes
            ),
            ("not enough free CPU, memory or pod slots", partial(self._room, pod)),
            *self._components(pod),
        ]
        for reason, rule in steps:
            left = mask & rule()
            if not left.any():
                return f"{reason} on the {int(mask.sum())} node(s) the rules before it admit"
            mask = left
        return "it fits"

    def honoured(self, pod: Pod, leaving: int | None = None) -> Counts:
        """Per node, the total weight of the pod's preferred pod affinity and anti-affinity
        terms a placement there would honour (zeros when it has none)."""
        constraints = pod.constraints
        weight = np.zeros(len(self.nodes), dtype=np.int64)
        if not (constraints.preferred or constraints.preferred_anti):
            return weight
        if leaving is None:
            return self._honoured(pod, weight)
        with self._gone(pod, leaving):
            return self._honoured(pod, weight)

    def _honoured(self, pod: Pod, weight: Counts) -> Counts:
        constraints = pod.constraints
        for preferred, attract in (
            (constraints.preferred, True),
            (constraints.preferred_anti, False),
        ):
            for choice in preferred:
                term = choice.term
                near = self._near(term.group, term.topology_key)
                weight += choice.weight * (near if attract else ~near)
        return weight

    def best_fit(self, pod: Pod, mask: Mask, leaving: int | None = None) -> int:
        """The admissible node left tightest after placing the pod (best fit), among those
        that honour the most weight of the pod's preferred pod (anti-)affinity."""
        constraints = pod.constraints
        if constraints.preferred or constraints.preferred_anti:
            weight = self.honoured(pod, leaving)
            mask = mask & (weight == weight[mask].max())
        candidates = np.flatnonzero(mask)
        cpu_left = (self.free_cpu[candidates] - pod.requests.cpu) / np.maximum(
            self.alloc_cpu[candidates], 1
        )
        mem_left = (self.free_mem[candidates] - pod.requests.memory) / np.maximum(
            self.alloc_mem[candidates], 1
        )
        return int(candidates[np.argmin(cpu_left + mem_left)])

    def requested(self, node: int) -> Resources:
        """Requests on a node in the simulated state."""
        return Resources(
            int(self.alloc_cpu[node] - self.free_cpu[node]),
            int(self.alloc_mem[node] - self.free_mem[node]),
        )

    def max_cpu_share(self, nodes: Iterable[int]) -> float:
        """Highest requested/allocatable CPU share among the given nodes (0 when none)."""
        idx = np.fromiter(nodes, dtype=np.int64)
        if idx.size == 0:
            return 0.0
        used = self.alloc_cpu[idx] - self.free_cpu[idx]
        return float(np.max(used / np.maximum(self.alloc_cpu[idx], 1)))

    # -- changes ---------------------------------------------------------------------------

    def move(self, pod: Pod, source: int, target: int) -> None:
        """Move a pod between nodes."""
        self.unplace(pod, source)
        self.place(pod, target)

    def place(self, pod: Pod, node: int) -> None:
        """Start a pod on a node (no check: ask :meth:`fit_mask` or :meth:`why_not` first)."""
        self._occupy(pod, node, +1)

    def unplace(self, pod: Pod, node: int) -> None:
        """Take a pod off a node."""
        self._occupy(pod, node, -1)

    def close(self, node: int) -> None:
        """Exclude a node as a destination (it is being removed)."""
        self.open[node] = False
        self._journal.append(lambda: self.open.__setitem__(node, True))

    def fork(self) -> int:
        """A marker to revert to."""
        return len(self._journal)

    def revert(self, marker: int) -> None:
        """Undo every change made since ``fork()`` returned ``marker``."""
        while len(self._journal) > marker:
            self._journal.pop()()

    @contextmanager
    def _gone(self, pod: Pod, leaving: int) -> Iterator[None]:
        """The block runs with the pod taken off ``leaving``, then put back."""
        marker = self.fork()
        self.unplace(pod, leaving)
        try:
            yield
        finally:
            self.revert(marker)

    # -- the rules beyond static fit and CPU/memory ------------------------------------------

    def _components(self, pod: Pod) -> list[Component]:
        """The pod's rules that depend on other pods and on resources beyond CPU and memory,
        in the order :meth:`why_not` reports them (none for most pods)."""
        constraints = pod.constraints
        out: list[Component] = []
        for name, amount in constraints.extended:
            out.append((f"not enough free {name}", partial(self._has_free, name, amount)))
        if constraints.host_ports and self._ports:
            out.append((_port_reason(constraints), lambda: self._port_mask(constraints)))
        if not self._counting:
            return out
        for term in constraints.anti_affinity:
            out.append(
                (
                    "required pod anti-affinity",
                    partial(self._far, term.group, term.topology_key),
                )
            )
        if self._term_holders:
            out.append(("required pod anti-affinity of a pod there", lambda: self._repelled(pod)))
        if constraints.affinity:
            out.append(("required pod affinity", lambda: self._attracted(pod)))
        for position, spread in enumerate(constraints.spread):
            out.append(
                (
                    f"{spread} would be broken",
                    partial(self._spread_mask, pod, position, spread),
                )
            )
        return out

    def _room(self, pod: Pod) -> Mask:
        """Nodes with the CPU, memory and a pod slot free for the pod."""
        cpu, memory, slot = resource_room(
            pod.requests, self.free_cpu, self.free_mem, self.free_pods
        )
        return cpu & memory & slot

    def _reachable(self, terms: NodeSelectorTerms) -> Mask:
        return np.array([selects_node(terms, n.labels) for n in self.nodes], dtype=np.bool_)

    def _has_free(self, name: str, amount: int) -> Mask:
        return self._free_ext[name] >= amount

    def _far(self, group: Group, key: str) -> Mask:
        return ~self._near(group, key)

    def _port_mask(self, constraints: Constraints) -> Mask:
        mask = np.ones(len(self.nodes), dtype=np.bool_)
        for node, used in self._ports.items():
            if port_fit(constraints, (p for p, c in used.items() if c > 0)) is not None:
                mask[node] = False
        return mask

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

    def _near(self, group: Group, key: str) -> Mask:
        """Nodes whose ``key`` domain holds a pod of ``group`` (False where the key is
        missing)."""
        domains = self._domain(key)
        has = domains.of >= 0
        per_domain = self._per_domain(self._group(group), domains, has)
        return has & (_at_nodes(per_domain, domains) > 0)

    def _repelled(self, pod: Pod) -> Mask:
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

    def _attracted(self, pod: Pod) -> Mask:
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

    def _spread_mask(self, pod: Pod, position: int, spread: SpreadConstraint) -> Mask:
        """Nodes where the pod keeps the spread constraint (a soft one: as close as it was)."""
        constraints = pod.constraints
        domains = self._domain(spread.topology_key)
        per_domain, present = self._spread_counts(pod, spread)
        minimum = global_minimum(per_domain[present].tolist(), spread.min_domains)
        joined = _at_nodes(per_domain, domains) + int(spread.selector.matches(pod.labels))
        bound = skew_limit(spread, self._baseline.get((pod.namespace, constraints, position), 0))
        keeps = (domains.of >= 0) & (joined - minimum <= bound)
        return keeps if spread.hard else keeps | (domains.of < 0)

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

    def _index_cluster(self, cluster: Cluster, everyone: Iterable[Pod]) -> None:
        """The label index of the placed pods, their anti-affinity terms, and the baseline of
        every soft spread constraint (when some pod has a rule that counts pods)."""
        index = self.index
        for key, where in cluster.label_counts.items():
            self._holders[key] = Counter({index[name]: count for name, count in where.items()})
            self._feeds[key] = []
        for pod in cluster.pods:
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

    # -- internals -------------------------------------------------------------------------

    def _track_extended(self, constraints: Constraints) -> None:
        for name, _ in constraints.extended:
            if name not in self._free_ext:
                self._free_ext[name] = np.array(
                    [n.extended.get(name, 0) for n in self.nodes], dtype=np.int64
                )

    def _use_node_resources(self, pod: Pod, node: int, sign: int) -> None:
        """Extended resources and host ports the pod takes (sign 1) or gives back (-1)."""
        constraints = pod.constraints
        self._track_extended(constraints)
        for name, amount in constraints.extended:
            self._free_ext[name][node] -= sign * amount
        if constraints.host_ports:
            used = self._ports.setdefault(node, Counter())
            for port in constraints.host_ports:
                used[port] += sign

    def _occupy(self, pod: Pod, node: int, sign: int) -> None:
        cpu, mem = pod.requests.cpu, pod.requests.memory
        self.free_cpu[node] -= sign * cpu
        self.free_mem[node] -= sign * mem
        self.free_pods[node] -= sign
        constraints = pod.constraints
        if constraints.extended or constraints.host_ports:
            self._use_node_resources(pod, node, sign)
        if self._counting:
            self._index_labels(pod, node, sign)
        self._journal.append(lambda: self._undo(pod, node, sign))

    def _index_labels(self, pod: Pod, node: int, sign: int) -> None:
        self._index((pod.namespace, freeze_labels(pod.labels)), pod, node, sign)

    def _index(self, key: LabelSet, pod: Pod, node: int, sign: int) -> None:
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

    def _undo(self, pod: Pod, node: int, sign: int) -> None:
        self._occupy(pod, node, -sign)
        self._journal.pop()


def _at_nodes(per_domain: Counts, domains: _Domains) -> Counts:
    """Each node's domain's count (0 where the node lacks the key, also when no node has it)."""
    return np.append(per_domain, 0)[domains.of]


def _port_reason(constraints: Constraints) -> str:
    ports = ", ".join(str(p) for p in constraints.host_ports)
    return f"host port {ports} in use"


def _soft(constraints: Constraints) -> bool:
    """Whether the constraints hold a soft spread constraint (it needs a baseline)."""
    return any(not c.hard for c in constraints.spread)
