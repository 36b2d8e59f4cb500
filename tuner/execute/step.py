"""An action that passed its checks (:class:`Step`), and how it went once applied
(:class:`Done`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tuner.execute.events import Sink
from tuner.execute.port import KubePort


@dataclass(frozen=True)
class Done:
    """A verified action: what it did, as the log and its Event say it."""

    note: str
    landed: str | None = None
    """The node the new pod of a migrate or add really landed on."""
    steered: bool = True
    """False for a migrate or add of a workload that is not onboarded: the scheduler chose the
    node (:attr:`~tuner.model.onboarding.Placement.EVICTION_ONLY`)."""
    elsewhere: bool = False
    """A migrate or add of an onboarded workload whose new pod the scheduler put on another
    node than the labelled destination (its other scores outweighed the label, a preferred
    affinity): verified off the source and the nodes being emptied, reported as landed
    elsewhere."""
    reason: str | None = None
    """The Event's reason when it is not the action's usual one (a node left for the
    autoscaler: ``LeftForAutoscaler``, not ``NodeRemoved``)."""


@dataclass(frozen=True)
class Gone:
    """An action whose object is already gone, which leaves it nothing to do: a node to remove
    (a provider command deleted it), a pod to move (its HPA scaled the workload in since the
    plan, e.g. while a provision waited for its node: the room it held only makes the plan's
    later actions fit the more, and failing would stop a replace with its new node obtained and
    its pods half moved)."""

    what: str
    """The object, as ``node <name>`` or ``pod <namespace>/<name>``."""

    def would(self) -> str:
        """Nothing to do."""
        return f"{self.what} is already gone"

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Nothing to do."""
        return Done(self.would())


class Step(Protocol):
    """An action that passed its checks, with what they read."""

    def would(self) -> str:
        """What applying it would do (a dry run's account)."""

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Carry it out, verified, recording the Events of what it does on the way (each pod
        a drain evicts); how it went, or :class:`~tuner.execute.retry.ActionFailed`."""
