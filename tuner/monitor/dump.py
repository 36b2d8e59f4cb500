"""Cluster state from Kubernetes API objects, e.g. the ``List`` that ``kubectl get -o json`` prints.

The dump is ``kubectl get nodes,pods,deployments,replicasets,statefulsets,daemonsets,
poddisruptionbudgets,horizontalpodautoscalers -A -o json``. The live source converts API
objects to the same dictionaries, so both go through :func:`cluster_from_objects`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from tuner.errors import InputError
from tuner.json_input import MAX_DUMP_BYTES, read_bounded
from tuner.model.cluster import Cluster, Hpa, Node, Pdb, Pod, Workload
from tuner.model.onboarding import preferred_labels
from tuner.model.quantity import MAX_COUNT, count, cpu_millis, memory_bytes
from tuner.model.resources import Resources
from tuner.model.scheduling import (
    HOSTNAME_KEY,
    AntiAffinityTerm,
    Constraints,
    LabelSelector,
    Requirement,
    Taint,
    Toleration,
    freeze_labels,
)
from tuner.monitor.decode import gc_paused, list_items
from tuner.monitor.prune import OBJECT
from tuner.redact import shown
from tuner.settings import PRICE_ANNOTATION

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
T = TypeVar("T")

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
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


OwnerKey = tuple[str, str, str]
"""A ReplicaSet's or Job's (namespace, kind, name)."""

Controller = tuple[str, str] | None
"""An object's controller (kind, name), if it has one."""


class Parsed(NamedTuple):
    """What one API object gives a cluster, parsed alone (``None``: nothing, or unusable).

    A pod's workload is still its own controller (a ReplicaSet, a Job): :func:`assemble`
    follows it through the owners of the cluster it builds.
    """

    value: Node | Pod | Pdb | Hpa | None = None
    owner: tuple[OwnerKey, Controller] | None = None
    """A ReplicaSet's or Job's key and its controller."""
    template: tuple[Workload, frozenset[str]] | None = None
    """A Deployment or ReplicaSet and the node labels its pod template prefers."""
    problems: tuple[str, ...] = ()
    """Why a part was unusable, kept to be refused again by every :func:`assemble` of it."""


