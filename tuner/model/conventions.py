"""The tuner's own keys, in one place: every label, annotation, taint, ConfigMap name and
Event field the tuner writes or reads as its own, and the node labels that name a pool.

The tuner's keys live under one DNS prefix (``execute.label_prefix``, default
:data:`DEFAULT_PREFIX`), so every key built from it is a property of :class:`Keys`, made from
the configured prefix; only the defaults are constants. Nothing here does I/O or imports from
the rest of the tuner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

NAME = "deployment-tuner"
"""The tuner's name: its Events' controller, pause ConfigMap, Lease and PriorityClass."""
DEFAULT_PREFIX = "tuner.dev"
"""The default DNS prefix of the tuner's labels, annotations and taint."""
PRICE_ANNOTATION = f"{DEFAULT_PREFIX}/price-per-hour"
"""The default node annotation that holds a node's price per hour (``pricing.price_annotation``
names another; it does not follow ``execute.label_prefix``)."""

POOL_LABEL_BY_SYSTEM: Mapping[str, str] = MappingProxyType(
    {
        "gke": "cloud.google.com/gke-nodepool",
        "eks": "eks.amazonaws.com/nodegroup",
        "karpenter": "karpenter.sh/nodepool",
    }
)
"""The node label naming a node's pool, per system that names it (GKE node pool, EKS managed
node group, Karpenter NodePool)."""
POOL_LABELS = tuple(POOL_LABEL_BY_SYSTEM.values())
"""Labels naming a node's pool, in the order they are read; the instance type is the fallback."""


def workload_label(prefix: str, namespace: str, name: str) -> str:
    """The per-workload node label ``<prefix>/<namespace>.<name>`` (name part <= 63 chars)."""
    part = f"{namespace}.{name}"
    if len(part) > 63:
        digest = hashlib.sha256(part.encode()).hexdigest()[:10]
        part = f"{part[:52].rstrip('.-_')}-{digest}"
    return f"{prefix}/{part}"


@dataclass(frozen=True)
class Keys:
    """The label, annotation and taint keys under one DNS prefix (``execute.label_prefix``)."""

    prefix: str = DEFAULT_PREFIX

    def owns(self, key: str) -> bool:
        """Whether a label, annotation or taint key is under the tuner's prefix."""
        return key.startswith(f"{self.prefix}/")

    @property
    def managed(self) -> str:
        """Label marking an object the tuner has changed."""
        return f"{self.prefix}/managed"

    @property
    def changes(self) -> str:
        """Annotation recording what was changed (JSON)."""
        return f"{self.prefix}/changes"

    @property
    def taint(self) -> str:
        """Key of the tuner's NoSchedule taint on a node pods must not land on while it is
        emptied (its value: since when, in epoch seconds, as the Cluster Autoscaler's
        ``ToBeDeletedByClusterAutoscaler``; Karpenter's own is ``karpenter.sh/disrupted``)."""
        return f"{self.prefix}/draining"

    @property
    def left_for_removal(self) -> str:
        """Annotation on an emptied, cordoned node left for the autoscaler or a provider."""
        return f"{self.prefix}/left-for-removal"

    @property
    def placeholder(self) -> str:
        """Label of a placeholder pod that makes an autoscaler add a node (its value: the pod's
        name); :func:`~tuner.execute.recover.recover` deletes every pod carrying it."""
        return f"{self.prefix}/placeholder"

    @property
    def placeholder_pod_prefix(self) -> str:
        """How the name of every placeholder pod the tuner creates begins (a valid DNS label
        start): what tells its pods apart where only names are seen (kube-state-metrics)."""
        return f"{self.prefix.replace('.', '-')[:20]}-placeholder-"

    @property
    def provisional(self) -> str:
        """Annotation on a placeholder pod: the plan's provisional name of the node it asks for."""
        return f"{self.prefix}/provisional-node"

    @property
    def reserve(self) -> str:
        """Label of a placeholder pod that holds room ahead of a forecast rise (its value: the
        pool it asks a node of); such a pod also carries :attr:`placeholder`."""
        return f"{self.prefix}/reserve"

    @property
    def reserve_until(self) -> str:
        """Annotation on a reserve's placeholder pod: when its reserve ends (ISO 8601, UTC)."""
        return f"{self.prefix}/reserve-until"

    @property
    def onboarded(self) -> str:
        """Annotation on an onboarded Deployment (its template carries the affinity)."""
        return f"{self.prefix}/onboarded"

    @property
    def moved_at(self) -> str:
        """Pod template annotation of a Deployment whose lone pod the tuner moved by restarting
        its rollout (its value: when, ISO 8601, UTC; :mod:`tuner.plan.rollout`)."""
        return f"{self.prefix}/moved-at"

    @property
    def controller(self) -> str:
        """The ``reportingController`` of the tuner's Kubernetes Events."""
        return f"{self.prefix}/{NAME}"

    @property
    def journal(self) -> str:
        """Name of the ConfigMap journaling the transition in flight."""
        return f"{self.prefix.replace('.', '-')}-journal"

    @property
    def evictions(self) -> str:
        """Name of the ConfigMap keeping the evictions of the last day (``limits``)."""
        return f"{self.prefix.replace('.', '-')}-evictions"

    @property
    def paused(self) -> str:
        """Annotation that pauses the tuner, on ``limits.pause_config_map``."""
        return f"{self.prefix}/paused"

    def workload_label(self, namespace: str, name: str) -> str:
        """The per-workload node label ``<prefix>/<namespace>.<name>`` (name part <= 63 chars)."""
        return workload_label(self.prefix, namespace, name)
