"""The rules of a scenario file that its JSON Schema cannot say (two pools of one name, min above
max, a trace too short for the run, a pod no pool's node has room for, ...), each broken one an
:class:`~tuner.errors.InputError` line naming the field and its value."""

from __future__ import annotations

from typing import Any

from tuner.errors import InputError
from tuner.model.quantity import cpu_millis, format_cpu, format_memory, memory_bytes
from tuner.model.resources import Resources
from tuner.model.scheduling import resource_fit
from tuner.sim.load import samples_needed, trace_series, trace_step
from tuner.sim.pools import NodeGroup
from tuner.sim.scenario_schema import schema_problem, short, shortened
from tuner.sim.workloads import (
    ONLINE_BOUTIQUE,
    PHP_APACHE,
    ROBOT_SHOP,
    SOCIAL_NETWORK,
    SOCK_SHOP,
    Service,
)

DAY = 86400.0
APPLICATIONS = {
    a.name: a for a in (PHP_APACHE, ONLINE_BOUTIQUE, SOCK_SHOP, ROBOT_SHOP, SOCIAL_NETWORK)
}
MAX_CPU = 256_000
"""Millicores a single pod may request (no node type here is bigger)."""
MAX_MEMORY = 2**40


def check(doc: Any, hours: float | None = None) -> None:
    """Raise InputError naming the first field that breaks the schema or a rule; ``hours``
    (``--hours``) overrides the file's for the rules that depend on the length of the run."""
    problem = schema_problem(doc)
    if problem is not None:
        raise InputError(problem)
    _check_rules(doc, hours)


def start_days(trace: str, duration: float) -> int:
    """How many days of ``trace`` a replay of ``duration`` seconds can start on (day 0, 1, ...):
    the replay reads :func:`~tuner.sim.load.samples_needed` samples from the day's first."""
    step = trace_step(trace)
    spare = len(trace_series(trace)) - samples_needed(duration, step)
    return spare // int(DAY // step) + 1 if spare >= 0 else 0


def trace_shortfall(trace: str, first_day: int, duration: float) -> str | None:
    """Why a replay of ``duration`` seconds cannot start on ``first_day`` of ``trace``, or
    None."""
    if first_day < start_days(trace, duration):
        return None
    step = trace_step(trace)
    total = (len(trace_series(trace)) - 1) * step
    left = max(total - first_day * DAY, 0.0)
    return (
        f"{first_day} leaves {left / DAY:.2f} days of trace {trace} ({total / DAY:.2f} days), "
        f"less than the {duration / DAY:.2f} days of {duration / 3600:g} simulated hours"
    )


def _check_load(
    where: str, entry: dict[str, Any], duration: float, overridden: bool, first_day: int = 0
) -> None:
    given = [k for k in ("pattern", "trace", "constant") if k in entry]
    if len(given) != 1:
        raise InputError(f"{where}: give exactly one of 'pattern', 'trace' or 'constant'")
    if "trace" in entry:
        if "peak" not in entry:
            raise InputError(f"{where}.peak: a trace needs the load at its peak")
        short = trace_shortfall(entry["trace"], entry.get("first_day", first_day), duration)
        if short is not None:
            raise InputError(f"{where}.first_day: {short}{' (--hours)' if overridden else ''}")
    elif "peak" in entry or "first_day" in entry:
        raise InputError(f"{where}: 'peak' and 'first_day' go with a 'trace'")


def _check_rules(doc: dict[str, Any], hours: float | None) -> None:
    duration = (hours if hours is not None else float(doc.get("hours", 24))) * 3600
    overridden = hours is not None
    names: set[str] = set()
    for i, pool in enumerate(doc["pools"]):
        where = f"pools[{i}]"
        for name in pool_names(pool):
            if name in names:
                raise InputError(f"{where}.name: {name!r} names two pools")
            names.add(name)
        low, high, initial = pool.get("min", 0), pool["max"], pool.get("initial", 0)
        if low > high:
            raise InputError(f"{where}.min: {low} is above max {high}")
        if not low <= initial <= high:
            raise InputError(f"{where}.initial: {initial} is outside min {low} .. max {high}")
    if not doc.get("applications") and not doc.get("services"):
        raise InputError("applications: give applications, services, or both")
    namespaces: set[str] = set()
    for i, entry in enumerate(doc.get("applications", ())):
        where = f"applications[{i}]"
        app = entry["app"]
        if any(n.startswith(f"{app}-") for n in namespaces):
            raise InputError(f"{where}.app: {app!r} is listed twice (use copies)")
        namespaces |= {f"{app}-{c + 1}" for c in range(entry.get("copies", 1))}
        load = {k: v for k, v in entry.items() if k not in ("app", "copies", "rules")}
        _check_load(where, load, duration, overridden, first_day=1)
        known = {s.name for s in APPLICATIONS[app].services}
        for name in entry.get("rules", {}):
            if name not in known:
                raise InputError(f"{where}.rules.{name}: {app!r} has no service {name!r}")
    seen: set[tuple[str, str]] = set()
    for i, service in enumerate(doc.get("services", ())):
        _check_service(f"services[{i}]", service, seen, namespaces)
    for namespace, load in doc.get("loads", {}).items():
        if namespace not in {ns for ns, _ in seen}:
            raise InputError(f"loads.{namespace}: no service runs in namespace {namespace!r}")
        _check_load(f"loads.{namespace}", load, duration, overridden)