PARSED_KINDS = (
    "Node",
    "ReplicaSet",
    "Job",
    "Pod",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "Deployment",
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
        return Parsed(_one(_pod, obj, refuse))
    if kind == "PodDisruptionBudget":
        return Parsed(_one(_pdb, obj, refuse))
    if kind == "HorizontalPodAutoscaler":
        return Parsed(_one(_hpa, obj, refuse))
    owner = _one(_controller_of, obj, refuse) if kind in ("ReplicaSet", "Job") else None
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
    known = {n.name for n in nodes}
    pods = []
    for pod in values("Pod"):
        if not isinstance(pod, Pod):
            continue
        if pod.node is not None and pod.node not in known:
            refuse(f"pod {pod.key} is on unknown node {pod.node!r}")
        else:
            pods.append(follow(pod, owners))
    follow.done()
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


def _metadata(obj: Obj) -> tuple[Obj, str]:
    """The object's ``metadata`` and its name, both checked."""
    meta = obj.get("metadata")
    if not isinstance(meta, OBJECT):
        raise InputError("metadata is missing or not an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"metadata.name is {name!r}, not a name")
    namespace = meta.get("namespace", "default")
    if not isinstance(namespace, str):
        raise InputError(f"metadata.namespace is {namespace!r}, not a name")
    return meta, name


def _whole(value: Any, field: str, most: int = MAX_COUNT) -> int:
    """A whole number in 0..most (a count in an object)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise InputError(f"{field} is {value!r}, not a whole number in 0..{most}")
    return value


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


def _frozen(mapping: Any, field: str = "metadata.labels") -> Mapping[str, str]:
    """Labels, annotations, a node selector: strings to strings."""
    mapping = mapping or {}
    if not isinstance(mapping, OBJECT) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise InputError(f"{field} is not a map of strings")
    return MappingProxyType(dict(mapping))


def _text(value: Any, field: str) -> str:
    """A field that must be a string (a list or a map there is refused, never hashed later)."""
    if not isinstance(value, str):
        raise InputError(f"{field} is {shown(value)}, not a string")
    return value


def _texts(values: Any, field: str) -> tuple[str, ...]:
    """A field that must be a list of strings (null: empty)."""
    values = values or ()
    if not isinstance(values, list | tuple):
        raise InputError(f"{field} is {shown(values)}, not a list of strings")
    return tuple(_text(v, f"{field}[{i}]") for i, v in enumerate(values))


def _objects(values: Any, field: str) -> list[Obj]:
    """A field that must be a list of objects (null: empty)."""
    values = values or ()
    if not isinstance(values, list | tuple) or not all(isinstance(v, OBJECT) for v in values):
        raise InputError(f"{field} is {shown(values)}, not a list of objects")
    return list(values)


def _resources(values: Any) -> Resources:
    values = values or {}
    if not isinstance(values, OBJECT):
        raise InputError(f"resources {values!r} are not a map")
    return Resources(
        cpu_millis(values["cpu"]) if "cpu" in values else 0,
        memory_bytes(values["memory"]) if "memory" in values else 0,
    )


def _node(obj: Obj, price_annotation: str = PRICE_ANNOTATION) -> Node:
    (meta, name), spec, status = _metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or capacity
    if "cpu" not in capacity or "memory" not in capacity:
        raise InputError("status.capacity lacks cpu or memory")
    annotations = _frozen(meta.get("annotations"), "metadata.annotations")
    _price(annotations, price_annotation)
    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise InputError(f"spec.unschedulable is {shown(unschedulable)}, not true or false")
    return Node(
        name=name,
        capacity=_resources(capacity),
        allocatable=_resources(allocatable),
        max_pods=count(allocatable.get("pods", capacity.get("pods", 110))),
        labels=_frozen(meta.get("labels")),
        annotations=annotations,
        taints=tuple(
            Taint(
                _text(t.get("key"), f"spec.taints[{i}].key"),
                _text(t.get("value", ""), f"spec.taints[{i}].value"),
                _text(t.get("effect", "NoSchedule"), f"spec.taints[{i}].effect"),
            )
            for i, t in enumerate(_objects(spec.get("taints"), "spec.taints"))
        ),
        unschedulable=unschedulable,
    )


def _controller(meta: Obj) -> tuple[str, str] | None:
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list) or not all(
        isinstance(r, OBJECT) and isinstance(r.get("kind"), str) and isinstance(r.get("name"), str)
        for r in refs
    ):
        raise InputError("metadata.ownerReferences is not a list of references (kind, name)")
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return (ref["kind"], ref["name"]) if ref else None


def _controller_of(obj: Obj) -> tuple[OwnerKey, Controller]:
    """A ReplicaSet's or Job's (namespace, kind, name) and its own controller."""
    meta, name = _metadata(obj)
    return (meta.get("namespace", "default"), obj["kind"], name), _controller(meta)


def _workload(namespace: str, meta: Obj) -> tuple[Workload, str]:
    """The pod's own controller as its workload, and that controller's kind."""
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return Workload(namespace, "Node", meta["name"]), "Node"
    ref = _controller(meta)
    if ref is None:
        return Workload(namespace, "Pod", meta["name"]), ""
    kind, name = ref
    return Workload(namespace, kind, name), kind


def _parent(pod: Pod, owners: Mapping[OwnerKey, Controller]) -> Controller:
    """The controller of a pod's ReplicaSet (a Deployment) or Job (e.g. a CronJob), if the
    pod's workload follows it there."""
    if pod.owner_kind not in ("ReplicaSet", "Job"):
        return None
    own = pod.workload
    parent = owners.get((own.namespace, own.kind, own.name))
    if parent is None or (own.kind == "ReplicaSet" and parent[0] != "Deployment"):
        return None
    return parent


def _followed(pod: Pod, parent: tuple[str, str]) -> Pod:
    """``pod`` whose workload is ``parent``, its ReplicaSet's or Job's controller."""
    return Pod(  # not dataclasses.replace: three times its speed, and 30,000 pods a read
        pod.namespace,
        pod.name,
        pod.node,
        pod.requests,
        Workload(pod.namespace, *parent),
        "Deployment" if pod.owner_kind == "ReplicaSet" else "Job",
        pod.labels,
        pod.annotations,
        pod.constraints,
        pod.phase,
        pod.ready,
    )


class Followed:
    """Pods followed through their owners by one :func:`assemble`, reused by the next for a
    pod parsed once (the same object) whose parent is unchanged: a cache's reads then build
    only the pods that changed (not thread-safe: one assembly at a time)."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[Pod, tuple[str, str], Pod]] = {}
        self._next: dict[int, tuple[Pod, tuple[str, str], Pod]] = {}

    def __call__(self, pod: Pod, owners: Mapping[OwnerKey, Controller]) -> Pod:
        """``pod`` with its workload followed through ``owners``."""
        parent = _parent(pod, owners)
        if parent is None:
            return pod
        last = self._last.get(id(pod))  # the pod is kept in the entry: its id is not reused
        out = last[2] if last and last[0] is pod and last[1] == parent else _followed(pod, parent)
        self._next[id(pod)] = (pod, parent, out)
        return out

    def done(self) -> None:
        """End an assembly: the next one reuses what this one followed, and only that."""
        self._last, self._next = self._next, {}


def effective_requests(spec: Obj) -> Resources:
    """Kubernetes' rule: max(regular containers + sidecars, any init step) + overhead."""
    regular = Resources.total(
        [
            _resources((c.get("resources") or {}).get("requests"))
            for c in spec.get("containers") or ()
        ]
    )
    sidecars = Resources()
    init_peak = Resources()
    for container in spec.get("initContainers") or ():
        request = _resources((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            sidecars = sidecars + request
            step = sidecars
        else:
            step = sidecars + request
        init_peak = Resources(max(init_peak.cpu, step.cpu), max(init_peak.memory, step.memory))
    running = regular + sidecars
    peak = Resources(max(running.cpu, init_peak.cpu), max(running.memory, init_peak.memory))
    return peak + _resources(spec.get("overhead"))


def _pod(obj: Obj) -> Pod | None:
    """A pod, its workload still its own controller (see :func:`_followed`)."""
    (meta, name), spec, status = _metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    phase = _text(status.get("phase", "Pending"), "status.phase")
    if phase in FINISHED_PHASES or meta.get("deletionTimestamp"):
        return None
    namespace = meta.get("namespace", "default")
    workload, owner_kind = _workload(namespace, meta)
    conditions = status.get("conditions") or ()
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
        labels=_frozen(meta.get("labels")),
        annotations=_frozen(meta.get("annotations"), "metadata.annotations"),
        constraints=_constraints(spec, namespace),
        phase=phase,
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
    )


def _requirements(expressions: Any, field: str) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(
            _text(e.get("key"), f"{field}[{i}].key"),
            _text(e.get("operator"), f"{field}[{i}].operator"),
            _texts(e.get("values"), f"{field}[{i}].values"),
        )
        for i, e in enumerate(_objects(expressions, field))
    )


def label_selector(obj: Obj | None, field: str = "selector") -> LabelSelector:
    """A LabelSelector from its API form (``field`` names it in errors)."""
    obj = obj or {}
    if not isinstance(obj, OBJECT):
        raise InputError(f"{field} is {shown(obj)}, not an object")
    return LabelSelector(
        freeze_labels(_frozen(obj.get("matchLabels"), f"{field}.matchLabels")),
        _requirements(obj.get("matchExpressions"), f"{field}.matchExpressions"),
    )


def _constraints(spec: Obj, namespace: str) -> Constraints:
    affinity = spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    anti = (affinity.get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or ()
    terms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms += ".nodeSelectorTerms"
    anti_terms = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    return Constraints(
        tolerations=tuple(
            Toleration(
                *(
                    _text(t.get(key, default), f"spec.tolerations[{i}].{key}")
                    for key, default in _TOLERATION_FIELDS
                )
            )
            for i, t in enumerate(_objects(spec.get("tolerations"), "spec.tolerations"))
        ),
        node_selector=freeze_labels(_frozen(spec.get("nodeSelector"), "spec.nodeSelector")),
        node_affinity=tuple(
            _requirements(term.get("matchExpressions"), f"{terms}[{i}].matchExpressions")
            for i, term in enumerate(_objects(required.get("nodeSelectorTerms"), terms))
        ),
        anti_affinity=tuple(
            AntiAffinityTerm(
                label_selector(term.get("labelSelector"), f"{anti_terms}[{i}].labelSelector"),
                _texts(term.get("namespaces"), f"{anti_terms}[{i}].namespaces") or (namespace,),
            )
            for i, term in enumerate(_objects(anti, anti_terms))
            if term.get("topologyKey") == HOSTNAME_KEY
        ),
    )


_TOLERATION_FIELDS = (("key", ""), ("operator", "Equal"), ("value", ""), ("effect", ""))


def _template(obj: Obj) -> tuple[Workload, frozenset[str]]:
    """A Deployment or ReplicaSet and the node labels its pod template prefers."""
    meta, name = _metadata(obj)
    template = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    workload = Workload(meta.get("namespace", "default"), obj["kind"], name)
    return workload, preferred_labels(template.get("affinity"))


def _pdb(obj: Obj) -> Pdb:
    (meta, name), spec, status = _metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    return Pdb(
        namespace=meta.get("namespace", "default"),
        name=name,
        selector=label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=_whole(
            status.get("disruptionsAllowed", 0), "status.disruptionsAllowed"
        ),
    )


def _hpa(obj: Obj) -> Hpa:
    (meta, name), spec = _metadata(obj), obj.get("spec") or {}
    namespace = meta.get("namespace", "default")
    target = spec["scaleTargetRef"]
    low = _whole(spec.get("minReplicas", 1), "spec.minReplicas")
    high = _whole(spec.get("maxReplicas"), "spec.maxReplicas")
    if low > high:
        raise InputError(f"spec.minReplicas {low} is above spec.maxReplicas {high}")
    return Hpa(
        namespace=namespace,
        name=name,
        target=Workload(
            namespace,
            _text(target.get("kind"), "spec.scaleTargetRef.kind"),
            _text(target.get("name"), "spec.scaleTargetRef.name"),
        ),
        min_replicas=low,
        max_replicas=high,
    )
