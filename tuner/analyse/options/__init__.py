"""The options the analysis weighs, each one module returning the same :class:`Proposal`.

An option names itself with an :class:`Option` (how reports, logs and Events call it) and
proposes a change priced like every other: the cost after it, the desired change, why (or why
not), the disruption it takes and what it does to the knowledge base. The decision
(:mod:`tuner.analyse.decision`) picks among proposals; nothing downstream reads an option's
own types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuner.model.change import DesiredChange
from tuner.model.limits import Budget, pod_evictions


@dataclass(frozen=True)
class Option:
    """How an option is named where it is reported."""

    choice: str
    """The decision's value when this option is chosen (e.g. ``remove_nodes``)."""
    label: str
    """Its name in the cycle log (e.g. ``remove nodes``)."""
    absent: str
    """What the cycle log says when it has nothing to propose (e.g. ``impossible``)."""
    field: str
    """The structured-log field of its cost (e.g. ``cost_removal``)."""
    event: str
    """The reason of a cycle's Kubernetes Event when the cycle carried it out."""
    announce: str = ""
    """Put before the proposal's reason when the option is chosen."""


@dataclass(frozen=True)
class Disruption:
    """What carrying out a change disturbs."""

    pods_moved: int = 0
    pods_added: int = 0
    pods_removed: int = 0
    nodes_drained: int = 0
    nodes_provisioned: int = 0

    @staticmethod
    def of(change: DesiredChange) -> Disruption:
        """The disruption of ``change``."""
        return Disruption(
            len(change.relocations),
            len(change.additions),
            len(change.removals),
            len(change.remove_nodes),
            len(change.new_nodes),
        )

    @property
    def rank(self) -> tuple[int, int]:
        """Less is less disruptive: nodes drained or provisioned, then pods touched."""
        return (
            self.nodes_drained + self.nodes_provisioned,
            self.pods_moved + self.pods_added + self.pods_removed,
        )


@dataclass(frozen=True)
class Forget:
    """A knowledge-base entry to delete whatever is decided (never in a dry run)."""

    entry: str
    kind: str
    """Why in one word, e.g. ``unattainable``."""
    reason: str


@dataclass(frozen=True)
class Proposal:
    """One option's answer for this window."""

    option: Option
    cost_after: float
    """Cost per hour after the change; infinite when the option has nothing to propose."""
    change: DesiredChange
    reason: str
    """Why this change, or why none."""
    forget: tuple[Forget, ...] = ()
    """Knowledge-base entries found useless while proposing: deleted whatever is decided."""
    holds: str | None = None
    """The knowledge-base entry this change returns to: when the change is carried out the
    entry is deleted, and it comes back when the next stable window records the deployment."""
    limited: str | None = None
    """Why the eviction budget cut this change or refused it (None: it did neither)."""

    @property
    def possible(self) -> bool:
        """Whether the option proposes anything."""
        return not math.isinf(self.cost_after)

    @property
    def disruption(self) -> Disruption:
        """What carrying the change out disturbs."""
        return Disruption.of(self.change)

    def within(self, budget: Budget | None) -> Proposal:
        """This proposal, or, when its change would evict more than ``budget`` leaves, the
        option refused (nothing proposed) with the limit as the reason."""
        if budget is None or not self.possible:
            return self
        change = self.change
        leaving = [*(r.pod for r in change.relocations), *change.removals]
        refused = budget.refusal(pod_evictions(leaving))
        if refused is None:
            return self
        reason = f"{self.reason}, but {refused}"
        return Proposal(
            self.option, math.inf, DesiredChange(), reason, self.forget, limited=refused
        )
