"""Scenario files: JSON checked against ``tuner/sim/scenario.schema.json`` and the rules a schema
cannot say, then built into a :class:`~tuner.sim.engine.Scenario`.

Every problem ends as one :class:`~tuner.errors.InputError` line naming the field (as a path,
``pools[0].initial``) and its value, before anything is simulated or written. The format is
documented in ``docs/scenarios.md``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from tuner.errors import InputError
from tuner.json_input import MAX_BYTES, read_bounded
from tuner.model.constraints import HOSTNAME_KEY, ZONE_KEY
from tuner.model.quantity import cpu_millis, memory_bytes
from tuner.sim.autoscaler import AutoscalerConfig
from tuner.sim.engine import Scenario
from tuner.sim.karpenter_disruption import KarpenterConfig
from tuner.sim.load import (
    HIGH_FREQUENCY,
    NARROW_PEAKS,
    WIDE_PEAKS,
    LoadPattern,
    Phase,
    Phases,
    TraceReplay,
    trace_step,
)
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.scenario_rules import (
    APPLICATIONS,
    DAY,
    check,
    check_fits,
    check_room,
    pool_names,
    start_days,
    trace_shortfall,
)
from tuner.sim.scenario_schema import parse_integer
from tuner.sim.workloads import (
    EKS_DAEMONSETS,
    EKS_SYSTEM,
    GKE_DAEMONSETS,
    GKE_SYSTEM,
    Application,
    HpaSpec,
    Service,
    Spread,
)

WARMUP = 1800.0
PATTERNS: dict[str, Phases] = {
    "wide-peaks": WIDE_PEAKS,
    "narrow-peaks": NARROW_PEAKS,
    "high-frequency": HIGH_FREQUENCY,
}
SYSTEMS = {"gke": (GKE_DAEMONSETS, GKE_SYSTEM), "eks": (EKS_DAEMONSETS, EKS_SYSTEM)}

log = logging.getLogger(__name__)


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
        NodeGroup(
            name,
            NODE_TYPES[p["node_type"]],
            int(p.get("min", 0)),
            int(p["max"]),
            int(p.get("initial", 0)),
            zone,
        )
        for p in doc["pools"]
        for name, zone in zip(pool_names(p), p.get("zones") or [""], strict=True)
    )
    daemonsets = (*daemons, *(s for s in custom if s.kind == "DaemonSet"))
    origin = [i for i, p in enumerate(doc["pools"]) for _ in pool_names(p)]
    check_room(pools, daemonsets, origin)
    check_fits(pools, daemonsets, placed)
    return Scenario(
        name=doc["name"],
        title=doc.get("title", doc["name"]),
        services=tuple(services),
        daemonsets=daemonsets,
        loads=loads,
        pools=pools,
        duration=duration,
        autoscaler=AutoscalerConfig(expander=doc.get("expander", "random")),
        karpenter=_karpenter(doc.get("karpenter", {})),
        system=system,
        sources=tuple(dict.fromkeys(s["source"] for s in doc.get("services", ()) if "source" in s)),
        seed=doc.get("seed"),
    ).compressed(float(doc.get("speedup", 1)))


def _karpenter(doc: dict[str, Any]) -> KarpenterConfig:
    """A scenario's ``karpenter`` NodePool disruption settings over Karpenter's defaults."""
    default = KarpenterConfig()
    return KarpenterConfig(
        consolidation_policy=doc.get("consolidation_policy", default.consolidation_policy),
        consolidate_after=float(doc.get("consolidate_after_s", default.consolidate_after)),
    )


def read(path: Path, hours: float | None = None) -> Scenario:
    """A scenario file, checked (one-line InputError naming the file and the field)."""
    name = str(path).encode("unicode_escape").decode("ascii")
    text = read_bounded(path, "scenario", MAX_BYTES).decode("utf-8")
    try:
        return build(json.loads(text, parse_int=parse_integer), hours)
    except json.JSONDecodeError as err:
        raise InputError(f"scenario {name}: not JSON: {err}") from err
    except RecursionError as err:
        raise InputError(f"scenario {name}: nested too deeply") from err
    except InputError as err:
        raise InputError(f"scenario {name}: {err}") from err
