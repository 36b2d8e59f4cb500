"""Which of a plan's migrations may move at once: a **wave**.

An executor that waits for each replacement to be Ready before the next eviction keeps the nodes
it empties billed for a pod start-up per pod. ``kubectl drain`` and Karpenter evict a node's pods
all at once, held back only by their PodDisruptionBudgets. A wave sits between the two: the
consecutive migrations from a point of the plan that start together, evicted one after the other
and then awaited together, with

- at most the workload's *allowance* of its pods in one wave: as many as its own rollout may
  take out of service at once (a Deployment's ``maxUnavailable``, 25 % of its replicas rounded
  down by default, as the Deployment controller resolves it; :func:`unavailable_allowed`), no
  more than its PodDisruptionBudget allows, no more than its other pods can stand in for
  within their requests at the utilisation its HPA last measured (:func:`spare`), and at least
  one (a lone move is what the executor did before);
- no member moving onto a node another member leaves, nor off a node another member moves onto:
  a wave only adds pods to its destinations, so every destination holds its members exactly as
  the plan's order, which checked each fit in turn, holds them;
- at most ``limit`` members (``execute.max_moves_at_once``; 1: one move at a time).

Any other action (an add, a remove, a node's removal or provision) is a wave of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tuner.model.cluster import Workload
from tuner.plan.actions import Action, Migrate, provisional
from tuner.plan.rollout import resolved


def unavailable_allowed(max_unavailable: int | str | None, replicas: int) -> int:
    """Pods of a workload of ``replicas`` that its rollout takes out of service at once: an
    absolute ``maxUnavailable``, or a percentage of the replicas rounded down (the Deployment
    controller's rounding for it, :func:`~tuner.plan.rollout.resolved`); None is the default,
    25 %. At least one."""
    allowed = resolved(max_unavailable, replicas, up=False)
    return 1 if allowed is None else max(allowed, 1)


def spare(replicas: int, utilisation: float | None) -> int | None:
    """Pods of a workload of ``replicas`` that may be out of service while the others serve
    its demand within their requests: at ``utilisation`` (its HPA's last measured average, a
    share of the pods' CPU requests) the demand is ``replicas * utilisation`` pods' requests.
    None when nothing was measured (no HPA, or none yet)."""
    if utilisation is None:
        return None
    return math.floor(replicas * (1 - utilisation) + 1e-9)


def wave(actions: Sequence[Action], allowance: Callable[[Workload], int], limit: int) -> int:
    """How many of ``actions``, from the first, move together (at least one when there is an
    action): consecutive migrations onto nodes that exist (no provisional name left), within
    ``limit`` and each workload's ``allowance``, none onto a node another leaves or off a node
    another moves onto."""
    if not actions:
        return 0
    taken: dict[Workload, int] = {}
    sources: set[str] = set()
    targets: set[str] = set()
    size = 0
    for action in actions[:limit]:
        if not isinstance(action, Migrate) or provisional(action.target):
            break
        workload, source, target = action.pod.workload, action.source, action.target
        count = taken.get(workload, 0)
        if count and count >= allowance(workload):  # asked only past one: it is at least one
            break
        if target in sources or target == source or source in targets:
            break
        taken[workload] = count + 1
        sources.add(source)
        targets.add(target)
        size += 1
    return max(size, 1)
