"""Scenario files: JSON checked against ``tuner/sim/scenario.schema.json`` and the rules a schema
cannot say, then built into a :class:`~tuner.sim.engine.Scenario`.

Every problem ends as one :class:`~tuner.errors.InputError` line naming the field (as a path,
``pools[0].initial``) and its value, before anything is simulated or written. The format is
documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from tuner.errors import InputError
from tuner.model.quantity import cpu_millis, memory_bytes
from tuner.sim.autoscaler import AutoscalerConfig
from tuner.sim.engine import Scenario
from tuner.sim.load import (
    HIGH_FREQUENCY,
    NARROW_PEAKS,
    WIDE_PEAKS,
    LoadPattern,
    Phase,
    Phases,
    TraceReplay,
    trace_series,
    trace_step,
)
from tuner.sim.pools import NodePool
from tuner.sim.prices import NODE_TYPES
from tuner.sim.workloads import (
    EKS_DAEMONSETS,
    EKS_SYSTEM,
    GKE_DAEMONSETS,
    GKE_SYSTEM,
    ONLINE_BOUTIQUE,
    PHP_APACHE,
    ROBOT_SHOP,
    SOCIAL_NETWORK,
    SOCK_SHOP,
    Application,
    HpaSpec,
    Service,
)

DAY = 86400.0
WARMUP = 1800.0
APPLICATIONS = {
    a.name: a for a in (PHP_APACHE, ONLINE_BOUTIQUE, SOCK_SHOP, ROBOT_SHOP, SOCIAL_NETWORK)
}
PATTERNS: dict[str, Phases] = {
    "wide-peaks": WIDE_PEAKS,
    "narrow-peaks": NARROW_PEAKS,
    "high-frequency": HIGH_FREQUENCY,
}
SYSTEMS = {"gke": (GKE_DAEMONSETS, GKE_SYSTEM), "eks": (EKS_DAEMONSETS, EKS_SYSTEM)}
MAX_CPU = 256_000
"""Millicores a single pod may request (no node type here is bigger)."""
MAX_MEMORY = 2**40


@cache
def schema() -> dict[str, Any]:
    """The scenario file's JSON Schema, shipped in the package."""
    text = resources.files("tuner.sim").joinpath("scenario.schema.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def _where(path: Iterator[str | int] | Any) -> str:
    """A field's path as ``pools[0].initial``; odd keys quoted (``[' \\n']``), so one line."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _non_finite(doc: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    if isinstance(doc, float) and not math.isfinite(doc):
        return path
    items: Any = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        found = _non_finite(value, (*path, key))
        if found is not None:
            return found
    return None


def _message(error: ValidationError) -> str:
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties":
        rule: Any = error.schema
        instance: Any = error.instance
        unknown = sorted(k for k in instance if k not in rule.get("properties", {}))
        return f"{where}: unknown key {unknown[0]!r}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    return f"{where}: {_short(error.instance)} is not allowed ({error.message.splitlines()[0]})"


def check(doc: Any) -> None:
    """Raise InputError naming the first field that breaks the schema or a rule."""
    bad = _non_finite(doc)
    if bad is not None:
        raise InputError(f"{_where(bad)}: {_short(_at(doc, bad))} is not a finite number")
    error = best_match(Draft202012Validator(schema()).iter_errors(doc))
    if error is not None:
        raise InputError(_message(error)[:300])
    _check_rules(doc)


def _at(doc: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _check_load(where: str, entry: dict[str, Any], duration: float, first_day: int = 0) -> None:
    given = [k for k in ("pattern", "trace", "constant") if k in entry]
    if len(given) != 1:
        raise InputError(f"{where}: give exactly one of 'pattern', 'trace' or 'constant'")
    if "trace" in entry:
        if "peak" not in entry:
            raise InputError(f"{where}.peak: a trace needs the load at its peak")
        days = len(trace_series(entry["trace"])) * trace_step(entry["trace"]) / DAY
        span = math.ceil((duration + WARMUP) / DAY) + 1
        first = entry.get("first_day", first_day)
        if first + span > days:
            raise InputError(
                f"{where}.first_day: {first} leaves less than the "
                f"{span} days the run needs of trace {entry['trace']} ({days:g} days)"
            )
    elif "peak" in entry or "first_day" in entry:
        raise InputError(f"{where}: 'peak' and 'first_day' go with a 'trace'")


def _check_rules(doc: dict[str, Any]) -> None:
    duration = float(doc.get("hours", 24)) * 3600
    names: set[str] = set()
    for i, pool in enumerate(doc["pools"]):
        where = f"pools[{i}]"
        if pool["name"] in names:
            raise InputError(f"{where}.name: {pool['name']!r} names two pools")
        names.add(pool["name"])
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
        load = {k: v for k, v in entry.items() if k not in ("app", "copies")}
        _check_load(where, load, duration, first_day=1)
    seen: set[tuple[str, str]] = set()
    for i, service in enumerate(doc.get("services", ())):
        _check_service(f"services[{i}]", service, seen, namespaces)
    for namespace, load in doc.get("loads", {}).items():
        if namespace not in {ns for ns, _ in seen}:
            raise InputError(f"loads.{namespace}: no service runs in namespace {namespace!r}")
        _check_load(f"loads.{namespace}", load, duration)


def _check_service(
    where: str, service: dict[str, Any], seen: set[tuple[str, str]], apps: set[str]
) -> None:
    key = (service["namespace"], service["name"])
    if key in seen:
        raise InputError(f"{where}.name: {service['name']!r} twice in {service['namespace']!r}")
    if service["namespace"] in apps:
        raise InputError(f"{where}.namespace: {service['namespace']!r} is an application's")
    seen.add(key)
    for field, parse, most in (("cpu", cpu_millis, MAX_CPU), ("memory", memory_bytes, MAX_MEMORY)):
        if parse(service[field]) > most:
            raise InputError(f"{where}.{field}: {service[field]!r} is more than any node has")
    hpa = service.get("hpa")
    if hpa is not None:
        if service.get("kind") == "DaemonSet":
            raise InputError(f"{where}.hpa: a DaemonSet has no HorizontalPodAutoscaler")
        if hpa.get("min", 1) > hpa["max"]:
            raise InputError(f"{where}.hpa.min: {hpa.get('min', 1)} is above max {hpa['max']}")


def _check_room(pools: tuple[NodePool, ...], daemonsets: tuple[Service, ...]) -> None:
    """Every pool's node type leaves room for a pod once the DaemonSets run on it."""
    cpu, memory = sum(d.cpu for d in daemonsets), sum(d.memory for d in daemonsets)
    for i, pool in enumerate(pools):
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


# -- building ----------------------------------------------------------------------------------


def load_pattern(entry: dict[str, Any], first_day: int, duration: float) -> LoadPattern:
    """A load: a thesis pattern, a constant, or a trace replayed from ``first_day``."""
    if "pattern" in entry:
        return PATTERNS[entry["pattern"]]
    if "constant" in entry:
        return Phases(WARMUP, (Phase(WARMUP + duration, float(entry["constant"])),))
    trace = entry["trace"]
    per_day = int(DAY // trace_step(trace))
    return TraceReplay.of(trace, first_day * per_day, duration, float(entry["peak"]))


def copies(
    app: Application, count: int, load: dict[str, Any], duration: float
) -> tuple[tuple[Service, ...], dict[str, LoadPattern]]:
    """``count`` copies of an application, ``<app>-1`` ..., each a trace's next day."""
    services: list[Service] = []
    loads: dict[str, LoadPattern] = {}
    first = int(load.get("first_day", 1 if "trace" in load else 0))
    days = 1
    if "trace" in load:
        per_day = int(DAY // trace_step(load["trace"]))
        span_days = int(duration // DAY) + 1
        days = max(len(trace_series(load["trace"])) // per_day - span_days, 1)
    for i in range(count):
        namespace = f"{app.name}-{i + 1}"
        services += app.in_namespace(namespace)
        loads[namespace] = load_pattern(load, (first + i) % days, duration)
    return tuple(services), loads


def _service(entry: dict[str, Any]) -> Service:
    hpa = entry.get("hpa")
    return Service(
        name=entry["name"],
        cpu=cpu_millis(entry["cpu"]),
        memory=memory_bytes(entry["memory"]),
        kind=entry.get("kind", "Deployment"),
        replicas=int(entry.get("replicas", 1)),
        hpa=None
        if hpa is None
        else HpaSpec(int(hpa.get("min", 1)), int(hpa["max"]), float(hpa["target"])),
        cpu_per_load=float(entry.get("cpu_per_load", 0.0)),
        fixed_cpu=float(entry.get("fixed_cpu", 0.0)),
        namespace=entry["namespace"],
        pdb_max_unavailable=entry.get("pdb_max_unavailable"),
    )


def build(doc: dict[str, Any], hours: float | None = None) -> Scenario:
    """A checked scenario document as a Scenario (``hours`` overrides the file's)."""
    check(doc)
    duration = (hours if hours is not None else float(doc.get("hours", 24))) * 3600
    system = doc.get("system", "gke")
    daemons, system_services = SYSTEMS[system]
    custom = [_service(s) for s in doc.get("services", ())]
    services: list[Service] = list(system_services) if doc.get("system_pods", True) else []
    services += [s for s in custom if s.kind != "DaemonSet"]
    loads: dict[str, LoadPattern] = {}
    for entry in doc.get("applications", ()):
        load = {k: v for k, v in entry.items() if k not in ("app", "copies")}
        more, more_loads = copies(
            APPLICATIONS[entry["app"]], int(entry.get("copies", 1)), load, duration
        )
        services += more
        loads.update(more_loads)
    for namespace, load in doc.get("loads", {}).items():
        loads[namespace] = load_pattern(load, int(load.get("first_day", 0)), duration)
    pools = tuple(
        NodePool(
            p["name"],
            NODE_TYPES[p["node_type"]],
            int(p.get("min", 0)),
            int(p["max"]),
            int(p.get("initial", 0)),
        )
        for p in doc["pools"]
    )
    daemonsets = (*daemons, *(s for s in custom if s.kind == "DaemonSet"))
    _check_room(pools, daemonsets)
    return Scenario(
        name=doc["name"],
        title=doc.get("title", doc["name"]),
        services=tuple(services),
        daemonsets=daemonsets,
        loads=loads,
        pools=pools,
        duration=duration,
        autoscaler=AutoscalerConfig(expander=doc.get("expander", "random")),
        system=system,
        sources=tuple(dict.fromkeys(s["source"] for s in doc.get("services", ()) if "source" in s)),
        seed=doc.get("seed"),
    ).compressed(float(doc.get("speedup", 1)))


def read(path: Path, hours: float | None = None) -> Scenario:
    """A scenario file, checked (one-line InputError naming the file and the field)."""
    name = str(path).encode("unicode_escape").decode("ascii")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read scenario {name}: {err}") from err
    try:
        return build(json.loads(text), hours)
    except json.JSONDecodeError as err:
        raise InputError(f"scenario {name}: not JSON: {err}") from err
    except RecursionError as err:
        raise InputError(f"scenario {name}: nested too deeply") from err
    except InputError as err:
        raise InputError(f"scenario {name}: {err}") from err
