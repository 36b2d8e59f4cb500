"""Where kube-scheduler puts a pod: its filters and its default scoring.

Filters: node registered and ready, not cordoned, taints tolerated (``NoSchedule``,
``NoExecute``), free CPU, memory and a pod slot. Scores, with kube-scheduler's default plugin
weights:

- NodeResourcesFit, ``LeastAllocated`` (weight 1): the mean over CPU and memory of
  ``(allocatable - requested - pod) / allocatable * 100``. It prefers the emptiest node, which
  spreads pods and is what fragments real clusters. Pods with no request count as 100m / 200Mi
  here (kube-scheduler's non-zero defaults for scoring).
- NodeResourcesBalancedAllocation (weight 1): ``(1 - std(cpu share, memory share)) * 100``.
- NodeAffinity (weight 2): the preferred node affinity of weight 100 to the workload's
  ``tuner.dev/<namespace>.<name>`` label, normalised to 0-100 over the feasible nodes. This is
  how the simulated executor steers a pod, as the real one does (docs/operating.md).
- TaintToleration (weight 3): fewer untolerated ``PreferNoSchedule`` taints (the Cluster
  Autoscaler's ``DeletionCandidateOfClusterAutoscaler``) score higher.

Ties are broken at random with the simulation's seeded generator, as kube-scheduler does.
Not modelled: the default topology spreading, inter-pod affinity, image locality.
"""

from __future__ import annotations

import random

from tuner.model.scheduling import static_fit
from tuner.sim.state import TOLERATE_ALL, SimCluster, SimNode, SimPod, affinity_label

NON_ZERO_CPU = 100
NON_ZERO_MEMORY = 200 * 2**20

WEIGHT_FIT = 1
WEIGHT_BALANCED = 1
WEIGHT_AFFINITY = 2
WEIGHT_TAINT = 3


class Scheduler:
    """kube-scheduler's filters and default scoring over the simulated nodes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def feasible(self, cluster: SimCluster, pod: SimPod, now: float) -> list[SimNode]:
        """Nodes that pass every filter for the pod, in name order."""
        constraints = TOLERATE_ALL if pod.daemon else None
        requests = pod.requests
        out = []
        for node in sorted(cluster.nodes.values(), key=lambda n: n.name):
            if not node.ready(now) or not node.fits(requests):
                continue
            if constraints is None and (
                node.unschedulable
                or any(t.effect in ("NoSchedule", "NoExecute") for t in node.taints)
            ):
                continue
            if constraints is not None and static_fit(constraints, node) is not None:
                continue
            out.append(node)
        return out

    def scores(self, pod: SimPod, nodes: list[SimNode]) -> list[float]:
        """The weighted default score of each feasible node."""
        label = affinity_label(pod.service)
        cpu = pod.service.cpu or NON_ZERO_CPU
        memory = pod.service.memory or NON_ZERO_MEMORY
        affinity = [100.0 if label in n.labels else 0.0 for n in nodes]
        soft_taints = [sum(1 for t in n.taints if t.effect == "PreferNoSchedule") for n in nodes]
        most_taints = max(soft_taints, default=0)
        out = []
        for node, prefer, taints in zip(nodes, affinity, soft_taints, strict=True):
            alloc = node.allocatable
            cpu_share = min((node.cpu + cpu) / alloc.cpu, 1.0)
            mem_share = min((node.memory + memory) / alloc.memory, 1.0)
            least = ((1 - cpu_share) + (1 - mem_share)) / 2 * 100
            balanced = (1 - abs(cpu_share - mem_share) / 2) * 100
            taint = 100.0 - (taints * 100.0 / most_taints if most_taints else 0.0)
            out.append(
                WEIGHT_FIT * least
                + WEIGHT_BALANCED * balanced
                + WEIGHT_AFFINITY * prefer
                + WEIGHT_TAINT * taint
            )
        return out

    def choose(self, cluster: SimCluster, pod: SimPod, now: float) -> SimNode | None:
        """The node kube-scheduler would bind the pod to, or None (unschedulable)."""
        nodes = self.feasible(cluster, pod, now)
        if not nodes:
            return None
        scores = self.scores(pod, nodes)
        best = max(scores)
        top = [n for n, s in zip(nodes, scores, strict=True) if s >= best - 1e-9]
        return top[0] if len(top) == 1 else self.rng.choice(top)

    def schedule(self, cluster: SimCluster, now: float) -> int:
        """Bind every pending pod that fits somewhere, oldest first; returns how many."""
        bound = 0
        for pod in cluster.pending():
            node = self.choose(cluster, pod, now)
            if node is not None:
                cluster.bind(pod, node, now)
                bound += 1
        return bound
