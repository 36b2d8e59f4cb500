"""The scheduling simulation: fit, placement and "what if these pods move" (cf. the Cluster
Autoscaler's ClusterSnapshot): place and unplace pods, close nodes, fork and revert.

It is private, mutable working state inside pure functions: callers pass an immutable
:class:`~tuner.model.cluster.Cluster` and get immutable results back. Every fit rule comes from
:mod:`tuner.model.scheduling`; :meth:`Snapshot.fit_mask` asks them for all nodes at once (the
static rules cached per constraints, resources and pod slots as numpy vectors, anti-affinity
through a label index), so one "where can this pod go" question costs a few vector operations
instead of a Python loop over nodes, and :meth:`Snapshot.why_not` asks them for one node.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.resources import Resources
from tuner.model.scheduling import (
    AntiAffinityTerm,
    Constraints,
    Labels,
    freeze_labels,
    resource_fit,
    static_fit,
)

Mask = npt.NDArray[np.bool_]
LabelSet = tuple[str, Labels]
"""A pod's namespace and labels: what anti-affinity terms select on."""


@dataclass(frozen=True, slots=True)
class Move:
    """A simulated move of a pod to the node at ``target`` (an index into the snapshot)."""

    pod: Pod
    target: int


class Snapshot:
    """Node occupancy of a cluster that answers fit and placement and can be changed (place,
    unplace, move, close) and rolled back (fork, revert)."""

    def __init__(
        self, cluster: Cluster, arriving: Iterable[Pod] = (), new_nodes: Iterable[Node] = ()
    ) -> None:
        """The cluster as it runs now; ``arriving`` are pods not in it that may be placed later
        (their anti-affinity, like the residents', switches the label index on); ``new_nodes``
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
        """False for nodes excluded as destinations (being removed)."""
        self._static: dict[Constraints, Mask] = {}
        self._journal: list[Callable[[], None]] = []
        self._holders: dict[LabelSet, Counter[int]] = {}
        self._term_holders: dict[AntiAffinityTerm, Counter[int]] = {}
        self._anti = any(p.constraints.anti_affinity for p in (*placed, *arriving))
        if self._anti:
            for pod, node in zip(placed, where.tolist(), strict=True):
                self._index_labels(pod, node, +1)

    # -- questions -------------------------------------------------------------------------

    def static_mask(self, constraints: Constraints) -> Mask:
        """Nodes whose cordon, taints, selectors and node affinity admit the pod (cached)."""
        mask = self._static.get(constraints)
        if mask is None:
            mask = np.array([static_fit(constraints, n) is None for n in self.nodes], dtype=bool)
            self._static[constraints] = mask
        return mask

    def fit_mask(self, pod: Pod) -> Mask:
        """Open nodes the pod fits on right now (every rule; resources and slots are
        :func:`~tuner.model.scheduling.resource_fit` over all nodes at once)."""
        cpu, mem = pod.requests.cpu, pod.requests.memory
        mask = (
            self.static_mask(pod.constraints)
            & self.open
            & (self.free_cpu >= cpu)
            & (self.free_mem >= mem)
            & (self.free_pods >= 1)
        )
        if self._anti:
            for node in self._repelling_nodes(pod):
                mask[node] = False
        return mask

    def why_not(self, pod: Pod, node: int) -> str | None:
        """Why the pod cannot be placed on the node right now, or None when it fits."""
        if not self.open[node]:
            return "node is being removed"
        free = Resources(int(self.free_cpu[node]), int(self.free_mem[node]))
        why = static_fit(pod.constraints, self.nodes[node]) or resource_fit(
            pod.requests, free, int(self.free_pods[node])
        )
        if why is None and self._anti and node in self._repelling_nodes(pod):
            return "required pod anti-affinity"
        return why

    def best_fit(self, pod: Pod, mask: Mask) -> int:
        """The admissible node left tightest after placing the pod (best fit)."""
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

    # -- internals -------------------------------------------------------------------------

    def _occupy(self, pod: Pod, node: int, sign: int) -> None:
        cpu, mem = pod.requests.cpu, pod.requests.memory
        self.free_cpu[node] -= sign * cpu
        self.free_mem[node] -= sign * mem
        self.free_pods[node] -= sign
        if self._anti:
            self._index_labels(pod, node, sign)
        self._journal.append(lambda: self._undo(pod, node, sign))

    def _index_labels(self, pod: Pod, node: int, sign: int) -> None:
        key = (pod.namespace, freeze_labels(pod.labels))
        self._holders.setdefault(key, Counter())[node] += sign
        for term in pod.constraints.anti_affinity:
            self._term_holders.setdefault(term, Counter())[node] += sign

    def _undo(self, pod: Pod, node: int, sign: int) -> None:
        self._occupy(pod, node, -sign)
        self._journal.pop()

    def _repelling_nodes(self, pod: Pod) -> set[int]:
        """Nodes where required anti-affinity (the pod's or a resident's) forbids the pod."""
        nodes: set[int] = set()
        for term in pod.constraints.anti_affinity:
            for (namespace, labels), holders in self._holders.items():
                if term.selects(namespace, dict(labels)):
                    nodes.update(n for n, c in holders.items() if c > 0)
        own = dict(pod.labels)
        for term, holders in self._term_holders.items():
            if term.selects(pod.namespace, own):
                nodes.update(n for n, c in holders.items() if c > 0)
        return nodes
