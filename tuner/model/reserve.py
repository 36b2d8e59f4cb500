"""Room held ahead of a forecast rise: placeholder pods that make a pool's autoscaler (or
``execute.node_provision: command``) add nodes before the load arrives, and that the real pods
preempt when they come (the placeholders' priority is the lowest that still triggers a
scale-up, and they never preempt anything themselves).

A :class:`Reserve` is what one forecast asks for; it holds only until the end of that
forecast's horizon (:attr:`Reserve.until`): a placeholder never outlives the forecast that
made it unless a newer forecast asks for it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.model.resources import Resources


@dataclass(frozen=True, slots=True)
class ReservedNode:
    """Room for one node of ``pool``: a placeholder pod with ``requests`` (at most the pool
    template's allocatable) that no node there is now has room for."""

    pool: str
    requests: Resources


@dataclass(frozen=True)
class Reserve:
    """The nodes the forecast made at ``made_at`` asks to hold until ``until``; no nodes: hold
    nothing (remove every placeholder held)."""

    made_at: float
    until: float
    nodes: tuple[ReservedNode, ...] = ()
    reason: str = ""
    """Why (the forecast peak against what the nodes hold), or why nothing is reserved."""
    last: bool = False
    """Nothing is held after it (the daemon stops): no placeholder waits for its node."""


@dataclass(frozen=True, slots=True)
class Placeholder:
    """A reserve's placeholder pod standing in the cluster: its name, the pool it asks a node
    of, the end of the reserve it holds for, and the node it is bound to (None: pending)."""

    name: str
    pool: str
    until: float
    node: str | None


@dataclass(frozen=True)
class ReserveOutcome:
    """What holding a reserve did: the placeholder pods created and removed (each verified),
    how many stand after it, and why it stopped short (None: it did not)."""

    created: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    standing: int = 0
    failed: str | None = None
