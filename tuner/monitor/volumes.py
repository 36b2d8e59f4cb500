"""Volume topology: a pod's PersistentVolumeClaims (its ``persistentVolumeClaim`` volumes, and
the claim ``<pod>-<volume>`` of each generic ephemeral volume) joined to their volumes when the
cluster is assembled. A claim bound to a PersistentVolume with ``nodeAffinity`` or zone/region
labels gives the pod that rule; a claim not bound yet gives none (it is bound where the pod is
first scheduled, or it keeps the pod Pending); a placed pod whose claim, or its volume, is
missing from the input (a dump taken without ``persistentvolumeclaims,persistentvolumes``) is
kept on its node, with one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import NamedTuple

from tuner.errors import InputError
from tuner.model.cluster import Node, Pod
from tuner.model.constraints import HOSTNAME_KEY, NodeSelectorTerms, Requirement, VolumeAffinity
from tuner.monitor.fields import Obj, frozen, listed, metadata, objects, requirements
from tuner.monitor.prune import OBJECT

log = logging.getLogger(__name__)


class Claim(NamedTuple):
    """A PersistentVolumeClaim: the volume it is bound to (``""``: not bound)."""

    namespace: str
    name: str
    volume: str


class Volume(NamedTuple):
    """A PersistentVolume and the nodes that can reach it (no terms: every node)."""

    name: str
    terms: NodeSelectorTerms


class Volumes:
    """The claims and volumes of one assembly, joined to the pods that use them."""

    def __init__(
        self, claims: Iterable[Claim], volumes: Iterable[Volume], nodes: Mapping[str, Node]
    ) -> None:
        self.nodes = nodes
        self.claims = {(c.namespace, c.name): c.volume for c in claims}
        self.volumes = {v.name: v.terms for v in volumes}
        self.unknown: list[str] = []

    def attach(self, pod: Pod, claims: tuple[str, ...]) -> Pod:
        """The pod with the rule of each of its bound volumes that not every node reaches."""
        if not claims:
            return pod
        rules: list[VolumeAffinity] = []
        for claim in claims:
            where = f"{pod.namespace}/{claim}"
            volume = self.claims.get((pod.namespace, claim))
            if volume == "":
                continue  # not bound yet: bound where the pod lands, or it stays Pending
            terms = self.volumes.get(volume) if volume is not None else None
            if terms is None:
                if pod.node is None:
                    continue
                self.unknown.append(where)
                node = self.nodes[pod.node]
                here = (
                    Requirement(HOSTNAME_KEY, "In", (node.labels.get(HOSTNAME_KEY, node.name),)),
                )
                rules.append(VolumeAffinity(f"claim {where} (volume not in the input)", (here,)))
            elif terms:
                rules.append(VolumeAffinity(f"PersistentVolume {volume} (claim {where})", terms))
        if not rules:
            return pod
        constraints = replace(pod.constraints, volumes=tuple(rules))
        return replace(pod, constraints=constraints)

    def warn(self) -> None:
        """One warning for the placed pods whose claims could not be followed."""
        if self.unknown:
            log.warning(
                "%d PersistentVolumeClaim(s) or their volumes are not in the input (e.g. %s): "
                "their pods are kept on their nodes",
                len(self.unknown),
                self.unknown[0],
            )


def pod_claims(obj: Obj) -> tuple[str, ...]:
    """The names of the PersistentVolumeClaims a pod mounts (generic ephemeral volumes' too)."""
    spec = obj.get("spec") or {}
    volumes = spec.get("volumes")
    if not volumes:
        return ()
    _, name = metadata(obj)
    claims = []
    for i, volume in enumerate(listed(volumes, "spec.volumes")):
        if not isinstance(volume, OBJECT):
            raise InputError(f"spec.volumes[{i}] is not an object")
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, OBJECT):
            claim_name = claim.get("claimName")
            if not isinstance(claim_name, str) or not claim_name:
                raise InputError(f"spec.volumes[{i}].persistentVolumeClaim.claimName is not a name")
            claims.append(claim_name)
        elif volume.get("ephemeral") is not None:
            claims.append(f"{name}-{volume.get('name')}")
    return tuple(claims)


def parse_claim(obj: Obj) -> Claim:
    meta, name = metadata(obj)
    volume = (obj.get("spec") or {}).get("volumeName") or ""
    if not isinstance(volume, str):
        raise InputError(f"spec.volumeName is {volume!r}, not a name")
    return Claim(meta.get("namespace", "default"), name, volume)


VOLUME_ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
"""PersistentVolume labels the VolumeZone plugin matches against the node's (values may list
several zones joined by ``__``)."""


def parse_volume(obj: Obj) -> Volume:
    """A PersistentVolume: its required node affinity, ANDed with its zone/region labels."""
    meta, name = metadata(obj)
    affinity = ((obj.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    field = "spec.nodeAffinity.required.nodeSelectorTerms"
    terms = tuple(
        requirements(term.get("matchExpressions"), f"{field}[{i}].matchExpressions")
        for i, term in enumerate(objects(affinity.get("nodeSelectorTerms"), field))
    )
    labels = frozen(meta.get("labels"))
    zoned = tuple(
        Requirement(key, "In", tuple(labels[key].split("__")))
        for key in VOLUME_ZONE_LABELS
        if key in labels
    )
    if zoned:
        terms = tuple((*term, *zoned) for term in terms) if terms else (zoned,)
    return Volume(name, terms)
