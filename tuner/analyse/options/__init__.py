"""The options the analysis weighs (cf. Karpenter's disruption ``Method``): each is one object
with a name (:class:`Choice`) and one ``propose(context) -> Proposal`` over the cycle's
:class:`~tuner.analyse.context.Context`; a proposal prices its change like every other: the
cost after it, the desired change, why (the prose the user reads) and, when it proposes
nothing, the typed :class:`Refusal` (what metrics and tests read), the disruption it takes and
what it does to the knowledge base. The decision (:mod:`tuner.analyse.decision`) walks them in
order; how an option is shown (log field, Event reason) is the report's
(:mod:`tuner.report.options`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from tuner.analyse.context import Context
from tuner.model.change import DesiredChange
from tuner.model.limits import Budget, pod_evictions


class Choice(StrEnum):
    """The options, by the name the decision reports when it takes one."""

    REMOVE_NODES = "remove_nodes"
    PREVIOUS = "previous_deployment"
    REPLACE_NODES = "replace_nodes"
    STAY = "stay"
    RANDOM = "random_migration"


class Refusal(StrEnum):
    """Why an option proposes nothing; its value is the prose's fixed part."""

    DISABLED = "disabled"
    NO_CANDIDATE = "no node passed the candidate check"
    POOL_AT_MINIMUM = "every candidate's pool is at its minimum size"
    CANDIDATE_DELAY = "no candidate has passed its candidate delay yet"
    NO_ROOM = "the pods fit on no other node"
    THRESHOLDS = "usable utilization would exceed the thresholds"
    FORECAST = "the forecast peak needs the room"
    NEXT_STEP = "an HPA's next step up would wait for a new node"
    BUDGET = "the eviction budget is spent"
    NO_POOL_CAN_GROW = "no node pool can grow"
    NOTHING_DRAINABLE = "no node can be drained"
    NOT_CHEAPER = "no other pool's nodes would cost less than the nodes they replace"
    MERE_REMOVAL = "the pods fit on the other nodes: that is a removal"
    TOO_MANY_ACTIONS = "it takes more actions than execute.max_actions_per_cycle"
    NONE_KNOWN = "no cheaper deployment is known for this load"
    UNATTAINABLE = "the cheaper deployments for this load are unattainable"
    NOT_NOW = "the cheaper deployments touch nodes or workloads that changed during the window"
    NO_MOVE = "no pod can move anywhere"


@dataclass(frozen=True)
class Disruption:
    """What carrying out a change disturbs; a pod that leaves one node for another counts as
    one move, whichever option made it (a relocation, or the removal and addition of one
    workload's pod that the planner pairs into one migration)."""

    pods_moved: int = 0
    pods_added: int = 0
    pods_removed: int = 0
    nodes_drained: int = 0
    nodes_provisioned: int = 0

    @staticmethod
    def of(change: DesiredChange) -> Disruption:
        """The disruption of ``change``."""
        removed = Counter(p.workload for p in change.removals)
        added = Counter(a.workload for a in change.additions)
        paired = sum((removed & added).values())
        return Disruption(
            len(change.relocations) + paired,
            len(change.additions) - paired,
            len(change.removals) - paired,
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

    option: Choice
    cost_after: float
    """Cost per hour after the change; infinite when the option has nothing to propose."""
    change: DesiredChange
    reason: str
    """Why this change, or why none (the prose the user reads)."""
    refusal: Refusal | None = None
    """Why the option proposes nothing (None when it proposes a change)."""
    forget: tuple[Forget, ...] = ()
    """Knowledge-base entries found useless while proposing: deleted whatever is decided."""
    holds: str | None = None
    """The knowledge-base entry this change returns to: when the change is carried out the
    entry is deleted, and it comes back when the next stable window records the deployment."""
    limited: str | None = None
    """Why the eviction budget cut this change or refused it (None: it did neither)."""

    @staticmethod
    def refused(
        option: Choice, refusal: Refusal, reason: str, limited: str | None = None
    ) -> Proposal:
        """The option proposes nothing, for ``refusal`` (told as ``reason``)."""
        return Proposal(option, math.inf, DesiredChange(), reason, refusal, limited=limited)

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
            self.option,
            math.inf,
            DesiredChange(),
            reason,
            Refusal.BUDGET,
            self.forget,
            None,
            refused,
        )


class Option(Protocol):
    """One way to change the deployment (see the module)."""

    name: Choice
    announce: str
    """Put before the proposal's reason when the option is chosen."""

    def propose(self, context: Context) -> Proposal:
        """This option's proposal for the cycle (its refusal when it has none)."""

    def wins_tie(self, mine: Proposal, incumbent: Proposal) -> bool:
        """Whether ``mine`` beats ``incumbent`` (the option ahead so far) at the same cost."""
