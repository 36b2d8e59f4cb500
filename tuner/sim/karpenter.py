"""Karpenter in place of the Cluster Autoscaler: provisioning and consolidation.

Defaults read from ``kubernetes-sigs/karpenter`` (numbers and rules only):

- Batching (``pkg/operator/options/options.go``): a provisioning batch closes once no new pod
  has been pending for ``BATCH_IDLE_DURATION`` (1 s), or ``BATCH_MAX_DURATION`` (10 s) after it
  opened. With the simulator's 5 s tick this launches on the tick after the pods appeared.
- Provisioning: pods that fit on no node are packed first onto the room of nodes still starting
  (minus their DaemonSet pods), then first-fit decreasing onto new node claims; a claim keeps
  every offered instance type its pods still fit on (DaemonSet overhead included) and is launched
  as the cheapest of them. Offered types are the scenario's pools'; a pool's maximum caps its
  nodes. A node is ready after the same provisioning delay as the Cluster Autoscaler model's.
- Disruption controller (``pkg/controllers/disruption``): polled every 10 s
  (``controller.go`` ``pollingPeriod``); a command is re-validated 15 s after it is computed
  (``consolidation.go`` ``commandValidationDelay``) and dropped if no longer valid. A pass that
  found nothing is not repeated until the cluster changes, or for 5 minutes
  (``consolidation.go`` ``IsConsolidated``, ``state/cluster.go`` ``ConsolidationState``).
- NodePool defaults (``pkg/apis/v1/nodepool.go``): ``consolidationPolicy:
  WhenEmptyOrUnderutilized``, ``consolidateAfter: 0s`` (a node is a candidate once its pods
  have not changed for that long), one budget of ``nodes: 10%``, rounded up, minus the nodes
  already being disrupted (``helpers.go`` ``BuildDisruptionBudgetMapping``: initialized nodes
  only).
  A scenario's ``karpenter`` may set ``consolidationPolicy: WhenEmpty`` (only the emptiness
  method runs: ``consolidation.go`` ``ShouldDisrupt`` refuses a WhenEmpty pool's non-empty
  node) and ``consolidateAfter`` (measured from the node's last pod change,
  ``IsUnderConsolidateAfter``: for an empty node, how long it has been empty).
- Methods, in Karpenter's order, one command per poll: *emptiness* (delete candidates without
  reschedulable pods, up to the budget); *multi-node* consolidation (candidates sorted by savings
  ratio, price over 1 + pod eviction costs, at most 100; the largest prefix of two or more, found
  by binary search, whose pods fit on the other nodes plus at most one new node cheaper than
  them all and, if its type is one of theirs, cheaper than that type
  (``multinodeconsolidation.go``): delete or replace); *single-node* consolidation (the first
  candidate, in the same order, whose pods fit on the other nodes, or on them plus one new node
  cheaper than it).
  Pending pods take their room on the other nodes first; if one fits on no ready node
  (it waits for a starting node, or for one yet to be launched) nothing is consolidated
  (``helpers.go``: no decision on uninitialized nodes). A replaced node is cordoned, its
  replacement launched, and it is deleted (its pods evicted) once the replacement is ready.
- Pods it will not disrupt: a node with a pod whose PodDisruptionBudget allows no disruption now
  is no candidate (nor would be one with a ``karpenter.sh/do-not-disrupt`` pod, but no simulated
  workload carries that annotation). DaemonSet pods go with their node.

- Scheduling rules: Karpenter simulates with kube-scheduler's filters, so a pod's rules that
  count other pods (topology spread, pod affinity and anti-affinity) hold wherever it places
  one: on a ready node through the census (which follows the simulated moves), on a starting
  node or a new claim's offering (its pool's zone) as a new, empty node of the census, each pod
  checked alone rather than against the others packed beside it.

Not modelled: spot capacity and spot-to-spot consolidation, drift and expiry, NodePool resource
limits (a pool's node maximum stands in), Karpenter's own topology domain choice beyond that
check, the 3-minute single-node timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.sim.karpenter_disruption import POLL, DisruptionController
from tuner.sim.karpenter_packing import Room, first_fit, pack_claims
from tuner.sim.state import SimCluster, SimPod

BATCH_IDLE = 1.0
BATCH_MAX = 10.0


@dataclass
class Karpenter(DisruptionController):
    """Karpenter's provisioner and disruption controller over the simulated cluster."""

    batch_start: float | None = None

    # -- the autoscaler interface --------------------------------------------------------------

    def step(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> list[SimPod]:
        """Provision for pending pods, finish replacements, consolidate when a poll is due."""
        self._track_changes(cluster, now)
        evicted = self._finish_replacements(cluster, now)
        self._provision(cluster, unschedulable, now)
        if now >= self.next_poll and not evicted:  # evicted pods are rescheduled first
            self.next_poll = now + POLL
            evicted += self._disrupt(cluster, unschedulable, now)
        return evicted

    # -- provisioning --------------------------------------------------------------------------

    def _starting_rooms(self, cluster: SimCluster, now: float) -> list[Room]:
        overhead = self.overhead
        return [
            Room(
                n.type.allocatable.cpu - overhead.cpu - n.cpu,
                n.type.allocatable.memory - overhead.memory - n.memory,
                n.type.max_pods - len(self.daemonsets) - len(n.pods),
                n.name,
                n,
            )
            for n in sorted(cluster.nodes.values(), key=lambda n: n.name)
            if n.registered and not n.ready(now)
        ]

    def _provision(self, cluster: SimCluster, pending: list[SimPod], now: float) -> None:
        if not pending:
            self.batch_start = None
            return
        census = cluster.census(now)
        waiting = first_fit(pending, self._starting_rooms(cluster, now), census)
        if not waiting:
            self.batch_start = None
            return
        if self.batch_start is None:
            self.batch_start = now
        newest = max(p.created for p in waiting)
        if now - newest < BATCH_IDLE and now - self.batch_start < BATCH_MAX:
            return
        self.batch_start = None
        if all(cluster.pool_size(o.pool) >= o.max_nodes for o in self.offerings):
            return  # no claim could launch: pending pods on full pools cost no packing
        claims, _ = pack_claims(
            waiting, self.offerings, self.overhead, len(self.daemonsets), census, self.pool_label
        )
        for claim in claims:
            self._launch(cluster, claim.offerings, now)
