"""Scenario files: JSON checked against ``tuner/sim/scenario.schema.json`` and the rules a schema
cannot say, then built into a :class:`~tuner.sim.engine.Scenario`.

Every problem ends as one :class:`~tuner.errors.InputError` line naming the field (as a path,
``pools[0].initial``) and its value, before anything is simulated or written. The format is
documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from tuner.errors import InputError
from tuner.json_input import MAX_BYTES, read_bounded
from tuner.model.constraints import HOSTNAME_KEY, ZONE_KEY
from tuner.model.quantity import cpu_millis, format_cpu, format_memory, memory_bytes
from tuner.model.resources import Resources
from tuner.model.scheduling import resource_fit
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
    samples_needed,
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
    Spread,
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
MAX_DIGITS = 40
"""Longest integer read (more digits are refused naming the field, before Python's own limit
of 4,300 digits would end the reading with no field named)."""

CONTROL = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Unicode categories no text of a scenario file may hold: control and format characters, line
and paragraph separators, lone surrogates."""

log = logging.getLogger(__name__)


@cache
def schema() -> dict[str, Any]:
    """The scenario file's JSON Schema, shipped in the package."""
    text = resources.files("tuner.sim").joinpath("scenario.schema.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def _whole(_checker: Any, instance: Any) -> bool:
    """JSON Schema's ``integer`` as the simulator reads it: no ``2.0`` (the draft allows it),
    no boolean."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _whole),
)


class _LongInteger(str):
    """An integer of more than :data:`MAX_DIGITS` digits, kept as its text so that the check
    names its field."""


def _integer(text: str) -> int | _LongInteger:
    return _LongInteger(text) if len(text.lstrip("-")) > MAX_DIGITS else int(text)


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


def _shortened(reason: str, value: Any) -> str:
    """``reason`` with ``value`` in it shortened (a message keeps its end: what is wrong)."""
    return reason.replace(repr(value), _short(value))


def _unreadable(doc: Any, path: tuple[str | int, ...] = ()) -> str | None:
    """What is wrong with the first value the simulator cannot take, with its field: NaN, an
    infinity, an integer of more than :data:`MAX_DIGITS` digits, or text (a value or a key)
    with a control or format character (a newline would end the one-line error or the table's
    heading early, an escape sequence would reach the terminal)."""
    if isinstance(doc, _LongInteger):
        return f"{_where(path)}: an integer of {len(doc):,} digits is out of range"
    if isinstance(doc, float) and not math.isfinite(doc):
        return f"{_where(path)}: {_short(doc)} is not a finite number"
    if isinstance(doc, str) and _controlled(doc):
        return f"{_where(path)}: {_short(doc)} has a control character"
    items: Any = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        if isinstance(key, str) and _controlled(key):
            return f"{_where(path)}: key {_short(key)} has a control character"
        found = _unreadable(value, (*path, key))
        if found is not None:
            return found
    return None


def _controlled(text: str) -> bool:
    return any(unicodedata.category(c) in CONTROL for c in text)


def _message(error: ValidationError) -> str:
    """One line: the field, its value (shortened) and the reason (whole, with the value in it
    shortened too)."""
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties":
        rule: Any = error.schema
        instance: Any = error.instance
        unknown = sorted(k for k in instance if k not in rule.get("properties", {}))
        return f"{where}: unknown key {_short(unknown[0])}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    reason = _shortened(error.message.splitlines()[0], error.instance)
    return f"{where}: {_short(error.instance)} is not allowed ({reason})"


def check(doc: Any, hours: float | None = None) -> None:
    """Raise InputError naming the first field that breaks the schema or a rule; ``hours``
    (``--hours``) overrides the file's for the rules that depend on the length of the run."""
    bad = _unreadable(doc)
    if bad is not None:
        raise InputError(bad)
    error = best_match(_Validator(schema()).iter_errors(doc))
    if error is not None:
        raise InputError(_message(error))
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
        for name in _pool_names(pool):
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
            raise InputError(f"{where}.{field}: {_shortened(str(err), value)}") from None
        if requests[field] > most:
            raise InputError(f"{where}.{field}: {_short(value)} is more than any node has")
    hpa = service.get("hpa")
    if hpa is not None:
        if service.get("kind") == "DaemonSet":
            raise InputError(f"{where}.hpa: a DaemonSet has no HorizontalPodAutoscaler")
        if hpa.get("min", 1) > hpa["max"]:
            raise InputError(f"{where}.hpa.min: {hpa.get('min', 1)} is above max {hpa['max']}")
        if requests["cpu"] == 0:
            raise InputError(
                f"{where}.hpa: an HPA on CPU utilisation needs a CPU request, and cpu is "
                f"{_short(service['cpu'])} (the HPA controller fails: no metrics returned "
                "matched known pods)"
            )


def _check_room(
    pools: tuple[NodePool, ...], daemonsets: tuple[Service, ...], origin: list[int]
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


def _check_fits(
    pools: tuple[NodePool, ...],
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
    app: Application, count: int, load: dict[str, Any], duration: float, where: str = ""
) -> tuple[tuple[Service, ...], dict[str, LoadPattern]]:
    """``count`` copies of an application, ``<app>-1`` ..., each a trace's next day from
    ``first_day``; copies past the last day a replay can start on wrap around to day 0, with a
    warning naming ``where`` (the application's field)."""
    services: list[Service] = []
    loads: dict[str, LoadPattern] = {}
    first = int(load.get("first_day", 1 if "trace" in load else 0))
    days = first + count
    if "trace" in load:
        short = trace_shortfall(load["trace"], first, duration)
        if short is not None:
            raise InputError(f"{where or app.name}.first_day: {short}")
        days = start_days(load["trace"], duration)
        if first + count > days:
            log.warning(
                "%s.copies: trace %s holds %d days to start a %g-hour replay on; copies %d "
                "to %d wrap around to day 0 (copy n replays day (%d + n - 1) mod %d)",
                where or app.name,
                load["trace"],
                days,
                duration / 3600,
                max(days - first, 0) + 1,
                count,
                first,
                days,
            )
    for i in range(count):
        namespace = f"{app.name}-{i + 1}"
        services += app.in_namespace(namespace)
        loads[namespace] = load_pattern(load, (first + i) % days, duration)
    return tuple(services), loads


TOPOLOGY_KEYS = {"zone": ZONE_KEY, "hostname": HOSTNAME_KEY}


def _pool_names(pool: dict[str, Any]) -> list[str]:
    """A pool's node groups: itself, or one per zone (``<name>-<zone>``)."""
    zones = pool.get("zones")
    return [f"{pool['name']}-{z}" for z in zones] if zones else [pool["name"]]


def _rules(entry: dict[str, Any]) -> dict[str, Any]:
    """A service's placement rules as :class:`Service` fields."""
    return {
        "spread": tuple(
            Spread(
                TOPOLOGY_KEYS[s["topology_key"]],
                int(s.get("max_skew", 1)),
                s.get("when_unsatisfiable", "DoNotSchedule") == "DoNotSchedule",
            )
            for s in entry.get("spread", ())
        ),
        "anti_affinity": TOPOLOGY_KEYS.get(entry.get("anti_affinity", ""), ""),
    }


def with_rules(services: tuple[Service, ...], rules: dict[str, Any]) -> tuple[Service, ...]:
    """The services with the placement rules given by name (an application's ``rules``)."""
    return tuple(replace(s, **_rules(rules[s.name])) if s.name in rules else s for s in services)


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
        **_rules(entry),
    )


def build(doc: dict[str, Any], hours: float | None = None) -> Scenario:
    """A checked scenario document as a Scenario (``hours`` overrides the file's)."""
    check(doc, hours)
    duration = (hours if hours is not None else float(doc.get("hours", 24))) * 3600
    system = doc.get("system", "gke")
    daemons, system_services = SYSTEMS[system]
    custom = [_service(s) for s in doc.get("services", ())]
    services: list[Service] = list(system_services) if doc.get("system_pods", True) else []
    placed = [("system", s, False) for s in services]
    services += [s for s in custom if s.kind != "DaemonSet"]
    placed += [(f"services[{i}]", s, True) for i, s in enumerate(custom) if s.kind != "DaemonSet"]
    loads: dict[str, LoadPattern] = {}
    for i, entry in enumerate(doc.get("applications", ())):
        load = {k: v for k, v in entry.items() if k not in ("app", "copies", "rules")}
        where = f"applications[{i}]"
        more, more_loads = copies(
            APPLICATIONS[entry["app"]], entry.get("copies", 1), load, duration, where
        )
        services += with_rules(more, entry.get("rules", {}))
        placed += [(f"{where}.app", s, False) for s in more[: len(more) // entry.get("copies", 1)]]
        loads.update(more_loads)
    for namespace, load in doc.get("loads", {}).items():
        loads[namespace] = load_pattern(load, int(load.get("first_day", 0)), duration)
    pools = tuple(
        NodePool(
            name,
            NODE_TYPES[p["node_type"]],
            int(p.get("min", 0)),
            int(p["max"]),
            int(p.get("initial", 0)),
            zone,
        )
        for p in doc["pools"]
        for name, zone in zip(_pool_names(p), p.get("zones") or [""], strict=True)
    )
    daemonsets = (*daemons, *(s for s in custom if s.kind == "DaemonSet"))
    origin = [i for i, p in enumerate(doc["pools"]) for _ in _pool_names(p)]
    _check_room(pools, daemonsets, origin)
    _check_fits(pools, daemonsets, placed)
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
    text = read_bounded(path, "scenario", MAX_BYTES).decode("utf-8")
    try:
        return build(json.loads(text, parse_int=_integer), hours)
    except json.JSONDecodeError as err:
        raise InputError(f"scenario {name}: not JSON: {err}") from err
    except RecursionError as err:
        raise InputError(f"scenario {name}: nested too deeply") from err
    except InputError as err:
        raise InputError(f"scenario {name}: {err}") from err
