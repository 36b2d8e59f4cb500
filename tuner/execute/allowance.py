"""How many of a workload's pods a wave may move at once (:func:`tuner.plan.waves.wave`), read
fresh from the cluster when the wave starts, as Karpenter re-validates a disruption on fresh
state: a Deployment's ``RollingUpdate`` ``maxUnavailable`` of its replicas
(:func:`~tuner.plan.waves.unavailable_allowed`; a ``Recreate`` Deployment or a bare
ReplicaSet: 1), no more than its other pods can stand in for within their requests at the
utilisation its HPA last measured (:func:`~tuner.plan.waves.spare`), and no more than any
PodDisruptionBudget covering its pods allows now
(``status.disruptionsAllowed``, at least 1: a budget that allows none still lets the wave's
first move try, and the Eviction API's refusal (429) is retried as for a lone move).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tuner.errors import InputError
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.model.cluster import Workload
from tuner.monitor.fields import label_selector
from tuner.plan.waves import spare, unavailable_allowed

log = logging.getLogger(__name__)


def allowance(kube: KubePort) -> Callable[[Workload], int]:
    """The allowance of each workload, read once (for one wave); 1 when it cannot be read
    (the workload's pods then move one at a time)."""
    read: dict[Workload, int] = {}

    def of(workload: Workload) -> int:
        if workload not in read:
            try:
                read[workload] = _allowed(kube, workload)
            except ActionFailed as err:
                log.warning("workload %s moves one pod at a time: %s", workload, err)
                read[workload] = 1
        return read[workload]

    return of


def _allowed(kube: KubePort, workload: Workload) -> int:
    if workload.kind != "Deployment":
        return 1
    deployment = kube.deployment(workload.namespace, workload.name)
    if deployment is None:
        return 1
    spec = deployment.spec
    strategy = spec.strategy
    if strategy is not None and strategy.type not in (None, "RollingUpdate"):
        return 1
    rolling = None if strategy is None else strategy.rolling_update
    replicas = 1 if spec.replicas is None else int(spec.replicas)
    allowed = unavailable_allowed(None if rolling is None else rolling.max_unavailable, replicas)
    spared = spare(replicas, kube.hpa_utilisation(workload.namespace, "Deployment", workload.name))
    if spared is not None:
        allowed = min(allowed, max(spared, 1))
    budget = disruptions_allowed(kube, workload.namespace, template_labels(deployment))
    return allowed if budget is None else min(allowed, max(budget, 1))


def template_labels(deployment: Any) -> dict[str, str]:
    """The labels of a Deployment's pods (its template's)."""
    template = deployment.spec.template
    return dict((template.metadata and template.metadata.labels) or {})


def disruptions_allowed(kube: KubePort, namespace: str, labels: dict[str, str]) -> int | None:
    """The fewest disruptions any PodDisruptionBudget over pods with ``labels`` allows now
    (``status.disruptionsAllowed``); None when no budget covers them."""
    allowed: int | None = None
    for budget in kube.disruption_budgets(namespace):
        if _covers(kube, budget, labels):
            status = budget.status
            now = 0 if status is None else int(status.disruptions_allowed or 0)
            allowed = now if allowed is None else min(allowed, now)
    return allowed


def _covers(kube: KubePort, budget: Any, labels: dict[str, str]) -> bool:
    """Whether the budget selects pods with ``labels`` (one it cannot read counts: the
    cautious side)."""
    selector = kube.serialize(budget).get("spec", {}).get("selector")
    if selector is None:
        return False  # policy/v1: an absent selector selects no pod
    try:
        return label_selector(selector).matches(labels)
    except InputError:
        return True
