"""The scheduling simulation: fit, placement and "what if these pods move" (cf. the Cluster
Autoscaler's ClusterSnapshot): place and unplace pods, close nodes, fork and revert. Private,
mutable working state inside pure functions: callers pass an immutable
:class:`~tuner.model.cluster.Cluster` and get immutable results back; nodes are named at its
boundary, its per-node arrays are its own. Every fit rule comes from
:mod:`tuner.model.scheduling`; :meth:`Snapshot.fit_mask` asks them for all nodes at once (the
static rules cached per constraints, resources, pod slots and extended resources as numpy
vectors, host ports per node that holds any, and the rules that count pods — inter-pod affinity
and anti-affinity, topology spread — from :class:`~tuner.model.pod_counting.PodCounting`), so
one "where can this pod go" question costs a few vector operations instead of a Python loop
over nodes, and :meth:`Snapshot.why_not` asks them for one node. The counts exist only when
some pod has such a rule, extended resources only when some pod requests them: a cluster
without them pays nothing.

Changes are tried inside :meth:`Snapshot.forked` (the Cluster Autoscaler's
``WithForkedSnapshot``): every change made in the block is undone when it ends, unless the
block committed it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from functools import partial
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.constraints import Constraints, HostPort, NodeSelectorTerms, selects_node
from tuner.model.fork import Fork
from tuner.model.pod_counting import Counts, Mask, PodCounting
from tuner.model.resources import Resources
from tuner.model.scheduling import pods_room, port_fit, resource_fit, resource_room, static_fit

_T = TypeVar("_T", bound=np.generic)
Component = tuple[str, Callable[[], Mask]]
"""A rule's reason and its mask over the nodes (computed when asked)."""
_NOTHING = nullcontext()


