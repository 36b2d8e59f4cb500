"""What a simulation records: per-tick measurements and the executed actions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode

if TYPE_CHECKING:
    from tuner.sim.bound import Held


@dataclass(frozen=True, slots=True)
class ActionResult:
    """One executed action: verified when it did what it claims (a migrate's or add's new pod
    Ready off its source and off the nodes the transition empties)."""

    action: Action
    verified: bool
    detail: str = ""
    elsewhere: bool = False
    """A verified migrate or add whose pod the scheduler put on another node than its target
    (its other scores outweighed the label's preferred affinity)."""


@dataclass
class TickSeries:
    """Per-tick measurements (only after the warm-up)."""

    time: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    """Price per hour of every node that exists (billed) at the tick."""
    nodes: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    short: list[int] = field(default_factory=list)
    """Workloads whose CPU demand exceeds the requests of their ready pods."""
    cpu: list[int] = field(default_factory=list)
    memory: list[int] = field(default_factory=list)
    pods: list[int] = field(default_factory=list)
    """Requests and count of the non-DaemonSet pods (for the lower bound)."""
    ruled: list[tuple[int, ...]] = field(default_factory=list)
    """Pods of each service whose hard rules the lower bound counts
    (:func:`tuner.sim.bound.ruled`, in the scenario's order)."""
    evictions: list[int] = field(default_factory=list)
    """Pods evicted during the tick (by any actor; node deletions included)."""
    pinned: list[tuple[Held, ...]] = field(default_factory=list)
    """Per pool (in the scenario's order), what the pods of :attr:`pinned_start` still there
    hold (for the pinned bound, :mod:`tuner.sim.bound`)."""
    pinned_start: tuple[tuple[str, str], ...] = ()
    """(pod, node) of each pinned pod (:func:`tuner.sim.bound.pinned`) bound at the first
    tick."""
    pinned_lost: int = 0
    """Pods of :attr:`pinned_start` gone (evicted, or their node deleted) by the last tick."""


@dataclass
class ActionCounts:
    """Actions a strategy carried out, by kind, and how many failed verification."""

    migrate: int = 0
    add: int = 0
    remove: int = 0
    remove_node: int = 0
    provision_node: int = 0
    failed: int = 0
    landed_elsewhere: int = 0
    """Of the verified migrates and adds, those whose pod landed off its target."""

    def count(self, results: Sequence[ActionResult]) -> None:
        """Add executed actions."""
        for result in results:
            if not result.verified:
                self.failed += 1
                continue
            self.landed_elsewhere += result.elsewhere
            match result.action:
                case Migrate():
                    self.migrate += 1
                case Add():
                    self.add += 1
                case Remove():
                    self.remove += 1
                case RemoveNode():
                    self.remove_node += 1
                case ProvisionNode():
                    self.provision_node += 1

    @property
    def total(self) -> int:
        """Every action executed, verified or not."""
        verified = self.migrate + self.add + self.remove + self.remove_node + self.provision_node
        return verified + self.failed