def _check_service(
    where: str, service: dict[str, Any], seen: set[tuple[str, str]], apps: set[str]
) -> None:
    key = (service["namespace"], service["name"])
    if key in seen:
        raise InputError(f"{where}.name: {service['name']!r} twice in {service['namespace']!r}")
    if service["namespace"] in apps:
        raise InputError(f"{where}.namespace: {service['namespace']!r} is an application's")
    seen.add(key)
    requests: dict[str, int] = {}
    for field, parse, most in (("cpu", cpu_millis, MAX_CPU), ("memory", memory_bytes, MAX_MEMORY)):
        value = service[field]
        try:
            requests[field] = parse(value)
        except InputError as err:
            raise InputError(f"{where}.{field}: {shortened(str(err), value)}") from None
        if requests[field] > most:
            raise InputError(f"{where}.{field}: {short(value)} is more than any node has")
    hpa = service.get("hpa")
    if hpa is not None:
        if service.get("kind") == "DaemonSet":
            raise InputError(f"{where}.hpa: a DaemonSet has no HorizontalPodAutoscaler")
        if hpa.get("min", 1) > hpa["max"]:
            raise InputError(f"{where}.hpa.min: {hpa.get('min', 1)} is above max {hpa['max']}")
        if requests["cpu"] == 0:
            raise InputError(
                f"{where}.hpa: an HPA on CPU utilisation needs a CPU request, and cpu is "
                f"{short(service['cpu'])} (the HPA controller fails: no metrics returned "
                "matched known pods)"
            )


def check_room(
    pools: tuple[NodeGroup, ...], daemonsets: tuple[Service, ...], origin: list[int]
) -> None:
    """Every pool's node type leaves room for a pod once the DaemonSets run on it (``origin``:
    each pool's index in the file, a pool over several zones being several)."""
    cpu, memory = sum(d.cpu for d in daemonsets), sum(d.memory for d in daemonsets)
    for i, pool in zip(origin, pools, strict=True):
        kind = pool.node_type
        for what, used, has in (
            ("CPU millicores", cpu, kind.allocatable.cpu),
            ("memory bytes", memory, kind.allocatable.memory),
            ("pod slots", len(daemonsets), kind.max_pods),
        ):
            if used >= has:
                raise InputError(
                    f"pools[{i}].node_type: {kind.name!r} has {has} {what} allocatable "
                    f"and the DaemonSets take {used}, leaving no room for other pods"
                )


def check_fits(
    pools: tuple[NodeGroup, ...],
    daemonsets: tuple[Service, ...],
    services: list[tuple[str, Service, bool]],
) -> None:
    """Every pod fits on some pool's node beside the DaemonSets (the scheduler's resource
    rule), else it would stay pending for ever while the lower bound counts its requests.
    ``services``: (where, service, whether ``where`` has ``cpu`` and ``memory`` fields)."""
    used = Resources(sum(d.cpu for d in daemonsets), sum(d.memory for d in daemonsets))
    rooms = [
        (p.node_type.allocatable - used, p.node_type.max_pods - len(daemonsets)) for p in pools
    ]
    roomiest = Resources(max(r.cpu for r, _ in rooms), max(r.memory for r, _ in rooms))
    for base, service, fields in services:
        requests = Resources(service.cpu, service.memory)
        if any(resource_fit(requests, room, free) is None for room, free in rooms):
            continue
        where = base
        if fields and service.cpu > roomiest.cpu:
            where += ".cpu"
        elif fields and service.memory > roomiest.memory:
            where += ".memory"
        pod = f"{service.namespace}/{service.name}"
        asks = f"{format_cpu(service.cpu)} CPU and {format_memory(service.memory)} memory"
        raise InputError(
            f"{where}: pod {pod} asks {asks}; no pool's node has that room beside its "
            f"DaemonSets (at most {format_cpu(roomiest.cpu)} CPU, "
            f"{format_memory(roomiest.memory)} memory): it would stay pending for ever"
        )


def pool_names(pool: dict[str, Any]) -> list[str]:
    """A pool's node groups: itself, or one per zone (``<name>-<zone>``)."""
    zones = pool.get("zones")
    return [f"{pool['name']}-{z}" for z in zones] if zones else [pool["name"]]
