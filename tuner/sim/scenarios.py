"""The named scenarios and scenario files.

Thesis scenarios (php-apache on the thesis' GKE pool of n1-standard-2 nodes, 1-8 nodes, with
GKE's system pods and the thesis' monitoring stack, its phase-3 Artillery patterns, 3.5 h after a
30-minute warm-up): ``thesis-wide``, ``thesis-narrow``, ``thesis-high-frequency``.

A diurnal day: ``diurnal`` (php-apache on e2-standard-2, Alibaba 2018's second day, peaking at
the thesis' highest rate, 37 req/s).

Multi-service scenarios (several copies of one application, one per namespace, each copy's
load a different day of a real trace): ``online-boutique`` (6 copies, Alibaba 2018,
e2-standard-4), ``sock-shop`` (6 copies, Google 2019, AWS m5.xlarge), ``robot-shop`` (10
copies, Azure v2, AWS m5.large), ``social-network`` (4 copies, Google 2019, e2-standard-4).

For ``tuner demo`` only (not in ``--scenario all``): ``demo``, Online Boutique x3 at a steady
load on six e2-standard-2 nodes as a peak left them, every node above the Cluster Autoscaler's
50 % scale-down threshold.

A scenario file is JSON::

    {"name": "mine", "node_type": "e2-standard-4", "initial_nodes": 3, "max_nodes": 40,
     "hours": 24, "system": "gke",
     "applications": [{"app": "sock-shop", "copies": 4, "trace": "google2019",
                       "first_day": 1, "peak": 40}]}

where an application may give ``"pattern": "wide-peaks" | "narrow-peaks" | "high-frequency"``
instead of a trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.errors import InputError
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
    THESIS_MONITORING,
    Application,
    Service,
)

DEFAULT_POOL = "pool"
"""Node names start with their pool's name; single-pool scenarios keep the ``pool-NNNN`` names
they had before pools existed (the scheduler breaks ties in name order)."""
DAY = 86400.0
APPLICATIONS = {
    a.name: a for a in (PHP_APACHE, ONLINE_BOUTIQUE, SOCK_SHOP, ROBOT_SHOP, SOCIAL_NETWORK)
}
PATTERNS: dict[str, Phases] = {
    "wide-peaks": WIDE_PEAKS,
    "narrow-peaks": NARROW_PEAKS,
    "high-frequency": HIGH_FREQUENCY,
}
SYSTEMS = {"gke": (GKE_DAEMONSETS, GKE_SYSTEM), "eks": (EKS_DAEMONSETS, EKS_SYSTEM)}


def _pool(node_type: str, initial: int, most: int) -> NodePool:
    """The one pool of a single-pool scenario (at least one node, as before pools existed)."""
    return NodePool(DEFAULT_POOL, NODE_TYPES[node_type], 1, most, initial)


def _thesis(name: str, pattern: Phases, title: str) -> Callable[[float | None], Scenario]:
    def build(hours: float | None) -> Scenario:
        daemons = (*GKE_DAEMONSETS, *(s for s in THESIS_MONITORING if s.kind == "DaemonSet"))
        services = (
            *PHP_APACHE.in_namespace("demo"),
            *(s for s in THESIS_MONITORING if s.kind != "DaemonSet"),
            *GKE_SYSTEM,
        )
        return Scenario(
            name=name,
            title=title,
            services=services,
            daemonsets=daemons,
            loads={"demo": pattern},
            pools=(_pool("n1-standard-2", 2, 8),),
            duration=pattern.duration if hours is None else hours * 3600,
            sources=("thesis §5.1-5.2.3", "DynamicTopologySelection demo/artillery/new_patterns"),
        )

    return build


def _copies(
    app: Application, copies: int, trace: str, first_day: int, peak: float, duration: float
) -> tuple[tuple[Service, ...], dict[str, LoadPattern]]:
    services: list[Service] = []
    loads: dict[str, LoadPattern] = {}
    per_day = int(DAY // trace_step(trace))
    days = len(trace_series(trace)) // per_day
    span_days = int(duration // DAY) + 1
    for i in range(copies):
        namespace = f"{app.name}-{i + 1}"
        day = (first_day + i) % max(days - span_days, 1)
        services += app.in_namespace(namespace)
        loads[namespace] = TraceReplay.of(trace, day * per_day, duration, peak)
    return tuple(services), loads


def _multi(
    name: str,
    title: str,
    *,
    app: Application,
    copies: int,
    trace: str,
    peak: float,
    node_type: str,
    system: str,
    initial_nodes: int,
    max_nodes: int,
) -> Callable[[float | None], Scenario]:
    def build(hours: float | None) -> Scenario:
        duration = DAY if hours is None else hours * 3600
        services, loads = _copies(app, copies, trace, 1, peak, duration)
        daemons, system_services = SYSTEMS[system]
        return Scenario(
            name=name,
            title=title,
            services=(*services, *system_services),
            daemonsets=daemons,
            loads=loads,
            pools=(_pool(node_type, initial_nodes, max_nodes),),
            duration=duration,
            system=system,
            sources=(app.name, trace),
        )

    return build


def _demo(hours: float | None) -> Scenario:
    """Online Boutique x3 at a steady 20 req/s each on six e2-standard-2 nodes, as a peak left
    them: the pods are spread over every node, each above the Cluster Autoscaler's 50 %."""
    duration = 2 * 3600.0 if hours is None else hours * 3600
    services: list[Service] = []
    loads: dict[str, LoadPattern] = {}
    for i in range(3):
        namespace = f"{ONLINE_BOUTIQUE.name}-{i + 1}"
        services += ONLINE_BOUTIQUE.in_namespace(namespace)
        loads[namespace] = Phases(1800, (Phase(1800 + duration, 20.0),))
    daemons, system = SYSTEMS["eks"]
    return Scenario(
        name="demo",
        title="Online Boutique x3, steady load, on six e2-standard-2 nodes left by a peak",
        services=(*services, *system),
        daemonsets=daemons,
        loads=loads,
        pools=(_pool("e2-standard-2", 6, 20),),
        duration=duration,
        system="eks",
        sources=(ONLINE_BOUTIQUE.name, "steady load (demo)"),
    )


