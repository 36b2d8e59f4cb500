"""Cluster state from Kubernetes API objects, e.g. the ``List`` that ``kubectl get -o json`` prints.

The dump is ``kubectl get nodes,pods,deployments,replicasets,statefulsets,daemonsets,
poddisruptionbudgets,horizontalpodautoscalers -A -o json``. The live source converts API
objects to the same dictionaries, so both go through :func:`cluster_from_objects`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from tuner.errors import InputError
from tuner.model.cluster import Cluster, Hpa, Node, Pdb, Pod, Workload
from tuner.model.onboarding import preferred_labels
from tuner.model.quantity import cpu_millis, memory_bytes
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
from tuner.monitor.decode import MAX_DUMP_BYTES, gc_paused, list_items

Obj = Mapping[str, Any]
T = TypeVar("T")

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FINISHED_PHASES = ("Succeeded", "Failed")


def load_dump(path: Path) -> Cluster:
    """Read a dump file; any problem becomes an :class:`InputError` naming it.

    Items are decoded one at a time and pruned (:mod:`tuner.monitor.decode`), so a 200 MB dump
    never lives as a whole tree of Python objects. The cluster is kept out of the garbage
    collector's later passes: a command plans on it until it ends.
    """
    try:
        with path.open("rb") as file:
            data = file.read(MAX_DUMP_BYTES + 1)
    except OSError as err:
        raise InputError(f"cannot read dump {path}: {err.strerror}") from err
    if len(data) > MAX_DUMP_BYTES:
        raise InputError(f"dump {path} is larger than {MAX_DUMP_BYTES // 2**20} MiB")
    with gc_paused(keep=True):
        return cluster_from_objects(list_items(data, f"dump {path}"))


def cluster_from_objects(items: Iterable[Obj]) -> Cluster:
    """Build a cluster from API objects (dicts in the JSON form of the API)."""
    by_kind: dict[str, list[Obj]] = {}
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("kind"), str):
            raise InputError(f"dump item {index} has no 'kind'")
        by_kind.setdefault(item["kind"], []).append(item)
    nodes = tuple(_parsed(_node, by_kind.get("Node", [])))
    owners = _controllers(by_kind.get("ReplicaSet", []) + by_kind.get("Job", []))
    pods = tuple(
        pod for pod in _parsed(lambda o: _pod(o, owners), by_kind.get("Pod", [])) if pod is not None
    )
    known = {n.name for n in nodes}
    for pod in pods:
        if pod.node is not None and pod.node not in known:
            raise InputError(f"pod {pod.key} is on unknown node {pod.node!r}")
    pdbs = tuple(_parsed(_pdb, by_kind.get("PodDisruptionBudget", [])))
    hpas = tuple(_parsed(_hpa, by_kind.get("HorizontalPodAutoscaler", [])))
    templates = by_kind.get("Deployment", []) + by_kind.get("ReplicaSet", [])
    return Cluster(
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        hpas=hpas,
        preferred_labels=MappingProxyType(dict(_parsed(_template, templates))),
    )


def _parsed(parse: Callable[[Obj], T], objects: list[Obj]) -> Iterable[T]:
    """Parse each object, turning malformed ones into an InputError naming the object."""
    for obj in objects:
        try:
            yield parse(obj)
        except InputError as err:
            raise InputError(f"{_describe(obj)}: {err}") from err
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise InputError(f"{_describe(obj)}: malformed ({type(err).__name__}: {err})") from err


def _describe(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name", "?") if isinstance(meta, Mapping) else "?"
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    where = f"{namespace}/{name}" if namespace else str(name)
    return f"{str(obj.get('kind', '?')).lower()} {where}"


def _frozen(mapping: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


def _resources(values: Mapping[str, Any] | None) -> Resources:
    values = values or {}
    return Resources(
        cpu_millis(values["cpu"]) if "cpu" in values else 0,
        memory_bytes(values["memory"]) if "memory" in values else 0,
    )


def _node(obj: Obj) -> Node:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or capacity
    if "cpu" not in capacity or "memory" not in capacity:
        raise InputError("status.capacity lacks cpu or memory")
    return Node(
        name=meta["name"],
        capacity=_resources(capacity),
        allocatable=_resources(allocatable),
        max_pods=memory_bytes(allocatable.get("pods", capacity.get("pods", 110))),
        labels=_frozen(meta.get("labels")),
        annotations=_frozen(meta.get("annotations")),
        taints=tuple(
            Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
            for t in spec.get("taints") or ()
        ),
        unschedulable=bool(spec.get("unschedulable", False)),
    )


def _controller(meta: Obj) -> tuple[str, str] | None:
    refs = meta.get("ownerReferences") or ()
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return (ref["kind"], ref["name"]) if ref else None


def _controllers(objects: list[Obj]) -> dict[tuple[str, str, str], tuple[str, str] | None]:
    """(namespace, kind, name) of ReplicaSets/Jobs -> their own controller."""
    return {
        (o["metadata"].get("namespace", "default"), o["kind"], o["metadata"]["name"]): _controller(
            o["metadata"]
        )
        for o in objects
    }


def _workload(
    namespace: str, meta: Obj, owners: Mapping[tuple[str, str, str], tuple[str, str] | None]
) -> tuple[Workload, str]:
    """The pod's workload and the kind of its controller, following ReplicaSet -> Deployment."""
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return Workload(namespace, "Node", meta["name"]), "Node"
    ref = _controller(meta)
    if ref is None:
        return Workload(namespace, "Pod", meta["name"]), ""
    kind, name = ref
    parent = owners.get((namespace, kind, name))
    if kind == "ReplicaSet" and parent and parent[0] == "Deployment":
        return Workload(namespace, "Deployment", parent[1]), "Deployment"
    if kind == "Job" and parent:
        return Workload(namespace, parent[0], parent[1]), "Job"
    return Workload(namespace, kind, name), kind


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


