"""Cluster state from Kubernetes API objects, e.g. the ``List`` that ``kubectl get -o json`` prints.

The dump is ``kubectl get nodes,pods,deployments,replicasets,statefulsets,daemonsets,
poddisruptionbudgets,horizontalpodautoscalers,persistentvolumeclaims,persistentvolumes -A -o
json``. The live source converts API objects to the same dictionaries, so both go through
:func:`cluster_from_objects`. Each object is parsed alone (:func:`parse_object`: a pod's spec by
:mod:`.pod_spec`, its owner by :mod:`.owners`, claims and volumes by :mod:`.volumes`, every
field by :mod:`.fields`), then the objects are assembled into one cluster (:func:`assemble`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from tuner.errors import InputError
from tuner.json_input import MAX_DUMP_BYTES, read_bounded
from tuner.model.cluster import Cluster, Hpa, Node, Pdb, Pod, Workload
from tuner.model.constraints import (
    Taint,
)
from tuner.model.conventions import PRICE_ANNOTATION
from tuner.model.onboarding import preferred_labels
from tuner.model.quantity import count
from tuner.monitor.decode import gc_paused, list_items
from tuner.monitor.fields import (
    Obj,
    frozen,
    label_selector,
    metadata,
    objects,
    resources,
    scalars,
    text,
    whole,
)
from tuner.monitor.owners import (
    Controller,
    Followed,
    OwnerKey,
    controller_of,
    workload_of,
)
from tuner.monitor.pod_spec import constraints, effective_requests
from tuner.monitor.prune import OBJECT
from tuner.monitor.volumes import Claim, Volume, Volumes, parse_claim, parse_volume, pod_claims
from tuner.redact import shown

log = logging.getLogger(__name__)

T = TypeVar("T")

FINISHED_PHASES = ("Succeeded", "Failed")


def load_dump(path: Path, price_annotation: str = PRICE_ANNOTATION) -> Cluster:
    """Read a dump file; any problem becomes an :class:`InputError` naming it.

    Items are decoded one at a time and pruned (:mod:`tuner.monitor.decode`), so a 200 MB dump
    never lives as a whole tree of Python objects. The cluster is kept out of the garbage
    collector's later passes: a command plans on it until it ends.
    """
    data = read_bounded(path, "dump", MAX_DUMP_BYTES)
    with gc_paused(keep=True):
        items = list_items(data, f"dump {path}")
        try:
            return cluster_from_objects(items, price_annotation=price_annotation)
        except InputError as err:
            raise InputError(f"dump {path}: {err}") from None


def cluster_from_objects(
    items: Iterable[Obj], *, strict: bool = True, price_annotation: str = PRICE_ANNOTATION
) -> Cluster:
    """Build a cluster from API objects (dicts in the JSON form of the API).

    ``strict`` (a dump): the first unusable object is an :class:`InputError` naming it.
    Otherwise (live objects) it is skipped with a warning naming it, and so are pods of the
    nodes skipped. Duplicates (two nodes, or two pods of a namespace, of one name) are
    unusable. A node's ``price_annotation`` must be a finite price >= 0. Each object is parsed
    alone (:func:`parse_object`), then :func:`assemble` joins them.
    """
    refuse = refusal(strict)
    by_kind: dict[str, list[Obj]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, OBJECT) or not isinstance(item.get("kind"), str):
            refuse(f"item {index} has no 'kind'")
            continue
        by_kind.setdefault(item["kind"], []).append(item)
    return assemble(
        {
            kind: [parse_object(obj, refuse, price_annotation) for obj in by_kind.get(kind, ())]
            for kind in PARSED_KINDS
        },
        refuse,
    )


class Parsed(NamedTuple):
    """What one API object gives a cluster, parsed alone (``None``: nothing, or unusable).

    A pod's workload is still its own controller (a ReplicaSet, a Job): :func:`assemble`
    follows it through the owners of the cluster it builds, and joins its claims to their
    volumes.
    """

    value: Node | Pod | Pdb | Hpa | Claim | Volume | None = None
    owner: tuple[OwnerKey, Controller] | None = None
    """A ReplicaSet's or Job's key and its controller."""
    template: tuple[Workload, frozenset[str]] | None = None
    """A Deployment or ReplicaSet and the node labels its pod template prefers."""
    problems: tuple[str, ...] = ()
    """Why a part was unusable, kept to be refused again by every :func:`assemble` of it."""
    claims: tuple[str, ...] = ()
    """A pod's PersistentVolumeClaims, by name (its namespace's)."""


PARSED_KINDS = (
    "Node",
    "ReplicaSet",
    "Job",
    "Pod",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "Deployment",
    "PersistentVolumeClaim",
    "PersistentVolume",
)
"""The kinds :func:`parse_object` reads, in the order a dump's objects are parsed."""


