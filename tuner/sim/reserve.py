"""The simulator's :class:`~tuner.cycle.ReserveKeeper`: the room a forecast rise asks for, held
as placeholder pods in the simulated cluster, the way the daemon's keeper
(:mod:`tuner.execute.reserve`) holds it through the Kubernetes API.

Each :class:`~tuner.model.reserve.ReservedNode` is one placeholder pod (the one
:meth:`~tuner.sim.controls.ClusterControls.create_placeholder` makes for a provision, priority
-10 and ``preemptionPolicy: Never``) with the node's requests, capped to the pool template's
allocatable, the pool's node selector, tolerations of its template's taints and, as the
daemon's, a required affinity that keeps it off every node there is when it is made: only a
new node (the Cluster Autoscaler's, or Karpenter's) takes it. Being nobody's workload, it never
counts as pending (neither in the recorded pending pod-seconds nor in the window's "nothing
pending" rule); a real pod that fits nowhere else preempts it (:mod:`tuner.sim.scheduler`),
and it is gone at once.

Each :meth:`SimReserveKeeper.hold`, as the daemon's:

1. finds the placeholders it made that are gone without it removing them: preempted by the
   real pods (what they were for); none is made again for as long as the reserve that made it
   holds (:func:`~tuner.plan.reserve.still_wanted`);
2. per pool, keeps as many standing placeholders as the reserve asks nodes of that pool,
   whatever their requests (:func:`~tuner.plan.reserve.matched`), their end extended to the
   reserve's; removes the others, those of an ended reserve included;
3. creates the missing ones, never more than ``forecast.reserve_max_nodes`` standing, and stops
   at the first that cannot be made;
4. releases at once each node a removed placeholder was bound to that no real pod took
   (:func:`~tuner.plan.reserve.releases`), with ``execute.node_removal: command`` or
   ``delete-node``: cordoned, and removed as a drained node is
   (:meth:`~tuner.sim.controls.ClusterControls.drain_node`); else the Cluster Autoscaler
   removes it after its unneeded time. One still pending waits for the node it asked for
   (:func:`~tuner.plan.reserve.awaits_its_node`) and is released with it at a later hold.

Nothing removes a placeholder between two holds, as in the daemon: a cycle runs at least every
``windows.retry_s`` while reserving is on, and each reserve ends after the next cycle.
Each creation, deletion and release is checked against the simulated cluster (the pod exists,
is gone; the node is empty but for DaemonSet pods before it goes, gone or unregistered after).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tuner.model.pools import Pools, discover
from tuner.model.reserve import Placeholder, Reserve, ReservedNode, ReserveOutcome
from tuner.model.resources import Resources
from tuner.plan.reserve import awaits_its_node, matched, releases, still_wanted
from tuner.sim.executor import placeholder_constraints
from tuner.sim.state import SimPod

if TYPE_CHECKING:
    from tuner.settings import Settings
    from tuner.sim.engine import Simulation


class SimReserveKeeper:
    """Holds reserves as placeholder pods in one simulation."""

    def __init__(self, sim: Simulation, settings: Settings, removal: str | None = None) -> None:
        self.sim = sim
        self.settings = settings
        self.removal = removal or settings.execute.node_removal
        """How a released node goes (``drain_node``'s mode; ``execute.node_removal`` unless
        the strategy maps it, as Karpenter's tuner does)."""
        self.released: list[str] = []
        """The nodes released (no real pod took them), in order."""
        self.made: dict[str, float] = {}
        """When each standing placeholder was made."""
        self.standing: dict[str, Placeholder] = {}
        """The placeholders standing after the last hold, by name."""
        self._pods: dict[str, SimPod] = {}
        self.taken: list[Placeholder] = []
        """Placeholders preempted while their reserve held (not made again until it ends)."""
        self.created = 0
        """Placeholders created so far."""
        self.preempted = 0
        """Placeholders found gone that the keeper had not deleted (preempted)."""

    def hold(self, reserve: Reserve, now: float) -> ReserveOutcome:
        """Make the placeholders standing match ``reserve`` (see the module)."""
        standing = self._read_standing(now)
        keep, drop, missing = matched(still_wanted(reserve, self.taken, now), standing)
        removed = self._drop([h for h in drop if reserve.last or not self._awaits(h, now)])
        for held in keep:
            if held.until < reserve.until:
                self.standing[held.name] = replace(held, until=reserve.until)
        cap = self.settings.forecast.reserve_max_nodes
        created: list[str] = []
        failed = None
        pools: Pools | None = None
        for node in missing[: max(cap - len(self.standing), 0)]:
            pools = pools or discover(self.sim.cluster(), self.settings)
            name, failed = self._create(node, pools, reserve.until)
            if name is None:
                break
            created.append(name)
        return ReserveOutcome(tuple(created), tuple(removed), len(self.standing), failed)

    def _read_standing(self, now: float) -> list[Placeholder]:
        """The placeholders standing now; those of the last hold that are gone were preempted."""
        pods = self.sim.cluster_state.pods
        for name, pod in list(self._pods.items()):
            if pods.get(pod.uid) is not pod:
                self.taken.append(self.standing.pop(name))
                del self._pods[name]
                self.made.pop(name, None)
                self.preempted += 1
        self.taken = [h for h in self.taken if h.until > now]
        self.standing = {
            name: Placeholder(name, held.pool, held.until, self._pods[name].node)
            for name, held in self.standing.items()
        }
        return list(self.standing.values())

    def _create(
        self, node: ReservedNode, pools: Pools, until: float
    ) -> tuple[str | None, str | None]:
        """A placeholder for ``node``, verified to exist: its name; else None and why not."""
        pool = pools.by_name.get(node.pool)
        if pool is None:
            return None, f"pool {node.pool} is unknown"
        if not pool.selector:
            return None, f"pool {node.pool} has no node selector: a placeholder could grow any pool"
        room, requests = pool.template.allocatable, node.requests
        capped = Resources(min(requests.cpu, room.cpu), min(requests.memory, room.memory))
        existing = tuple(sorted(self.sim.cluster_state.nodes))
        pod = self.sim.controls.create_placeholder(
            capped, placeholder_constraints(pool, avoid=existing)
        )
        self.created += 1
        if self.sim.cluster_state.pods.get(pod.uid) is not pod:
            return None, f"placeholder {pod.name} was not created"
        self._pods[pod.name] = pod
        self.made[pod.name] = self.sim.now
        self.standing[pod.name] = Placeholder(pod.name, pool.name, until, pod.node)
        return pod.name, None

    def _awaits(self, held: Placeholder, now: float) -> bool:
        """Whether the placeholder waits for its node (:func:`~tuner.plan.reserve.
        awaits_its_node`)."""
        made = self.made.get(held.name)
        return awaits_its_node(held, made, now, self.settings, self.removal)

    def _drop(self, drop: list[Placeholder]) -> list[str]:
        """Delete the placeholders no reserve asks for any more; release the nodes they held
        that no real pod took (see the module). Their names."""
        bound = [held for held in drop if held.node is not None]
        verdicts: dict[str, str | None] = {}
        if bound and self.removal != "autoscaler":
            cluster = self.sim.cluster()
            pools = discover(cluster, self.settings)
            verdicts = releases(drop, cluster, pools, self.settings, self.removal)
        removed = [self._delete(held) for held in drop]
        for node, refusal in verdicts.items():
            if refusal is None:
                self._release(node)
        return removed

    def _release(self, name: str) -> None:
        """Cordon the node and, verified empty but for DaemonSet pods, remove it as a drained
        node is (else give it back: a pod took it); verified gone or unregistered."""
        state = self.sim.cluster_state
        node = state.nodes[name]
        node.unschedulable = True
        if any(not p.daemon for p in state.pods_on(node)):
            node.unschedulable = False
            return
        self.sim.controls.drain_node(name, self.removal)
        after = state.nodes.get(name)
        if after is None or not after.registered:
            self.released.append(name)

    def _delete(self, held: Placeholder) -> str:
        """Delete a standing placeholder; its name."""
        self.sim.controls.delete_pod(self._pods.pop(held.name))
        self.made.pop(held.name, None)
        del self.standing[held.name]
        return held.name
