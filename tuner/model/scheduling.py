"""The fit rules of "does pod P fit on node N", one predicate each, over a pod's constraints.

:func:`static_fit` (rules that do not depend on load), :func:`resource_fit` (CPU, memory, pod
slots against what is free) and :func:`repels` (required anti-affinity) are the only
implementations of the rules: :mod:`tuner.model.snapshot` batches them over all nodes, the
simulator's scheduler and the replay checker call them one node at a time.

Modelled: cordon, taints (NoSchedule/NoExecute) against tolerations, nodeSelector, required
node affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt) and required pod anti-affinity on
``kubernetes.io/hostname``. Not modelled yet: preferred (soft) rules, pod affinity,
topology spread constraints, anti-affinity on other topology keys, volume/zone constraints,
host ports, extended resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from tuner.model.resources import Resources

HOSTNAME_KEY = "kubernetes.io/hostname"

Labels = tuple[tuple[str, str], ...]
"""Labels as sorted (key, value) pairs: hashable, so constraints can key caches."""


def freeze_labels(labels: Mapping[str, str] | None) -> Labels:
    """Labels as a sorted tuple of pairs."""
    return tuple(sorted((labels or {}).items()))


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key operator values`` requirement of a node or label selector."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` satisfy this requirement."""
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                value, bound = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return value > bound if self.operator == "Gt" else value < bound
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A label selector: matchLabels and matchExpressions, all ANDed."""

    match_labels: Labels = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` are selected."""
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.expressions
        )


@dataclass(frozen=True, slots=True)
class AntiAffinityTerm:
    """A required pod anti-affinity term on the hostname topology."""

    selector: LabelSelector
    namespaces: tuple[str, ...]

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """True when a pod with this namespace and labels repels the term's owner."""
        return namespace in self.namespaces and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """True when this toleration tolerates ``taint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class Constraints:
    """Everything about a pod that restricts where it may run (hashable: pods share them)."""

    tolerations: tuple[Toleration, ...] = ()
    node_selector: Labels = ()
    node_affinity: tuple[tuple[Requirement, ...], ...] = ()
    """Required node affinity: terms are ORed, requirements within a term ANDed."""
    anti_affinity: tuple[AntiAffinityTerm, ...] = ()


class NodeTraits(Protocol):
    """The parts of a node that static fit rules read."""

    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def taints(self) -> tuple[Taint, ...]: ...
    @property
    def unschedulable(self) -> bool: ...


def static_fit(constraints: Constraints, node: NodeTraits) -> str | None:
    """Why the pod can never be placed on the node regardless of load, or None if it can."""
    if node.unschedulable:
        return "node is cordoned"
    for taint in node.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in constraints.tolerations
        ):
            return f"taint {taint.key}={taint.value}:{taint.effect} not tolerated"
    for key, value in constraints.node_selector:
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value} not matched"
    if constraints.node_affinity and not any(
        all(r.matches(node.labels) for r in term) for term in constraints.node_affinity
    ):
        return "required node affinity not matched"
    return None


def resource_fit(requests: Resources, free: Resources, free_slots: int) -> str | None:
    """Why ``requests`` do not fit in ``free`` CPU, memory and pod slots now, or None."""
    if requests.cpu > free.cpu:
        return "not enough free CPU"
    if requests.memory > free.memory:
        return "not enough free memory"
    if free_slots < 1:
        return "no free pod slot"
    return None


def repels(constraints: Constraints, namespace: str, labels: Mapping[str, str]) -> bool:
    """True when a pod with ``constraints`` may not share a host with a pod labelled so."""
    return any(term.selects(namespace, labels) for term in constraints.anti_affinity)
