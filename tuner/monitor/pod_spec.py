"""What a pod asks of its node, from its spec: its effective requests (Kubernetes' rule over
containers, init containers, sidecars and overhead, extended resources included) and its
scheduling rules (tolerations, node selector and affinity, pod affinity and anti-affinity,
topology spread, host ports), one object for equal rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from tuner.errors import InputError
from tuner.model.constraints import (
    ANY_IP,
    NAMESPACE_NAME_KEY,
    NOTHING,
    Constraints,
    HostPort,
    LabelSelector,
    PodAffinityTerm,
    PreferredTerm,
    Requirement,
    SpreadConstraint,
    Toleration,
    freeze_labels,
)
from tuner.model.resources import Resources
from tuner.monitor.fields import (
    Obj,
    frozen,
    label_selector,
    listed,
    objects,
    requirements,
    resources,
    scalars,
    text,
    texts,
    whole,
)
from tuner.monitor.prune import OBJECT


def effective_requests(spec: Obj) -> Resources:
    """Kubernetes' rule: max(regular containers + sidecars, any init step) + overhead."""
    regular = Resources.total(
        [
            resources((c.get("resources") or {}).get("requests"))
            for c in spec.get("containers") or ()
        ]
    )
    sidecars = Resources()
    init_peak = Resources()
    for container in spec.get("initContainers") or ():
        request = resources((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            sidecars = sidecars + request
            step = sidecars
        else:
            step = sidecars + request
        init_peak = Resources(max(init_peak.cpu, step.cpu), max(init_peak.memory, step.memory))
    running = regular + sidecars
    peak = Resources(max(running.cpu, init_peak.cpu), max(running.memory, init_peak.memory))
    return peak + resources(spec.get("overhead"))


def _beyond_cpu_memory(requests: Any) -> bool:
    """Whether a requests map may hold more than CPU and memory (checked by
    :func:`~tuner.monitor.fields.scalars`)."""
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
            found.append((container, scalars(requests, f"spec.{key}[{index}].resources.requests")))
    overhead = scalars(spec.get("overhead"), "spec.overhead")
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


INTERNED_MOST = 4096


_interned: dict[Constraints, Constraints] = {}


def _intern(constraints: Constraints) -> Constraints:
    """One object for equal constraints (a workload's pods share them): later questions about
    them (the snapshot's caches) compare by identity instead of field by field. Bounded: the
    table starts afresh once it holds :data:`INTERNED_MOST` kinds."""
    if len(_interned) >= INTERNED_MOST:
        _interned.clear()
    return _interned.setdefault(constraints, constraints)


def constraints(spec: Obj, namespace: str, labels: Mapping[str, str]) -> Constraints:
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
                    text(t.get(key, default), f"spec.tolerations[{i}].{key}")
                    for key, default in _TOLERATION_FIELDS
                )
            )
            for i, t in enumerate(objects(spec.get("tolerations"), "spec.tolerations"))
        ),
        node_selector=freeze_labels(frozen(spec.get("nodeSelector"), "spec.nodeSelector")),
        node_affinity=tuple(
            requirements(term.get("matchExpressions"), f"{terms}[{i}].matchExpressions")
            for i, term in enumerate(objects(required.get("nodeSelectorTerms"), terms))
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


def _pod_terms(
    rules: Obj, namespace: str, labels: Mapping[str, str], kind: str
) -> tuple[PodAffinityTerm, ...]:
    field = f"spec.affinity.{kind}.{REQUIRED}"
    return tuple(
        _pod_term(term, namespace, labels, f"{field}[{i}]", anti=kind == "podAntiAffinity")
        for i, term in enumerate(listed(rules.get(REQUIRED), field))
    )


def _preferred(
    rules: Obj, namespace: str, labels: Mapping[str, str], kind: str
) -> tuple[PreferredTerm, ...]:
    field = f"spec.affinity.{kind}.{PREFERRED}"
    out = []
    for i, choice in enumerate(objects(rules.get(PREFERRED), field)):
        weight = whole(choice.get("weight"), f"{field}[{i}].weight", 100)
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
    names = texts(term.get("namespaces"), f"{field}.namespaces")
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
    same = [k for k in listed(rule.get("matchLabelKeys"), f"{field}.matchLabelKeys") if k in labels]
    other = [
        k
        for k in listed(rule.get("mismatchLabelKeys"), f"{field}.mismatchLabelKeys")
        if k in labels
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
    for i, raw in enumerate(listed(constraints, field)):
        at = f"{field}[{i}]"
        if not isinstance(raw, OBJECT):
            raise InputError(f"{at} is not an object")
        skew = whole(raw.get("maxSkew"), f"{at}.maxSkew")
        if skew < 1:
            raise InputError(f"{at}.maxSkew is {skew!r}, not a whole number >= 1")
        key = raw.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise InputError(f"{at}.topologyKey is {key!r}, not a label key")
        when = raw.get("whenUnsatisfiable", "DoNotSchedule")
        if when not in WHEN:
            raise InputError(f"{at}.whenUnsatisfiable is {when!r}, not one of {sorted(WHEN)}")
        domains = raw.get("minDomains")
        least = 1 if domains is None else whole(domains, f"{at}.minDomains")
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
            for i, port in enumerate(listed(container.get("ports"), field)):
                if not isinstance(port, OBJECT) or not port.get("hostPort"):
                    continue
                number = whole(port["hostPort"], f"{field}[{i}].hostPort", MAX_PORT)
                protocol = port.get("protocol") or "TCP"
                ip = port.get("hostIP") or ANY_IP
                if not isinstance(protocol, str) or not isinstance(ip, str):
                    raise InputError(f"{field}[{i}] has a protocol or hostIP that is not a string")
                ports.append(HostPort(number, protocol, ip))
    return tuple(sorted(set(ports)))