def _pod(obj: Obj, owners: Mapping[tuple[str, str, str], tuple[str, str] | None]) -> Pod | None:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    phase = status.get("phase", "Pending")
    if phase in FINISHED_PHASES or meta.get("deletionTimestamp"):
        return None
    namespace = meta.get("namespace", "default")
    workload, owner_kind = _workload(namespace, meta, owners)
    conditions = status.get("conditions") or ()
    return Pod(
        namespace=namespace,
        name=meta["name"],
        node=spec.get("nodeName") or None,
        requests=effective_requests(spec),
        workload=workload,
        owner_kind=owner_kind,
        labels=_frozen(meta.get("labels")),
        annotations=_frozen(meta.get("annotations")),
        constraints=_constraints(spec, namespace),
        phase=phase,
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
    )


def _requirements(expressions: Iterable[Obj] | None) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ()))
        for e in expressions or ()
    )


def label_selector(obj: Obj | None) -> LabelSelector:
    """A LabelSelector from its API form."""
    obj = obj or {}
    return LabelSelector(
        freeze_labels(obj.get("matchLabels")), _requirements(obj.get("matchExpressions"))
    )


def _constraints(spec: Obj, namespace: str) -> Constraints:
    affinity = spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    anti = (affinity.get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or ()
    return Constraints(
        tolerations=tuple(
            Toleration(
                t.get("key", ""),
                t.get("operator", "Equal"),
                t.get("value", ""),
                t.get("effect", ""),
            )
            for t in spec.get("tolerations") or ()
        ),
        node_selector=freeze_labels(spec.get("nodeSelector")),
        node_affinity=tuple(
            _requirements(term.get("matchExpressions"))
            for term in required.get("nodeSelectorTerms") or ()
        ),
        anti_affinity=tuple(
            AntiAffinityTerm(
                label_selector(term.get("labelSelector")),
                tuple(term.get("namespaces") or (namespace,)),
            )
            for term in anti
            if term.get("topologyKey") == HOSTNAME_KEY
        ),
    )


def _template(obj: Obj) -> tuple[Workload, frozenset[str]]:
    """A Deployment or ReplicaSet and the node labels its pod template prefers."""
    meta = obj["metadata"]
    template = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    workload = Workload(meta.get("namespace", "default"), obj["kind"], meta["name"])
    return workload, preferred_labels(template.get("affinity"))


def _pdb(obj: Obj) -> Pdb:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    return Pdb(
        namespace=meta.get("namespace", "default"),
        name=meta["name"],
        selector=label_selector(spec.get("selector")),
        disruptions_allowed=int(status.get("disruptionsAllowed", 0)),
    )


def _hpa(obj: Obj) -> Hpa:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    namespace = meta.get("namespace", "default")
    target = spec["scaleTargetRef"]
    return Hpa(
        namespace=namespace,
        name=meta["name"],
        target=Workload(namespace, target["kind"], target["name"]),
        min_replicas=int(spec.get("minReplicas", 1)),
        max_replicas=int(spec["maxReplicas"]),
    )