def parse_object(
    obj: Obj, refuse: Callable[[str], None], price_annotation: str = PRICE_ANNOTATION
) -> Parsed:
    """One object (with its ``kind``) parsed alone; an unusable part is refused, naming it."""
    kind = obj.get("kind")
    if kind == "Node":
        return Parsed(_one(lambda o: _node(o, price_annotation), obj, refuse))
    if kind == "Pod":
        pod = _one(_pod, obj, refuse)
        claims = _one(pod_claims, obj, refuse) if pod is not None else None
        return Parsed(pod, claims=claims or ())
    if kind == "PersistentVolumeClaim":
        return Parsed(_one(parse_claim, obj, refuse))
    if kind == "PersistentVolume":
        return Parsed(_one(parse_volume, obj, refuse))
    if kind == "PodDisruptionBudget":
        return Parsed(_one(_pdb, obj, refuse))
    if kind == "HorizontalPodAutoscaler":
        return Parsed(_one(_hpa, obj, refuse))
    owner = _one(controller_of, obj, refuse) if kind in ("ReplicaSet", "Job") else None
    template = _one(_template, obj, refuse) if kind in ("ReplicaSet", "Deployment") else None
    return Parsed(owner=owner, template=template)


def assemble(
    parsed: Mapping[str, Iterable[Parsed]],
    refuse: Callable[[str], None],
    followed: Followed | None = None,
) -> Cluster:
    """The cluster of objects parsed alone, by kind (each kind in its objects' order): pods'
    workloads followed through their ReplicaSet or Job owners (``followed`` remembers them
    between assemblies); the objects' kept problems, a pod on an unknown node and a second node
    or pod of one name refused."""
    follow = followed or Followed()
    for kind in PARSED_KINDS:
        for problem in (m for p in parsed.get(kind, ()) for m in p.problems):
            refuse(problem)

    def values(kind: str) -> Iterable[object]:
        return (p.value for p in parsed.get(kind, ()) if p.value is not None)

    nodes = _unique(
        (n for n in values("Node") if isinstance(n, Node)), lambda n: n.name, "node", refuse
    )
    owners = {
        p.owner[0]: p.owner[1]
        for kind in ("ReplicaSet", "Job")
        for p in parsed.get(kind, ())
        if p.owner is not None
    }
    known = {n.name: n for n in nodes}
    volumes = Volumes(
        (c for c in values("PersistentVolumeClaim") if isinstance(c, Claim)),
        (v for v in values("PersistentVolume") if isinstance(v, Volume)),
        known,
    )
    pods = []
    for item in parsed.get("Pod", ()):
        pod = item.value
        if not isinstance(pod, Pod):
            continue
        if pod.node is not None and pod.node not in known:
            refuse(f"pod {pod.key} is on unknown node {pod.node!r}")
        else:
            pods.append(volumes.attach(follow(pod, owners), item.claims))
    follow.done()
    volumes.warn()
    templates = (
        p.template
        for kind in ("Deployment", "ReplicaSet")
        for p in parsed.get(kind, ())
        if p.template is not None
    )
    return Cluster(
        nodes=nodes,
        pods=_unique(pods, lambda p: p.key, "pod", refuse),
        pdbs=tuple(p for p in values("PodDisruptionBudget") if isinstance(p, Pdb)),
        hpas=tuple(h for h in values("HorizontalPodAutoscaler") if isinstance(h, Hpa)),
        preferred_labels=MappingProxyType(dict(templates)),
    )


