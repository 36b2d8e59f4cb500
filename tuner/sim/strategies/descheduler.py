"""The Cluster Autoscaler with the descheduler's ``HighNodeUtilization`` and ``MostAllocated``
scoring: it evicts pods from underutilized nodes so the scheduler packs them onto fuller ones
and the Cluster Autoscaler (its default flags) removes the nodes left empty.

Defaults, read from ``kubernetes-sigs/descheduler`` (numbers and rules only):

- Thresholds: the plugin has none (they are required); its README example's ``cpu: 20``,
  ``memory: 20``, ``pods: 20`` (percent of allocatable requested) are used. ``numberOfNodes``
  0; eviction mode lenient (pods without requests are evicted too).
- Interval: the Helm chart's default ``kind: CronJob`` with ``schedule: "*/2 * * * *"``, every
  120 s (``charts/descheduler/values.yaml``; as a Deployment it would be
  ``deschedulingInterval: 5m``).
- Scoring: the README says the strategy must be used with the scheduler's ``MostAllocated``
  scoring (on GKE, the ``optimize-utilization`` profile); the Cluster Autoscaler keeps its
  defaults.
- The plugin (``pkg/framework/plugins/nodeutilization``): a node is underutilized when its
  requests (DaemonSet pods included) are at or below every threshold; the others, unless
  cordoned, are destinations. Nothing happens when no node, or every node, is underutilized,
  or no destination is left. Sources are taken in ascending order of the sum of their requested
  millicores, bytes and pod count; their evictable pods by priority, then QoS class (BestEffort
  first), each evicted while the destinations' summed free CPU, memory and pod slots are all
  still positive, and subtracted from them.
- DefaultEvictor (README table, all false by default): never DaemonSet pods, static/mirror or
  bare pods (no controller), system-critical pods (``kube-system`` Deployments here: GKE's and
  EKS' system pods run with ``system-cluster-critical``), pods with local storage (none here);
  ``nodeFit`` off; no per-node, per-namespace or total eviction limit. Evictions go through the
  eviction API, so one its PodDisruptionBudget forbids is skipped.

Not modelled: the descheduler's own pod (500m / 256Mi in the chart), its other default
plugins, pod age and restarts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tuner.sim.engine import Simulation
from tuner.sim.scheduler import MOST_ALLOCATED
from tuner.sim.state import SimCluster, SimNode, SimPod
from tuner.sim.strategy import Strategy, Tally

INTERVAL = 120.0
THRESHOLDS: Mapping[str, float] = {"cpu": 20.0, "memory": 20.0, "pods": 20.0}
SYSTEM_CRITICAL_NAMESPACE = "kube-system"
CONTROLLED_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "Job"})


def usage(node: SimNode) -> dict[str, float]:
    """Requested share of allocatable, in percent, per resource (DaemonSet pods included)."""
    alloc = node.allocatable
    return {
        "cpu": node.cpu / alloc.cpu * 100,
        "memory": node.memory / alloc.memory * 100,
        "pods": len(node.pods) / node.type.max_pods * 100,
    }


def evictable(pod: SimPod) -> bool:
    """What the DefaultEvictor lets through with its defaults."""
    service = pod.service
    return (
        not pod.daemon
        and service.kind in CONTROLLED_KINDS
        and service.namespace != SYSTEM_CRITICAL_NAMESPACE
    )


def _qos(pod: SimPod) -> int:
    return 0 if pod.service.cpu == 0 and pod.service.memory == 0 else 1


@dataclass(frozen=True, slots=True)
class Pass:
    """The underutilized nodes in the order the plugin visited them, and the pods evicted."""

    sources: tuple[str, ...]
    evicted: tuple[SimPod, ...]


def high_node_utilization(
    cluster: SimCluster,
    now: float,
    evict: Callable[[SimPod], bool],
    thresholds: Mapping[str, float] = THRESHOLDS,
) -> Pass:
    """One ``HighNodeUtilization`` pass over the ready nodes; ``evict(pod)`` asks the eviction
    API and says whether the pod went (its PodDisruptionBudget may refuse)."""
    nodes = [n for n in cluster.nodes.values() if n.ready(now)]
    low = [n for n in nodes if all(usage(n)[r] <= t for r, t in thresholds.items())]
    targets = [n for n in nodes if n not in low and not n.unschedulable]
    if not low or len(low) == len(nodes) or not targets:
        return Pass((), ())
    free = {
        "cpu": sum(n.free().cpu for n in targets),
        "memory": sum(n.free().memory for n in targets),
        "pods": sum(n.type.max_pods - len(n.pods) for n in targets),
    }
    low.sort(key=lambda n: (n.cpu + n.memory + len(n.pods), n.name))
    evicted: list[SimPod] = []
    for node in low:
        pods = sorted((p for p in cluster.pods_on(node) if evictable(p)), key=_qos)
        for pod in pods:
            if any(free[r] <= 0 for r in thresholds):
                break
            if not evict(pod):
                continue
            evicted.append(pod)
            free["cpu"] -= pod.service.cpu
            free["memory"] -= pod.service.memory
            free["pods"] -= 1
    return Pass(tuple(n.name for n in low), tuple(evicted))


class Descheduler(Strategy):
    """``HighNodeUtilization`` every two minutes next to ``MostAllocated`` scoring."""

    name = "descheduler"
    scoring = MOST_ALLOCATED

    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.next_run = -math.inf
        self.decisions: dict[str, int] = {}

    def tally(self) -> Tally:
        """Pods evicted."""
        return Tally(self.decisions)

    def on_tick(self, sim: Simulation) -> None:
        """Run a descheduling pass when one is due."""
        if sim.now < self.next_run:
            return
        self.next_run = sim.now + self.interval
        state = sim.cluster_state

        def evict(pod: SimPod) -> bool:
            allowed = state.disruptions_allowed(pod.service)
            if allowed is not None and allowed < 1:
                return False
            sim.controls.evict(pod)
            sim.controllers.reconcile()  # its ReplicaSet re-creates it at once (pending)
            return True

        done = high_node_utilization(state, sim.now, evict)
        if done.evicted:
            sim.scheduler.schedule(state, sim.now)
            self.decisions["evict"] = self.decisions.get("evict", 0) + len(done.evicted)
