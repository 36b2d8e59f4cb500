"""Where kube-scheduler puts a pod: its filters and its default scoring.

Filters: node registered and ready, not cordoned, taints tolerated (``NoSchedule``,
``NoExecute``), free CPU, memory and a pod slot, and every hard rule that counts other pods
(topology spread ``DoNotSchedule``, required pod affinity and anti-affinity both ways, host
ports): the domain model's predicates, the census over the ready nodes for the last. Scores,
with kube-scheduler's default plugin weights:

- NodeResourcesFit (weight 1), by its scoring strategy: ``LeastAllocated`` (the default), the
  mean over CPU and memory of ``(allocatable - requested - pod) / allocatable * 100``, prefers
  the emptiest node, which spreads pods and is what fragments real clusters; ``MostAllocated``
  (what bin-packing setups such as GKE's ``optimize-utilization`` profile and the descheduler's
  ``HighNodeUtilization`` use), the mean of ``(requested + pod) / allocatable * 100``, prefers
  the fullest feasible node. Both weigh CPU and memory 1:1 (the plugin's default resources).
  A request the simulator leaves at 0 (none set) counts as 100m / 200Mi here, for the pod
  placed and for every pod already on the node (kube-scheduler's non-zero defaults, its
  ``NonZeroRequested``): a node holding many pods without requests scores as fuller than their
  requests say.
- NodeResourcesBalancedAllocation (weight 1): ``(1 - std(cpu share, memory share)) * 100``,
  of the requests as they are (no non-zero defaults: the plugin scores ``Requested``).
- NodeAffinity (weight 2): the preferred node affinity of weight 100 to the workload's
  ``tuner.dev/<namespace>.<name>`` label, normalised to 0-100 over the feasible nodes. This is
  how the simulated executor steers a pod, as the real one does (docs/operating.md).
- TaintToleration (weight 3): fewer untolerated ``PreferNoSchedule`` taints (the Cluster
  Autoscaler's ``DeletionCandidateOfClusterAutoscaler``) score higher.

Ties are broken at random with the simulation's seeded generator, as kube-scheduler does.

The queue takes pods by priority, then age (the ``PrioritySort`` plugin): the tuner's placeholders
(priority -10) after every other pending pod. A pending pod that fits nowhere **preempts**
(the ``DefaultPreemption`` PostFilter; Kubernetes docs, "Pod Priority and Preemption", and
``pkg/scheduler/framework/preemption``): on each node that passes every filter but room, it
removes the pods of lower priority, and if it then fits, gives back ("reprieves") as many of them
as still leave it room, the most important first (higher priority, then the earlier started);
the rest are that node's victims. Of the nodes with victims it picks the one with the fewest
PodDisruptionBudget violations, then the lowest highest victim priority, the smallest sum of
priorities, the fewest victims, the latest start of the earliest-started most important victim,
then the first. Only placeholders can be victims here: every simulated workload's pod has the
same priority (no PriorityClass in any scenario), so no pod of a workload can preempt another,
and a placeholder itself never preempts (``preemptionPolicy: Never``). Placeholders have no
budget and one priority, so the choice comes down to the fewest victims, then the latest
earliest start. A victim's grace period is 0: it is deleted at once (not an eviction, it is no
workload's pod) and the preemptor is bound in the same pass, where kube-scheduler nominates the
node and binds on its next attempt.

Not modelled: the scores of topology spreading (the system default and ``ScheduleAnyway``
constraints) and of preferred inter-pod affinity, image locality.
"""

from __future__ import annotations

import random

from tuner.model.census import Census
from tuner.model.resources import Resources
from tuner.model.scheduling import resource_fit, static_fit
from tuner.sim.state import SimCluster, SimNode, SimPod, affinity_label, scored_requests

WEIGHT_FIT = 1
WEIGHT_BALANCED = 1
WEIGHT_AFFINITY = 2
WEIGHT_TAINT = 3

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
SCORING = (LEAST_ALLOCATED, MOST_ALLOCATED)