def refusal(strict: bool) -> Callable[[str], None]:
    """What happens to an unusable object: an InputError, or (live) a warning."""

    def refuse(message: str) -> None:
        if strict:
            raise InputError(message)
        log.warning("skipping %s", message)

    return refuse


def _unique(
    values: Iterable[T], key: Callable[[T], object], what: str, refuse: Callable[[str], None]
) -> tuple[T, ...]:
    """``values`` without a second one of the same ``key`` (refused)."""
    seen: dict[object, T] = {}
    for value in values:
        name = key(value)
        if name in seen:
            refuse(f"{what} {name} appears twice")
        else:
            seen[name] = value
    return tuple(seen.values())


def _one(parse: Callable[[Obj], T], obj: Obj, refuse: Callable[[str], None]) -> T | None:
    """``obj`` parsed; a malformed one is refused, naming the object (None when skipped)."""
    try:
        return parse(obj)
    except InputError as err:
        refuse(f"{_describe(obj)}: {err}")
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        refuse(f"{_describe(obj)}: malformed ({type(err).__name__}: {err})")
    return None


def _describe(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "?") if isinstance(meta, OBJECT) else "?"
    namespace = meta.get("namespace") if isinstance(meta, OBJECT) else None
    where = f"{namespace}/{name}" if namespace else str(name)
    return f"{str(obj.get('kind', '?')).lower()} {where!r}"


def _price(annotations: Mapping[str, str], key: str) -> None:
    """A price annotation must hold a finite price >= 0 (else a plan would count on it)."""
    text = annotations.get(key)
    if text is None:
        return
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise InputError(f"annotation {key} is {text!r}, not a price >= 0")


def _node(obj: Obj, price_annotation: str = PRICE_ANNOTATION) -> Node:
    (meta, name), spec, status = metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or capacity
    if "cpu" not in capacity or "memory" not in capacity:
        raise InputError("status.capacity lacks cpu or memory")
    annotations = frozen(meta.get("annotations"), "metadata.annotations")
    _price(annotations, price_annotation)
    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise InputError(f"spec.unschedulable is {shown(unschedulable)}, not true or false")
    return Node(
        name=name,
        capacity=resources(capacity),
        allocatable=resources(allocatable),
        extended=MappingProxyType(scalars(allocatable, "status.allocatable", ("pods",))),
        max_pods=count(allocatable.get("pods", capacity.get("pods", 110))),
        labels=frozen(meta.get("labels")),
        annotations=annotations,
        taints=tuple(
            Taint(
                text(t.get("key"), f"spec.taints[{i}].key"),
                text(t.get("value", ""), f"spec.taints[{i}].value"),
                text(t.get("effect", "NoSchedule"), f"spec.taints[{i}].effect"),
            )
            for i, t in enumerate(objects(spec.get("taints"), "spec.taints"))
        ),
        unschedulable=unschedulable,
    )


def _pod(obj: Obj) -> Pod | None:
    """A pod, its workload still its own controller (:class:`~tuner.monitor.owners.Followed`
    follows it to its Deployment or CronJob)."""
    (meta, name), spec, status = metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    phase = text(status.get("phase", "Pending"), "status.phase")
    if phase in FINISHED_PHASES or meta.get("deletionTimestamp"):
        return None
    namespace = meta.get("namespace", "default")
    workload, owner_kind = workload_of(namespace, meta)
    conditions = status.get("conditions") or ()
    labels = frozen(meta.get("labels"))
    node = spec.get("nodeName") or None
    if node is not None and not isinstance(node, str):
        raise InputError(f"spec.nodeName is {node!r}, not a name")
    return Pod(
        namespace=namespace,
        name=name,
        node=node,
        requests=effective_requests(spec),
        workload=workload,
        owner_kind=owner_kind,
        labels=labels,
        annotations=frozen(meta.get("annotations"), "metadata.annotations"),
        constraints=constraints(spec, namespace, labels),
        phase=phase,
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
    )


