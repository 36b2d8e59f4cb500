"""Onboarding in domain terms: can the executor steer a workload's new pods to a node?

An onboarded workload's pod template prefers (preferred node affinity) nodes carrying its own
label, ``<prefix>/<namespace>.<name>``: the executor steers a new pod by labelling the
destination. Any other workload is moved by eviction alone and the scheduler picks the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from tuner.model.cluster import Cluster, Workload
from tuner.model.conventions import workload_label

PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


class Placement(StrEnum):
    """How a migrated or added pod reaches its destination."""

    LABEL = "node label"
    """Onboarded: the destination is labelled and the new pod prefers it."""
    EVICTION_ONLY = "not controlled (not onboarded): lands where the scheduler puts it"
    """Not onboarded: the pod is evicted and the scheduler alone picks the node (the executor
    verifies only that it is not its source or a node being emptied)."""


def preferred_labels(affinity: Mapping[str, Any] | None) -> frozenset[str]:
    """The node label keys the preferred node affinity terms of an ``affinity`` (API JSON
    form) select on."""
    terms = ((affinity or {}).get("nodeAffinity") or {}).get(PREFERRED) or ()
    return frozenset(
        expression.get("key", "")
        for term in terms
        for expression in (term.get("preference") or {}).get("matchExpressions") or ()
    )


def placement(cluster: Cluster, workload: Workload, prefix: str) -> Placement | None:
    """How the executor would place a new pod of ``workload``; None when the cluster source
    holds no pod template for it."""
    labels = cluster.preferred_labels.get(workload)
    if labels is None:
        return None
    label = workload_label(prefix, workload.namespace, workload.name)
    return Placement.LABEL if label in labels else Placement.EVICTION_ONLY