SCENARIOS: dict[str, Callable[[float | None], Scenario]] = {
    "thesis-wide": _thesis("thesis-wide", WIDE_PEAKS, "Thesis pattern 1: wide peaks"),
    "thesis-narrow": _thesis("thesis-narrow", NARROW_PEAKS, "Thesis pattern 2: narrow peaks"),
    "thesis-high-frequency": _thesis(
        "thesis-high-frequency", HIGH_FREQUENCY, "Thesis pattern 3: high frequency"
    ),
    "diurnal": _multi(
        "diurnal",
        "php-apache over a day of Alibaba 2018",
        app=PHP_APACHE,
        copies=1,
        trace="alibaba2018",
        peak=37.0,
        node_type="e2-standard-2",
        system="gke",
        initial_nodes=2,
        max_nodes=30,
    ),
    "online-boutique": _multi(
        "online-boutique",
        "Online Boutique x6 over days of Alibaba 2018",
        app=ONLINE_BOUTIQUE,
        copies=6,
        trace="alibaba2018",
        peak=40.0,
        node_type="e2-standard-4",
        system="gke",
        initial_nodes=4,
        max_nodes=60,
    ),
    "sock-shop": _multi(
        "sock-shop",
        "Sock Shop x6 over days of Google 2019",
        app=SOCK_SHOP,
        copies=6,
        trace="google2019",
        peak=40.0,
        node_type="m5.xlarge",
        system="eks",
        initial_nodes=4,
        max_nodes=60,
    ),
    "robot-shop": _multi(
        "robot-shop",
        "Robot Shop x10 over days of Azure v2",
        app=ROBOT_SHOP,
        copies=10,
        trace="azure_v2",
        peak=15.0,
        node_type="m5.large",
        system="eks",
        initial_nodes=4,
        max_nodes=60,
    ),
    "social-network": _multi(
        "social-network",
        "DeathStarBench socialNetwork x4 over days of Google 2019",
        app=SOCIAL_NETWORK,
        copies=4,
        trace="google2019",
        peak=40.0,
        node_type="e2-standard-4",
        system="gke",
        initial_nodes=4,
        max_nodes=60,
    ),
}
THESIS_SCENARIOS = ("thesis-wide", "thesis-narrow", "thesis-high-frequency")
MULTI_SERVICE = ("online-boutique", "sock-shop", "robot-shop", "social-network")
DEMO_SCENARIOS: dict[str, Callable[[float | None], Scenario]] = {"demo": _demo}
"""Scenarios for ``tuner demo``, not part of the evaluation (``--scenario all``)."""


def scenario(name: str, hours: float | None = None) -> Scenario:
    """A named scenario, or one read from a JSON file."""
    known = {**SCENARIOS, **DEMO_SCENARIOS}
    if name in known:
        return known[name](hours)
    path = Path(name)
    if not path.is_file():
        raise InputError(f"unknown scenario {name!r}; known: {', '.join(known)}, or a file")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"cannot read scenario {path}: {err}") from err
    return scenario_from_dict(document, hours)


def scenario_from_dict(doc: Any, hours: float | None = None) -> Scenario:
    """A scenario from its JSON form (see the module docstring)."""
    try:
        node_type = NODE_TYPES[doc["node_type"]]
        duration = (hours if hours is not None else float(doc.get("hours", 24))) * 3600
        daemons, system = SYSTEMS[doc.get("system", "gke")]
        services: list[Service] = list(system)
        loads: dict[str, LoadPattern] = {}
        for entry in doc["applications"]:
            app = APPLICATIONS[entry["app"]]
            copies = int(entry.get("copies", 1))
            if "pattern" in entry:
                for i in range(copies):
                    namespace = f"{app.name}-{i + 1}"
                    services += app.in_namespace(namespace)
                    loads[namespace] = PATTERNS[entry["pattern"]]
            else:
                more, more_loads = _copies(
                    app,
                    copies,
                    entry["trace"],
                    int(entry.get("first_day", 1)),
                    float(entry["peak"]),
                    duration,
                )
                services += more
                loads.update(more_loads)
        return Scenario(
            name=str(doc["name"]),
            title=str(doc.get("title", doc["name"])),
            services=tuple(services),
            daemonsets=daemons,
            loads=loads,
            pools=(
                NodePool(
                    DEFAULT_POOL,
                    node_type,
                    1,
                    int(doc.get("max_nodes", 100)),
                    int(doc.get("initial_nodes", 1)),
                ),
            ),
            duration=duration,
        )
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"bad scenario: {err!r}") from err
