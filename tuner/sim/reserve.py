"""The simulator's :class:`~tuner.cycle.ReserveKeeper`: the room a forecast rise asks for, held
as placeholder pods in the simulated cluster.

Each :class:`~tuner.model.reserve.ReservedNode` is one placeholder pod (the one
:meth:`~tuner.sim.controls.ClusterControls.create_placeholder` makes for a provision, priority
-10 and ``preemptionPolicy: Never``) with the node's requests, capped to the pool template's
allocatable, the pool's node selector and tolerations of its template's taints, and no other
rule: it lands on a node of the pool with that much room, else the Cluster Autoscaler (or
Karpenter) adds one for it. Being nobody's workload, it never counts as pending (neither in the
recorded pending pod-seconds nor in the window's "nothing pending" rule); a real pod that fits
nowhere else preempts it (:mod:`tuner.sim.scheduler`), and it is gone at once.

Holding a reserve makes the placeholders match it, per (pool, requests):

- one standing already is kept (the reserve that keeps it is the one it now holds for);
- one missing is created, unless this very reserve (the forecast made at
  :attr:`~tuner.model.reserve.Reserve.made_at`) already had it and lost it to preemption: the
  real pods it held the room for have taken it, and a newer forecast must ask again;
- one the reserve no longer asks for is deleted, and so is every one at the reserve's
  :attr:`~tuner.model.reserve.Reserve.until` (a timed event of the simulation, so a
  placeholder never outlives the forecast that made it, whenever the next cycle runs).

Each creation and deletion is checked against the simulated cluster (the pod exists, is gone).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tuner.model.pools import Pools, discover
from tuner.model.reserve import Reserve, ReserveOutcome
from tuner.model.resources import Resources
from tuner.sim.executor import placeholder_constraints
from tuner.sim.state import SimPod

if TYPE_CHECKING:
    from tuner.settings import Settings
    from tuner.sim.engine import Simulation

Slot = tuple[str, Resources]
"""(pool, requests): placeholders of one slot are interchangeable."""


@dataclass
class _Held:
    """The reserve the keeper holds for now and the placeholders it made for it."""

    made_at: float = float("nan")
    until: float = float("nan")
    pods: dict[Slot, list[SimPod]] = field(default_factory=lambda: defaultdict(list))
    """Standing placeholders per slot, oldest first."""
    lost: dict[Slot, int] = field(default_factory=lambda: defaultdict(int))
    """Placeholders of this reserve preempted (or deleted by others) per slot."""
    expires_at: float = float("nan")
    """When its end is scheduled (NaN: not yet)."""


class SimReserveKeeper:
    """Holds reserves as placeholder pods in one simulation."""

    def __init__(self, sim: Simulation, settings: Settings) -> None:
        self.sim = sim
        self.settings = settings
        self._held = _Held()
        self.created = 0
        """Placeholders created so far."""
        self.preempted = 0
        """Placeholders found gone that the keeper had not deleted (preempted)."""

    @property
    def standing(self) -> tuple[SimPod, ...]:
        """The placeholders held now (not preempted), by slot then age."""
        held, pods = self._held.pods, self.sim.cluster_state.pods
        return tuple(
            p for slot in sorted(held, key=_order) for p in held[slot] if pods.get(p.uid) is p
        )

    def hold(self, reserve: Reserve, now: float) -> ReserveOutcome:
        """Make the placeholders match ``reserve`` (nothing once its ``until`` passed)."""
        held = self._account()
        if reserve.made_at != held.made_at:
            kept = held.pods
            held = self._held = _Held(reserve.made_at, reserve.until, kept)
        held.until = reserve.until
        wanted: defaultdict[Slot, int] = defaultdict(int)
        if now < reserve.until:
            for node in reserve.nodes:
                wanted[node.pool, node.requests] += 1
        pools: Pools | None = None
        created: list[str] = []
        removed: list[str] = []
        failed: list[str] = []
        for slot in sorted(set(held.pods) | set(wanted), key=_order):
            pods = held.pods[slot]
            room = max(wanted[slot] - held.lost[slot], 0)
            while len(pods) > room:
                removed.append(self._delete(pods.pop()))
            while len(pods) < room:
                pools = pools or discover(self.sim.cluster(), self.settings)
                pod, why = self._create(slot, pools)
                if pod is None:
                    failed.append(why)
                    break
                pods.append(pod)
                created.append(pod.name)
        held.pods = defaultdict(list, {s: p for s, p in held.pods.items() if p})
        if held.pods and held.expires_at != held.until:
            held.expires_at = held.until
            made_at = held.made_at
            self.sim.clock.schedule(reserve.until, lambda: self._expire(made_at))
        return ReserveOutcome(
            created=tuple(created),
            removed=tuple(removed),
            standing=len(self.standing),
            failed="; ".join(failed) or None,
        )

    def _account(self) -> _Held:
        """Forget the placeholders someone else deleted (preemption), counting them lost."""
        held, pods = self._held, self.sim.cluster_state.pods
        for slot, standing in held.pods.items():
            alive = [p for p in standing if pods.get(p.uid) is p]
            held.lost[slot] += len(standing) - len(alive)
            self.preempted += len(standing) - len(alive)
            standing[:] = alive
        return held

    def _create(self, slot: Slot, pools: Pools) -> tuple[SimPod | None, str]:
        """A placeholder for ``slot``, verified to exist; else why not."""
        name, requests = slot
        pool = pools.by_name.get(name)
        if pool is None:
            return None, f"pool {name} is unknown"
        if not pool.selector:
            return None, f"pool {name} has no node selector: a placeholder could grow any pool"
        room = pool.template.allocatable
        capped = Resources(min(requests.cpu, room.cpu), min(requests.memory, room.memory))
        pod = self.sim.controls.create_placeholder(capped, placeholder_constraints(pool))
        self.created += 1
        if self.sim.cluster_state.pods.get(pod.uid) is not pod:
            return None, f"placeholder {pod.name} was not created"
        return pod, ""

    def _delete(self, pod: SimPod) -> str:
        """Delete a standing placeholder; its name."""
        self.sim.controls.delete_pod(pod)
        return pod.name

    def _expire(self, made_at: float) -> None:
        """The reserve made at ``made_at`` ends: delete its placeholders (if it still holds)."""
        held = self._account()
        if held.made_at != made_at or self.sim.now < held.until:
            return
        for standing in held.pods.values():
            while standing:
                self._delete(standing.pop())
        held.pods.clear()


def _order(slot: Slot) -> tuple[str, int, int]:
    name, requests = slot
    return name, requests.cpu, requests.memory
