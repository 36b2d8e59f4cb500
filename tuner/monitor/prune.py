"""API objects cut down to the fields :mod:`tuner.monitor.dump`'s parsers read.

A live Pod or Node is mostly ``managedFields``, status conditions, container statuses and
images, none of which the domain model uses. Pruning right after decoding keeps the cache (and
a one-shot live read) small; a pruned object parses to the same domain value as the full one.
A field of an unexpected type is kept as it is, so that the parser, not the pruning, reports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Obj = dict[str, Any]
Pruner = Callable[[Mapping[str, Any]], Obj]

OBJECT = (dict, Mapping)
"""For ``isinstance``: any mapping, ``dict`` tested first. Decoded JSON objects are dicts, and
the ABC check of ``Mapping`` alone cost ~1 s over a 1,000-node dump's half-million tests."""

_META = ("name", "namespace", "uid", "deletionTimestamp", "ownerReferences")
"""Metadata every kind keeps (labels and annotations are kept where a parser reads them). Not
the resourceVersion: an update that changes nothing the parsers read leaves an equal object."""

_CONTAINER = ("resources", "restartPolicy")
_POD_SPEC = (
    "nodeName",
    "overhead",
    "affinity",
    "tolerations",
    "nodeSelector",
    "topologySpreadConstraints",
)


Part = Callable[[Any], Any]
"""Prunes the value of one top-level field (``spec`` or ``status``)."""


def _pick(value: Any, keys: tuple[str, ...]) -> Any:
    """``value`` with only ``keys``, or ``value`` itself when it is not an object."""
    if not isinstance(value, OBJECT):
        return value
    return {key: value[key] for key in keys if key in value}


def _keys(*keys: str) -> Part:
    return lambda value: _pick(value, keys)


def _container(container: Any) -> Any:
    """Requests, restart policy and the host ports (a port without one is dropped)."""
    out = _pick(container, _CONTAINER)
    ports = container.get("ports") if isinstance(container, OBJECT) else None
    if isinstance(ports, list):
        ports = [p for p in ports if not isinstance(p, OBJECT) or p.get("hostPort")]
    if ports:
        out["ports"] = ports
    return out


def _volume(volume: Any) -> Any:
    """A volume that is a claim (or makes one), else nothing."""
    if not isinstance(volume, OBJECT):
        return volume
    if "persistentVolumeClaim" in volume:
        return _pick(volume, ("name", "persistentVolumeClaim"))
    if volume.get("ephemeral") is not None:
        return {"name": volume.get("name"), "ephemeral": {}}
    return None


def _pod_spec(spec: Any) -> Any:
    if not isinstance(spec, OBJECT):
        return spec
    out = _pick(spec, _POD_SPEC)
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if containers is not None:
            out[key] = (
                [_container(c) for c in containers] if isinstance(containers, list) else containers
            )
    volumes = spec.get("volumes")
    if isinstance(volumes, list):
        volumes = [v for v in map(_volume, volumes) if v is not None]
    if volumes:
        out["volumes"] = volumes
    return out


def _pod_status(status: Any) -> Any:
    """The phase and the Ready condition."""
    if not isinstance(status, OBJECT):
        return status
    out = _pick(status, ("phase",))
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        conditions = [
            _pick(c, ("type", "status"))
            for c in conditions
            if not isinstance(c, OBJECT) or c.get("type") == "Ready"
        ]
    if conditions is not None:
        out["conditions"] = conditions
    return out


def _template_spec(spec: Any) -> Any:
    """Only the pod template's affinity (its preferred node labels)."""
    if not isinstance(spec, OBJECT):
        return spec
    template = spec.get("template")
    if isinstance(template, OBJECT):
        template = {"spec": _pick(template.get("spec"), ("affinity",))}
    return {} if template is None else {"template": template}


def _shape(*, labels: bool, spec: Part | None = None, status: Part | None = None) -> Pruner:
    """A pruner keeping the metadata (with labels and annotations if ``labels``) and what
    ``spec`` and ``status`` keep of those fields (nothing when None)."""
    meta_keys = (*_META, "labels", "annotations") if labels else _META

    def prune(obj: Mapping[str, Any]) -> Obj:
        out: Obj = {}
        for key, part in (("metadata", _keys(*meta_keys)), ("spec", spec), ("status", status)):
            value = part(obj.get(key)) if part is not None else None
            if value is not None:
                out[key] = value
        return out

    return prune


PRUNERS: Mapping[str, Pruner] = {
    "Node": _shape(
        labels=True,
        spec=_keys("taints", "unschedulable"),
        status=_keys("capacity", "allocatable"),
    ),
    "Pod": _shape(labels=True, spec=_pod_spec, status=_pod_status),
    "Deployment": _shape(labels=False, spec=_template_spec),
    "ReplicaSet": _shape(labels=False, spec=_template_spec),
    "Job": _shape(labels=False),
    "PodDisruptionBudget": _shape(
        labels=False, spec=_keys("selector"), status=_keys("disruptionsAllowed")
    ),
    "HorizontalPodAutoscaler": _shape(
        labels=False,
        spec=_keys("scaleTargetRef", "minReplicas", "maxReplicas", "metrics"),
        status=_keys("currentMetrics"),
    ),
    "PersistentVolumeClaim": _shape(labels=False, spec=_keys("volumeName")),
    "PersistentVolume": _shape(labels=True, spec=_keys("nodeAffinity")),
}
"""The kinds the parsers read, each with its pruning."""


def pruned(kind: str, obj: Mapping[str, Any]) -> Obj:
    """``obj`` (of ``kind``) with only what the parsers read, and its ``kind`` set."""
    out = PRUNERS[kind](obj)
    out["kind"] = kind
    return out