def _template(obj: Obj) -> tuple[Workload, frozenset[str]]:
    """A Deployment or ReplicaSet and the node labels its pod template prefers."""
    meta, name = metadata(obj)
    template = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    workload = Workload(meta.get("namespace", "default"), obj["kind"], name)
    return workload, preferred_labels(template.get("affinity"))


def _pdb(obj: Obj) -> Pdb:
    (meta, name), spec, status = metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    return Pdb(
        namespace=meta.get("namespace", "default"),
        name=name,
        selector=label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=whole(status.get("disruptionsAllowed", 0), "status.disruptionsAllowed"),
    )


def _hpa(obj: Obj) -> Hpa:
    (meta, name), spec = metadata(obj), obj.get("spec") or {}
    status = obj.get("status") or {}
    namespace = meta.get("namespace", "default")
    target = spec["scaleTargetRef"]
    low = whole(spec.get("minReplicas", 1), "spec.minReplicas")
    high = whole(spec.get("maxReplicas"), "spec.maxReplicas")
    if low > high:
        raise InputError(f"spec.minReplicas {low} is above spec.maxReplicas {high}")
    return Hpa(
        namespace=namespace,
        name=name,
        target=Workload(
            namespace,
            text(target.get("kind"), "spec.scaleTargetRef.kind"),
            text(target.get("name"), "spec.scaleTargetRef.name"),
        ),
        min_replicas=low,
        max_replicas=high,
        usage_ratio=_usage_ratio(spec.get("metrics"), status.get("currentMetrics")),
    )


def _usage_ratio(metrics: object, current: object) -> float | None:
    """The highest of an HPA's current CPU or memory utilisation over its target
    (``status.currentMetrics[].resource.current.averageUtilization`` over
    ``spec.metrics[].resource.target.averageUtilization``), or None unless every metric of its
    spec is such a target with a current utilisation in its status (a status that says nothing
    usable leaves the ratio unknown, not the HPA refused)."""
    targets = {m.get("name"): m.get("target") or {} for m in _resources(metrics)}
    now = {m.get("name"): m.get("current") for m in _resources(current)}
    if not targets or not isinstance(metrics, list) or len(targets) != len(metrics):
        return None
    ratios = []
    for name, target in targets.items():
        goal, used = _utilization(target), _utilization(now.get(name))
        if goal is None or used is None or goal == 0 or target.get("type") != "Utilization":
            return None
        ratios.append(used / goal)
    return max(ratios)


def current_utilisation(current: object) -> float | None:
    """The highest CPU or memory utilisation an HPA's status measured
    (``status.currentMetrics[].resource.current.averageUtilization``), as a share of the pods'
    requests; None when its status gives none."""
    used = [_utilization(m.get("current")) for m in _resources(current)]
    known = [u for u in used if u is not None]
    return max(known) / 100 if known else None


def _resources(metrics: object) -> list[Obj]:
    """The ``resource`` parts of the Resource metrics of an HPA's spec or status."""
    if not isinstance(metrics, list):
        return []
    return [
        m["resource"]
        for m in metrics
        if isinstance(m, OBJECT)
        and m.get("type") == "Resource"
        and isinstance(m.get("resource"), OBJECT)
    ]


def _utilization(part: object) -> int | None:
    """A metric target's or value's ``averageUtilization`` (a whole percentage), else None."""
    value = part.get("averageUtilization") if isinstance(part, OBJECT) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
