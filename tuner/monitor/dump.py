"""Cluster state from Kubernetes API objects, e.g. the ``List`` that ``kubectl get -o json`` prints.

The dump is ``kubectl get nodes,pods,deployments,replicasets,statefulsets,daemonsets,
poddisruptionbudgets,horizontalpodautoscalers,persistentvolumeclaims,persistentvolumes -A -o
json``. The live source converts API objects to the same dictionaries, so both go through
:func:`cluster_from_objects`.

Volume topology: a pod's PersistentVolumeClaims (its ``persistentVolumeClaim`` volumes, and the
claim ``<pod>-<volume>`` of each generic ephemeral volume) are joined to their volumes when the
cluster is assembled. A claim bound to a PersistentVolume with ``nodeAffinity`` or zone/region
labels gives the pod that rule; a claim not bound yet gives none (it is bound where the pod is
first scheduled, or it keeps the pod Pending); a placed pod whose claim, or its volume, is
missing from the input (a dump taken without ``persistentvolumeclaims,persistentvolumes``) is
kept on its node, with one warning.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from tuner.errors import InputError
from tuner.json_input import MAX_DUMP_BYTES, read_bounded
from tuner.model.cluster import Cluster, Hpa, Node, Pdb, Pod, Workload
from tuner.model.conventions import PRICE_ANNOTATION
from tuner.model.onboarding import preferred_labels
from tuner.model.quantity import MAX_COUNT, amount, count, cpu_millis, memory_bytes
from tuner.model.resources import Resources
from tuner.model.scheduling import (
    ANY_IP,
    HOSTNAME_KEY,
    NAMESPACE_NAME_KEY,
    NOTHING,
    Constraints,
    HostPort,
    LabelSelector,
    NodeSelectorTerms,
    PodAffinityTerm,
    PreferredTerm,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
    VolumeAffinity,
    freeze_labels,
)
from tuner.monitor.decode import gc_paused, list_items
from tuner.monitor.prune import OBJECT
from tuner.redact import shown

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


class Claim(NamedTuple):
    """A PersistentVolumeClaim: the volume it is bound to (``""``: not bound)."""

    namespace: str
    name: str
    volume: str


class Volume(NamedTuple):
    """A PersistentVolume and the nodes that can reach it (no terms: every node)."""

    name: str
    terms: NodeSelectorTerms


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
        claims = _one(_claims, obj, refuse) if pod is not None else None
        return Parsed(pod, claims=claims or ())
    if kind == "PersistentVolumeClaim":
        return Parsed(_one(_claim, obj, refuse))
    if kind == "PersistentVolume":
        return Parsed(_one(_volume, obj, refuse))
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
    known = {n.name: n for n in nodes}
    volumes = Volumes(parsed, known)
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


class Volumes:
    """The claims and volumes of one assembly, joined to the pods that use them."""

    def __init__(self, parsed: Mapping[str, Iterable[Parsed]], nodes: Mapping[str, Node]) -> None:
        self.nodes = nodes
        self.claims = {
            (c.value.namespace, c.value.name): c.value.volume
            for c in parsed.get("PersistentVolumeClaim", ())
            if isinstance(c.value, Claim)
        }
        self.volumes = {
            v.value.name: v.value.terms
            for v in parsed.get("PersistentVolume", ())
            if isinstance(v.value, Volume)
        }
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
        extended=MappingProxyType(_scalars(allocatable, "status.allocatable", ("pods",))),
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


CORE_RESOURCES = ("cpu", "memory")


def _scalars(values: Any, field: str, also: tuple[str, ...] = ()) -> dict[str, int]:
    """The resources of a requests or allocatable map other than CPU, memory and ``also``,
    as whole amounts."""
    if not values:
        return {}
    if not isinstance(values, OBJECT):
        raise InputError(f"{field} is not a map")
    if len(values) == ("cpu" in values) + ("memory" in values) + sum(k in values for k in also):
        return {}
    out: dict[str, int] = {}
    for name, value in values.items():
        if name not in CORE_RESOURCES and name not in also:
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise InputError(f"{field}.{name} is {value!r}, not a quantity")
            out[str(name)] = amount(value)
    return out


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


def _beyond_cpu_memory(requests: Any) -> bool:
    """Whether a requests map may hold more than CPU and memory (checked by :func:`_scalars`)."""
    if not requests:
        return False
    if not isinstance(requests, OBJECT):
        return True
    return len(requests) > ("cpu" in requests) + ("memory" in requests)


def extended_requests(spec: Obj) -> tuple[tuple[str, int], ...]:
    """Requests of resources other than CPU and memory, by the rule of
    :func:`effective_requests`, sorted by name (empty for most pods, found in one pass)."""
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    if not spec.get("overhead") and not any(
        _beyond_cpu_memory((c.get("resources") or {}).get("requests")) for c in containers
    ):
        return ()
    found: list[tuple[Obj, dict[str, int]]] = []
    for key in ("containers", "initContainers"):
        for index, container in enumerate(spec.get(key) or ()):
            requests = (container.get("resources") or {}).get("requests")
            found.append((container, _scalars(requests, f"spec.{key}[{index}].resources.requests")))
    overhead = _scalars(spec.get("overhead"), "spec.overhead")
    if not overhead and not any(amounts for _, amounts in found):
        return ()
    regular = len(spec.get("containers") or ())
    running: Counter[str] = Counter()
    for _, amounts in found[:regular]:
        running.update(amounts)
    sidecars: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    for container, amounts in found[regular:]:
        if container.get("restartPolicy") == "Always":
            sidecars.update(amounts)
            step = Counter(sidecars)
        else:
            step = sidecars + Counter(amounts)
        for name, value in step.items():
            peak[name] = max(peak[name], value)
    running.update(sidecars)
    for name, value in running.items():
        peak[name] = max(peak[name], value)
    peak.update(overhead)
    return tuple(sorted((name, value) for name, value in peak.items() if value))


def _pod(obj: Obj) -> Pod | None:
    """A pod, its workload still its own controller (see :func:`_followed`)."""
    (meta, name), spec, status = _metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    phase = _text(status.get("phase", "Pending"), "status.phase")
    if phase in FINISHED_PHASES or meta.get("deletionTimestamp"):
        return None
    namespace = meta.get("namespace", "default")
    workload, owner_kind = _workload(namespace, meta)
    conditions = status.get("conditions") or ()
    labels = _frozen(meta.get("labels"))
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
        annotations=_frozen(meta.get("annotations"), "metadata.annotations"),
        constraints=_constraints(spec, namespace, labels),
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


INTERNED_MOST = 4096
_interned: dict[Constraints, Constraints] = {}


def _intern(constraints: Constraints) -> Constraints:
    """One object for equal constraints (a workload's pods share them): later questions about
    them (the snapshot's caches) compare by identity instead of field by field. Bounded: the
    table starts afresh once it holds :data:`INTERNED_MOST` kinds."""
    if len(_interned) >= INTERNED_MOST:
        _interned.clear()
    return _interned.setdefault(constraints, constraints)


def _constraints(spec: Obj, namespace: str, labels: Mapping[str, str]) -> Constraints:
    return _intern(_parsed_constraints(spec, namespace, labels))


def _parsed_constraints(spec: Obj, namespace: str, labels: Mapping[str, str]) -> Constraints:
    affinity = spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"
    pod_affinity = affinity.get("podAffinity") or {}
    pod_anti = affinity.get("podAntiAffinity") or {}
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
        anti_affinity=_pod_terms(pod_anti, namespace, labels, "podAntiAffinity")
        if pod_anti
        else (),
        affinity=_pod_terms(pod_affinity, namespace, labels, "podAffinity") if pod_affinity else (),
        preferred=_preferred(pod_affinity, namespace, labels, "podAffinity")
        if pod_affinity
        else (),
        preferred_anti=(
            _preferred(pod_anti, namespace, labels, "podAntiAffinity") if pod_anti else ()
        ),
        spread=_spread(spec.get("topologySpreadConstraints"), labels),
        host_ports=_host_ports(spec),
        extended=extended_requests(spec),
    )


_TOLERATION_FIELDS = (("key", ""), ("operator", "Equal"), ("value", ""), ("effect", ""))
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{field} is not a list")
    return value


def _pod_terms(
    rules: Obj, namespace: str, labels: Mapping[str, str], kind: str
) -> tuple[PodAffinityTerm, ...]:
    field = f"spec.affinity.{kind}.{REQUIRED}"
    return tuple(
        _pod_term(term, namespace, labels, f"{field}[{i}]", anti=kind == "podAntiAffinity")
        for i, term in enumerate(_list(rules.get(REQUIRED), field))
    )


def _preferred(
    rules: Obj, namespace: str, labels: Mapping[str, str], kind: str
) -> tuple[PreferredTerm, ...]:
    field = f"spec.affinity.{kind}.{PREFERRED}"
    out = []
    for i, choice in enumerate(_objects(rules.get(PREFERRED), field)):
        weight = _whole(choice.get("weight"), f"{field}[{i}].weight", 100)
        term = choice.get("podAffinityTerm")
        if not isinstance(term, OBJECT):
            raise InputError(f"{field}[{i}].podAffinityTerm is not an object")
        anti = kind == "podAntiAffinity"
        out.append(PreferredTerm(weight, _pod_term(term, namespace, labels, field, anti=anti)))
    return tuple(out)


def _pod_term(
    term: Obj, namespace: str, labels: Mapping[str, str], field: str, *, anti: bool
) -> PodAffinityTerm:
    """An affinity term; its ``namespaceSelector`` is read over namespace names (a selector on
    other namespace labels: every namespace for anti-affinity, none for affinity)."""
    key = term.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise InputError(f"{field}.topologyKey is {key!r}, not a label key")
    selector = _keyed_selector(term, labels, field)
    names = _texts(term.get("namespaces"), f"{field}.namespaces")
    chosen = term.get("namespaceSelector")
    if chosen is None:
        return PodAffinityTerm(selector, names or (namespace,), key)
    by_name = label_selector(chosen, f"{field}.namespaceSelector")
    keys = {k for k, _ in by_name.match_labels} | {r.key for r in by_name.expressions}
    if not keys:
        return PodAffinityTerm(selector, None, key)  # {}: every namespace
    if keys == {NAMESPACE_NAME_KEY}:
        return PodAffinityTerm(selector, names, key, by_name)
    return PodAffinityTerm(selector, None if anti else names, key)


def _keyed_selector(rule: Obj, labels: Mapping[str, str], field: str) -> LabelSelector:
    """A rule's ``labelSelector`` with the pod's own values of ``matchLabelKeys`` (and, for
    affinity terms, not its values of ``mismatchLabelKeys``); no selector selects nothing."""
    raw = rule.get("labelSelector")
    if raw is None:
        return NOTHING
    if not isinstance(raw, OBJECT):
        raise InputError(f"{field}.labelSelector is not an object")
    selector = label_selector(raw, f"{field}.labelSelector")
    same = [k for k in _list(rule.get("matchLabelKeys"), f"{field}.matchLabelKeys") if k in labels]
    other = [
        k for k in _list(rule.get("mismatchLabelKeys"), f"{field}.mismatchLabelKeys") if k in labels
    ]
    if not same and not other:
        return selector
    return selector.narrowed(
        LabelSelector(
            freeze_labels({k: labels[k] for k in same}),
            tuple(Requirement(k, "NotIn", (labels[k],)) for k in other),
        )
    )


WHEN = {"DoNotSchedule": True, "ScheduleAnyway": False}
POLICIES = {"Honor": True, "Ignore": False}


def _spread(constraints: Any, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    field = "spec.topologySpreadConstraints"
    out = []
    for i, raw in enumerate(_list(constraints, field)):
        at = f"{field}[{i}]"
        if not isinstance(raw, OBJECT):
            raise InputError(f"{at} is not an object")
        skew = _whole(raw.get("maxSkew"), f"{at}.maxSkew")
        if skew < 1:
            raise InputError(f"{at}.maxSkew is {skew!r}, not a whole number >= 1")
        key = raw.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise InputError(f"{at}.topologyKey is {key!r}, not a label key")
        when = raw.get("whenUnsatisfiable", "DoNotSchedule")
        if when not in WHEN:
            raise InputError(f"{at}.whenUnsatisfiable is {when!r}, not one of {sorted(WHEN)}")
        domains = raw.get("minDomains")
        least = 1 if domains is None else _whole(domains, f"{at}.minDomains")
        if least < 1:
            raise InputError(f"{at}.minDomains is {domains!r}, not a whole number >= 1")
        policies = []
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            policy = raw.get(name) or default
            if policy not in POLICIES:
                raise InputError(f"{at}.{name} is {policy!r}, not one of {sorted(POLICIES)}")
            policies.append(POLICIES[policy])
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=key,
                selector=_keyed_selector(raw, labels, at),
                hard=WHEN[when],
                min_domains=least,
                honor_node_affinity=policies[0],
                honor_taints=policies[1],
            )
        )
    return tuple(out)


MAX_PORT = 65535


def _host_ports(spec: Obj) -> tuple[HostPort, ...]:
    """The host ports of the pod's containers and sidecars (init containers that keep running)."""
    ports: list[HostPort] = []
    for key in ("containers", "initContainers"):
        for index, container in enumerate(spec.get(key) or ()):
            if "ports" not in container or (
                key == "initContainers" and container.get("restartPolicy") != "Always"
            ):
                continue
            field = f"spec.{key}[{index}].ports"
            for i, port in enumerate(_list(container.get("ports"), field)):
                if not isinstance(port, OBJECT) or not port.get("hostPort"):
                    continue
                number = _whole(port["hostPort"], f"{field}[{i}].hostPort", MAX_PORT)
                protocol = port.get("protocol") or "TCP"
                ip = port.get("hostIP") or ANY_IP
                if not isinstance(protocol, str) or not isinstance(ip, str):
                    raise InputError(f"{field}[{i}] has a protocol or hostIP that is not a string")
                ports.append(HostPort(number, protocol, ip))
    return tuple(sorted(set(ports)))


def _claims(obj: Obj) -> tuple[str, ...]:
    """The names of the PersistentVolumeClaims a pod mounts (generic ephemeral volumes' too)."""
    spec = obj.get("spec") or {}
    volumes = spec.get("volumes")
    if not volumes:
        return ()
    _, name = _metadata(obj)
    claims = []
    for i, volume in enumerate(_list(volumes, "spec.volumes")):
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


def _claim(obj: Obj) -> Claim:
    meta, name = _metadata(obj)
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


def _volume(obj: Obj) -> Volume:
    """A PersistentVolume: its required node affinity, ANDed with its zone/region labels."""
    meta, name = _metadata(obj)
    affinity = ((obj.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    field = "spec.nodeAffinity.required.nodeSelectorTerms"
    terms = tuple(
        _requirements(term.get("matchExpressions"), f"{field}[{i}].matchExpressions")
        for i, term in enumerate(_objects(affinity.get("nodeSelectorTerms"), field))
    )
    labels = _frozen(meta.get("labels"))
    zoned = tuple(
        Requirement(key, "In", tuple(labels[key].split("__")))
        for key in VOLUME_ZONE_LABELS
        if key in labels
    )
    if zoned:
        terms = tuple((*term, *zoned) for term in terms) if terms else (zoned,)
    return Volume(name, terms)


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