class Snapshot:
    """Node occupancy of a cluster that answers fit and placement and can be changed (place,
    unplace, move, close) inside forks that are reverted unless committed."""

    def __init__(
        self, cluster: Cluster, arriving: Iterable[Pod] = (), new_nodes: Iterable[Node] = ()
    ) -> None:
        """The cluster as it runs now; ``arriving`` are pods not in it that may be placed later
        (their rules that count pods, like the residents', switch the label index on); ``new_nodes``
        are nodes not in it yet (a pool's template under a provisional name), empty and open,
        after the cluster's own in every mask."""
        self.cluster = cluster
        self._nodes: tuple[Node, ...] = cluster.nodes
        self._index = {n.name: i for i, n in enumerate(self._nodes)}
        size = len(self._nodes)
        self._alloc_cpu = np.array([n.allocatable.cpu for n in self._nodes], dtype=np.int64)
        self._alloc_mem = np.array([n.allocatable.memory for n in self._nodes], dtype=np.int64)
        placed = [p for p in cluster.pods if p.node is not None]
        where = np.fromiter((self._index[p.node or ""] for p in placed), np.int64, len(placed))
        self._free_cpu = self._alloc_cpu.copy()
        self._free_mem = self._alloc_mem.copy()
        self._free_pods = np.array([n.max_pods for n in self._nodes], dtype=np.int64)
        for free, amount in (
            (self._free_cpu, (p.requests.cpu for p in placed)),
            (self._free_mem, (p.requests.memory for p in placed)),
        ):
            np.subtract.at(free, where, np.fromiter(amount, np.int64, len(placed)))
        np.subtract.at(self._free_pods, where, 1)
        self._open = np.ones(size, dtype=np.bool_)  # False: no destination (:meth:`close`)
        self._staying = np.ones(size, dtype=np.bool_)  # False: being removed, cordoned
        self._static: dict[Constraints, Mask] = {}
        self._journal: list[Callable[[], None]] = []
        self._free_ext: dict[str, Counts] = {}  # per extended resource a pod requests
        self._ports: dict[int, Counter[HostPort]] = {}  # on the nodes that hold any
        everyone = (*placed, *arriving)
        kinds = {id(c): c for c in [p.constraints for p in everyone]}.values()  # each once
        for constraints in kinds:
            self._track_extended(constraints)
        if any(c.extended or c.host_ports for c in kinds):
            for pod, node in zip(placed, where.tolist(), strict=True):
                if pod.constraints.extended or pod.constraints.host_ports:
                    self._use_node_resources(pod, node, +1)
        self._counts = (
            PodCounting(cluster, self._nodes, self._staying, everyone)
            if any(c.counts_pods for c in kinds)
            else None
        )
        self._resize((*self._nodes, *new_nodes))

    # -- nodes -----------------------------------------------------------------------------

    def node(self, name: str) -> Node:
        """The node of that name."""
        return self._nodes[self._index[name]]

    def mask_of(self, names: Iterable[str]) -> Mask:
        """The mask holding the named nodes."""
        mask = np.zeros(len(self._nodes), dtype=np.bool_)
        mask[[self._index[n] for n in names]] = True
        return mask

    def names_of(self, mask: Mask) -> list[str]:
        """The names of the nodes a mask holds, in node order."""
        return [self._nodes[i].name for i in np.flatnonzero(mask).tolist()]

    def is_open(self, name: str) -> bool:
        """Whether the node may receive pods (it is not being removed)."""
        return bool(self._open[self._index[name]])

    # -- questions -------------------------------------------------------------------------

    @property
    def counting(self) -> bool:
        """Whether some pod has a rule that counts pods (a move may change where others fit)."""
        return self._counts is not None

    def static_mask(self, constraints: Constraints) -> Mask:
        """Nodes whose cordon, taints, selectors, node and volume affinity admit it (cached)."""
        mask = self._static.get(constraints)
        if mask is None:
            mask = np.array([static_fit(constraints, n) is None for n in self._nodes], dtype=bool)
            self._static[constraints] = mask
        return mask

    def fit_mask(
        self,
        pod: Pod,
        leaving: str | None = None,
        reopened: Mask | None = None,
        room: bool = True,
    ) -> Mask:
        """Open nodes the pod fits on right now (every rule; resources and slots are
        :func:`~tuner.model.scheduling.resource_room` over all nodes at once). ``leaving``: the
        node the pod runs on and is about to leave (it no longer counts there, as an evicted
        pod does not for the scheduler; that node's own answer is as if it had left).
        ``reopened``: closed nodes that count as open for this question (nodes a plan keeps
        out of but the scheduler still places new pods on). ``room`` False: free CPU, memory
        and pod slots are not asked (where the pod would fit were room made there)."""
        with self._gone(pod, leaving):
            usable = self._open if reopened is None else self._open | reopened
            mask = self.static_mask(pod.constraints) & usable
            if room:
                mask &= self._room(pod)
            for _, rule in self._components(pod):
                if not mask.any():
                    break
                mask &= rule()
            return mask

    def why_not(self, pod: Pod, node: str, leaving: str | None = None) -> str | None:
        """Why the pod cannot go on the node now, or None (``leaving``: as for :meth:`fit_mask`)."""
        with self._gone(pod, leaving):
            at = self._index[node]
            if not self._open[at]:
                return "node is being removed"
            free = Resources(int(self._free_cpu[at]), int(self._free_mem[at]))
            why = static_fit(pod.constraints, self._nodes[at]) or resource_fit(
                pod.requests, free, int(self._free_pods[at])
            )
            if why is not None:
                return why
            return next((reason for reason, rule in self._components(pod) if not rule()[at]), None)

    def refusal(self, pod: Pod, allowed: Mask | None = None, leaving: str | None = None) -> str:
        """Which rule leaves the pod no node (among ``allowed``): the first that, applied in
        the order of :meth:`why_not`, rules out every node the rules before it admit."""
        with self._gone(pod, leaving):
            constraints = pod.constraints
            mask = self._open.copy() if allowed is None else self._open & allowed
            if not mask.any():
                return "no open node"
            core = replace(constraints, volumes=())
            steps: list[Component] = [
                ("cordon, taints, nodeSelector or node affinity", lambda: self.static_mask(core)),
                *(
                    (
                        f"{v.volume} is reachable from none of them (volume node affinity)",
                        partial(self._reachable, v.terms),
                    )
                    for v in constraints.volumes
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

    def honoured(self, pod: Pod, leaving: str | None = None) -> Counts:
        """Per node, the total weight of the pod's preferred pod affinity and anti-affinity
        terms a placement there would honour (zeros when it has none)."""
        constraints = pod.constraints
        weight = np.zeros(len(self._nodes), dtype=np.int64)
        if not (constraints.preferred or constraints.preferred_anti) or self._counts is None:
            return weight
        with self._gone(pod, leaving):
            for preferred, attract in (
                (constraints.preferred, True),
                (constraints.preferred_anti, False),
            ):
                for choice in preferred:
                    term = choice.term
                    near = self._counts.near(term.group, term.topology_key)
                    weight += choice.weight * (near if attract else ~near)
            return weight

    def best_fit(self, pod: Pod, mask: Mask, leaving: str | None = None) -> str:
        """The admissible node left tightest after placing the pod (best fit), among those
        that honour the most weight of the pod's preferred pod (anti-)affinity."""
        constraints = pod.constraints
        if constraints.preferred or constraints.preferred_anti:
            weight = self.honoured(pod, leaving)
            mask = mask & (weight == weight[mask].max())
        candidates = np.flatnonzero(mask)
        cpu_left = (self._free_cpu[candidates] - pod.requests.cpu) / np.maximum(
            self._alloc_cpu[candidates], 1
        )
        mem_left = (self._free_mem[candidates] - pod.requests.memory) / np.maximum(
            self._alloc_mem[candidates], 1
        )
        return self._nodes[int(candidates[np.argmin(cpu_left + mem_left)])].name

    def least_allocated(self, pod: Pod, mask: Mask) -> str:
        """The admissible node kube-scheduler's LeastAllocated scoring picks for the pod: the
        lowest requested share of CPU plus memory once it is placed (the first on a tie)."""
        share = (self._alloc_cpu - self._free_cpu + pod.requests.cpu) / self._alloc_cpu + (
            self._alloc_mem - self._free_mem + pod.requests.memory
        ) / self._alloc_mem
        return self._nodes[int(np.argmin(np.where(mask, share, np.inf)))].name

    def requested(self, node: str) -> Resources:
        """Requests on a node in the simulated state."""
        at = self._index[node]
        return Resources(
            int(self._alloc_cpu[at] - self._free_cpu[at]),
            int(self._alloc_mem[at] - self._free_mem[at]),
        )

    def shortfalls(self, requests: Resources, mask: Mask) -> list[tuple[float, str, Resources]]:
        """For each node of ``mask``, in node order: the shares of its allocatable CPU and
        memory its free room lacks for ``requests``, summed; its name; and what it lacks."""
        at = np.flatnonzero(mask)
        cpu = np.maximum(requests.cpu - self._free_cpu[at], 0)
        mem = np.maximum(requests.memory - self._free_mem[at], 0)
        gaps = cpu / np.maximum(self._alloc_cpu[at], 1) + mem / np.maximum(self._alloc_mem[at], 1)
        lacks = zip(at.tolist(), gaps.tolist(), cpu.tolist(), mem.tolist(), strict=True)
        return [(gap, self._nodes[i].name, Resources(c, m)) for i, gap, c, m in lacks]

    def free_elsewhere(self, node: str) -> Resources:
        """Free CPU and memory in total on the open nodes other than ``node``."""
        others = self._open.copy()
        others[self._index[node]] = False
        return Resources(int(np.sum(self._free_cpu[others])), int(np.sum(self._free_mem[others])))

    def max_cpu_share(self, nodes: Iterable[str]) -> float:
        """Highest requested/allocatable CPU share among the given nodes (0 when none)."""
        idx = np.fromiter((self._index[n] for n in nodes), dtype=np.int64)
        if idx.size == 0:
            return 0.0
        used = self._alloc_cpu[idx] - self._free_cpu[idx]
        return float(np.max(used / np.maximum(self._alloc_cpu[idx], 1)))

    # -- changes ---------------------------------------------------------------------------

    def move(self, pod: Pod, source: str, target: str) -> None:
        """Move a pod between nodes."""
        self.unplace(pod, source)
        self.place(pod, target)

    def place(self, pod: Pod, node: str) -> None:
        """Start a pod on a node (no check: ask :meth:`fit_mask` or :meth:`why_not` first)."""
        self._occupy(pod, self._index[node], +1)

    def unplace(self, pod: Pod, node: str) -> None:
        """Take a pod off a node."""
        self._occupy(pod, self._index[node], -1)

    def add_nodes(self, nodes: Iterable[Node]) -> None:
        """Nodes not in the cluster yet (a pool's template under a provisional name), empty
        and open, after the others in every mask; gone again when the fork that added them
        ends (every pod placed on them must be gone by then, as a revert makes sure)."""
        added = tuple(nodes)
        if not added:
            return
        size = len(self._nodes)
        self._resize((*self._nodes, *added))
        self._journal.append(lambda: self._resize(self._nodes[:size]))

    def close(self, node: str, removed: bool = True) -> None:
        """No destination: being removed (cordoned, then drained), or not (kept out of)."""
        at = self._index[node]
        self._open[at] = False
        self._journal.append(lambda: self._open.__setitem__(at, True))
        if removed:
            self._staying[at] = False
            self._journal.append(lambda: self._staying.__setitem__(at, True))

    def forked(self) -> Fork:
        """The block's changes are undone when it ends (also by an exception) unless it calls
        :meth:`Fork.commit`; forks nest."""
        return Fork(self._journal)

    def _gone(self, pod: Pod, leaving: str | None) -> AbstractContextManager[object]:
        """For a block run with the pod taken off ``leaving`` (if any), then put back."""
        if leaving is None:
            return _NOTHING
        fork = self.forked()
        self.unplace(pod, leaving)
        return fork

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
        counts = self._counts
        if counts is None:
            return out
        for term in constraints.anti_affinity:
            out.append(
                ("required pod anti-affinity", partial(counts.far, term.group, term.topology_key))
            )
        if counts.repelling:
            out.append(("required pod anti-affinity of a pod there", lambda: counts.repelled(pod)))
        if constraints.affinity:
            out.append(("required pod affinity", lambda: counts.attracted(pod)))
        for position, spread in enumerate(constraints.spread):
            out.append(
                (f"{spread} would be broken", partial(counts.spread_mask, pod, position, spread))
            )
        return out

    def count_fitting(self, pod: Pod, mask: Mask) -> int:
        """How many pods like ``pod`` the ``mask``'s nodes hold by requests (:func:`pods_room`)."""
        return pods_room(pod.requests, mask, self._free_cpu, self._free_mem, self._free_pods)

    def _room(self, pod: Pod) -> Mask:
        """Nodes with the CPU, memory and a pod slot free for the pod."""
        cpu, memory, slot = resource_room(
            pod.requests, self._free_cpu, self._free_mem, self._free_pods
        )
        return cpu & memory & slot

    def _reachable(self, terms: NodeSelectorTerms) -> Mask:
        return np.array([selects_node(terms, n.labels) for n in self._nodes], dtype=np.bool_)

    def _has_free(self, name: str, amount: int) -> Mask:
        return self._free_ext[name] >= amount

    def _port_mask(self, constraints: Constraints) -> Mask:
        mask = np.ones(len(self._nodes), dtype=np.bool_)
        for node, used in self._ports.items():
            if port_fit(constraints, (p for p, c in used.items() if c > 0)) is not None:
                mask[node] = False
        return mask

    # -- internals -------------------------------------------------------------------------

    def _resize(self, nodes: tuple[Node, ...]) -> None:
        """The snapshot over ``nodes``: the current ones, with new empty ones after them or
        the last ones (emptied) gone."""
        keep = min(len(nodes), len(self._nodes))
        added = nodes[keep:]

        def grown(array: npt.NDArray[_T], values: Iterable[object]) -> npt.NDArray[_T]:
            more = np.fromiter(values, dtype=array.dtype, count=len(added))
            return np.concatenate([array[:keep], more])

        self._alloc_cpu = grown(self._alloc_cpu, (n.allocatable.cpu for n in added))
        self._alloc_mem = grown(self._alloc_mem, (n.allocatable.memory for n in added))
        self._free_cpu = grown(self._free_cpu, (n.allocatable.cpu for n in added))
        self._free_mem = grown(self._free_mem, (n.allocatable.memory for n in added))
        self._free_pods = grown(self._free_pods, (n.max_pods for n in added))
        self._open = grown(self._open, (True for _ in added))
        self._staying = grown(self._staying, (True for _ in added))
        self._free_ext = {
            name: grown(free, (n.extended.get(name, 0) for n in added))
            for name, free in self._free_ext.items()
        }
        self._static = {
            c: grown(mask, (static_fit(c, n) is None for n in added))
            for c, mask in self._static.items()
        }
        self._ports = {node: used for node, used in self._ports.items() if node < len(nodes)}
        self._nodes = nodes
        self._index = {n.name: i for i, n in enumerate(nodes)}
        if self._counts is not None:
            self._counts.resize(nodes, self._staying)

    def _track_extended(self, constraints: Constraints) -> None:
        for name, _ in constraints.extended:
            if name not in self._free_ext:
                self._free_ext[name] = np.array(
                    [n.extended.get(name, 0) for n in self._nodes], dtype=np.int64
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
        self._apply(pod, node, sign)
        self._journal.append(partial(self._apply, pod, node, -sign))

    def _apply(self, pod: Pod, node: int, sign: int) -> None:
        """The pod's requests taken (sign 1) or given back (-1) on the node, unlogged."""
        self._free_cpu[node] -= sign * pod.requests.cpu
        self._free_mem[node] -= sign * pod.requests.memory
        self._free_pods[node] -= sign
        constraints = pod.constraints
        if constraints.extended or constraints.host_ports:
            self._use_node_resources(pod, node, sign)
        if self._counts is not None:
            self._counts.count(pod, node, sign)


def _port_reason(constraints: Constraints) -> str:
    ports = ", ".join(str(p) for p in constraints.host_ports)
    return f"host port {ports} in use"