class Scheduler:
    """kube-scheduler's filters and scoring over the simulated nodes."""

    def __init__(self, rng: random.Random, scoring: str = LEAST_ALLOCATED) -> None:
        if scoring not in SCORING:
            raise ValueError(f"scoring must be one of {SCORING}, not {scoring!r}")
        self.rng = rng
        self.scoring = scoring

    def feasible(
        self, cluster: SimCluster, pod: SimPod, now: float, census: Census | None = None
    ) -> list[SimNode]:
        """Nodes that pass every filter for the pod, in name order (the fit rules are the
        domain model's: a service's pods have its rules, a DaemonSet's tolerate all, a
        placeholder has its own). ``census``: the cluster's, when some pod has rules that count
        others (:meth:`SimCluster.census`); built here when not given."""
        if census is None:
            census = cluster.census(now)
        constraints = pod.constraints
        requests = pod.requests
        return [
            node
            for node in sorted(cluster.nodes.values(), key=lambda n: n.name)
            if node.ready(now)
            and static_fit(constraints, node) is None
            and resource_fit(requests, node.free(), node.type.max_pods - len(node.pods)) is None
            and (census is None or census.why_not(pod, node.name) is None)
        ]

    def scores(self, pod: SimPod, nodes: list[SimNode]) -> list[float]:
        """The weighted score of each feasible node."""
        label = affinity_label(pod.service)
        cpu, memory = scored_requests(pod.service)
        affinity = [100.0 if label in n.labels else 0.0 for n in nodes]
        soft_taints = [sum(1 for t in n.taints if t.effect == "PreferNoSchedule") for n in nodes]
        most_taints = max(soft_taints, default=0)
        out = []
        for node, prefer, taints in zip(nodes, affinity, soft_taints, strict=True):
            alloc = node.allocatable
            cpu_share = min((node.scored_cpu + cpu) / alloc.cpu, 1.0)
            mem_share = min((node.scored_memory + memory) / alloc.memory, 1.0)
            used = (cpu_share + mem_share) / 2 * 100
            fit = used if self.scoring == MOST_ALLOCATED else 100 - used
            cpu_share = min((node.cpu + pod.service.cpu) / alloc.cpu, 1.0)
            mem_share = min((node.memory + pod.service.memory) / alloc.memory, 1.0)
            balanced = (1 - abs(cpu_share - mem_share) / 2) * 100
            taint = 100.0 - (taints * 100.0 / most_taints if most_taints else 0.0)
            out.append(
                WEIGHT_FIT * fit
                + WEIGHT_BALANCED * balanced
                + WEIGHT_AFFINITY * prefer
                + WEIGHT_TAINT * taint
            )
        return out

    def choose(
        self, cluster: SimCluster, pod: SimPod, now: float, census: Census | None = None
    ) -> SimNode | None:
        """The node kube-scheduler would bind the pod to, or None (unschedulable)."""
        nodes = self.feasible(cluster, pod, now, census)
        if not nodes:
            return None
        scores = self.scores(pod, nodes)
        best = max(scores)
        top = [n for n, s in zip(nodes, scores, strict=True) if s >= best - 1e-9]
        return top[0] if len(top) == 1 else self.rng.choice(top)

    def schedule(self, cluster: SimCluster, now: float) -> int:
        """Bind every pending pod that fits somewhere, oldest first; returns how many.

        Within one pass nodes only fill up, so a pod with the same requests and tolerations as
        one that fitted nowhere fits nowhere either: it is not filtered again (no node is
        scored, nothing random is drawn, the outcome is the same). A placeholder is like no
        other pod, and so is a pod with rules that count others but its service's pods."""
        pending = sorted(cluster.pending(), key=lambda p: p.placeholder)  # PrioritySort
        if not pending:
            return 0
        census = cluster.census(now)
        bound = 0
        unfit: set[tuple[int, int, object]] = set()
        for pod in pending:
            kind: object = pod.daemon
            if pod.placeholder:
                kind = -pod.uid
            elif pod.counted:
                kind = pod.service
            shape = (pod.service.cpu, pod.service.memory, kind)
            if shape in unfit:
                continue
            node = self.choose(cluster, pod, now, census)
            if node is None:
                node = self.preempt(cluster, pod, now, census)
                if node is None:
                    unfit.add(shape)
                    continue
                unfit.clear()  # the victims' room may fit a pod that fitted nowhere before
            cluster.bind(pod, node, now)
            if census is not None:
                census.add(node.name, pod)
            bound += 1
        return bound

    def preempt(
        self, cluster: SimCluster, pod: SimPod, now: float, census: Census | None = None
    ) -> SimNode | None:
        """Delete the placeholders on the node where their going lets ``pod`` fit (see the
        module's docstring); that node, or None (``pod`` is a placeholder, or no node would
        do)."""
        if pod.placeholder or not cluster.placeholders:
            return None
        best: tuple[tuple[int, float], SimNode, list[SimPod]] | None = None
        for node in sorted(cluster.nodes.values(), key=lambda n: n.name):
            victims = self._victims(cluster, pod, node, now, census)
            if not victims:
                continue
            rank = (len(victims), -min(v.bound_at for v in victims))
            if best is None or rank < best[0]:
                best = (rank, node, victims)
        if best is None:
            return None
        _, node, victims = best
        for victim in victims:
            if census is not None:
                census.remove(node.name, victim)
            cluster.delete_pod(victim)
        return node

    @staticmethod
    def _victims(
        cluster: SimCluster, pod: SimPod, node: SimNode, now: float, census: Census | None
    ) -> list[SimPod]:
        """The placeholders on ``node`` whose going lets ``pod`` fit, after the reprieve (the
        earliest started kept first); empty when there are none or their going is not
        enough."""
        lower = [p for p in cluster.pods_on(node) if p.placeholder]
        if (
            not lower
            or not node.ready(now)
            or static_fit(pod.constraints, node) is not None
            or (census is not None and census.why_not(pod, node.name) is not None)
        ):
            return []
        free = node.free() + Resources.total([p.requests for p in lower])
        slots = node.type.max_pods - len(node.pods) + len(lower)
        if resource_fit(pod.requests, free, slots) is not None:
            return []
        free, slots = free - pod.requests, slots - 1
        victims = []
        for placeholder in sorted(lower, key=lambda p: (p.bound_at, p.uid)):
            if resource_fit(placeholder.requests, free, slots) is None:
                free, slots = free - placeholder.requests, slots - 1  # reprieved
            else:
                victims.append(placeholder)
        return victims
