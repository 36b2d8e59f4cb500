"""The named scenarios and scenario files.

Thesis scenarios (php-apache on the thesis' GKE pool of n1-standard-2 nodes, 1-8 nodes, with
GKE's system pods and the thesis' monitoring stack, its phase-3 Artillery patterns, 3.5 h after a
30-minute warm-up): ``thesis-wide``, ``thesis-narrow``, ``thesis-high-frequency``.

A diurnal day: ``diurnal`` (php-apache on e2-standard-2, Alibaba 2018's second day, peaking at
the thesis' highest rate, 37 req/s).

Multi-service scenarios (several copies of one application, one per namespace, each copy's
load a different day of a real trace): ``online-boutique`` (6 copies, Alibaba 2018,
e2-standard-4 in three zones, one node group each, the front ends spread over the zones with
``maxSkew: 1``), ``sock-shop`` (6 copies, Google 2019, AWS m5.xlarge), ``robot-shop`` (10
copies, Azure v2, AWS m5.large), ``social-network`` (4 copies, Google 2019, e2-standard-4).

For ``tuner demo`` only (not in ``--scenario all``): ``demo``, Online Boutique x3 at a steady
load on six e2-standard-2 nodes as a peak left them, every node above the Cluster Autoscaler's
50 % scale-down threshold.

Scenarios that look like real clusters, written as scenario files
(``tuner/sim/scenario_files``): ``heterogeneous`` (GKE, three pools of different shapes with the
``least-waste`` expander; shops plus Elasticsearch, Kibana, Logstash, Redis, PostgreSQL and
ingress-nginx at their Helm charts' default requests), ``diurnal-week`` (EKS, two node groups,
seven days of the Capital Bikeshare trace: weekday and weekend, day and night) and ``large``
(GKE, Online Boutique x30 on e2-standard-2, above 100 nodes at the peak).

Any other name is read as a scenario file (:mod:`tuner.sim.scenario_file`, ``docs/scenarios.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from tuner.errors import InputError
from tuner.sim.engine import Scenario
from tuner.sim.load import LoadPattern, Phase, Phases
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.scenario_file import PATTERNS, SYSTEMS, build, copies, read, with_rules
from tuner.sim.scenario_rules import APPLICATIONS
from tuner.sim.workloads import GKE_DAEMONSETS, GKE_SYSTEM, THESIS_MONITORING, Application, Service

PHP_APACHE = APPLICATIONS["php-apache"]
ONLINE_BOUTIQUE = APPLICATIONS["online-boutique"]

DEFAULT_POOL = "pool"
"""Node names start with their pool's name; single-pool scenarios keep the ``pool-NNNN`` names
they had before pools existed (the scheduler breaks ties in name order)."""
DAY = 86400.0


def _pool(node_type: str, initial: int, most: int) -> NodeGroup:
    """The one pool of a single-pool scenario (at least one node, as before pools existed)."""
    return NodeGroup(DEFAULT_POOL, NODE_TYPES[node_type], 1, most, initial)


def _zonal(
    node_type: str, initial: int, most: int, zones: tuple[str, ...]
) -> tuple[NodeGroup, ...]:
    """The pool over ``zones``: one node group per zone (``pool-<zone>``), the initial nodes
    dealt round the zones, the maximum shared, at least one node in the first zone."""
    count = len(zones)
    return tuple(
        NodeGroup(
            f"{DEFAULT_POOL}-{zone}",
            NODE_TYPES[node_type],
            1 if i == 0 else 0,
            -(-most // count),
            initial // count + (i < initial % count),
            zone,
        )
        for i, zone in enumerate(zones)
    )


FRONT_END_SPREAD = {"spread": [{"topology_key": "zone", "max_skew": 1}]}
"""Zone spread, ``maxSkew: 1``, ``DoNotSchedule``: the Kubernetes documentation's own example
(``pods/topology-spread-constraints/one-constraint.yaml`` in "Pod Topology Spread
Constraints") and what the Karpenter workshop (``aws-samples/karpenter-workshop-additional``,
``33-topspreadapp.sh``) gives its Deployment; the Online Boutique's own manifests ship no
spread constraint, so an operator running it over zones adds one to its front end."""


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


def _multi(
    name: str,
    title: str,
    *,
    app: Application,
    count: int,
    trace: str,
    peak: float,
    node_type: str,
    system: str,
    initial_nodes: int,
    max_nodes: int,
    zones: tuple[str, ...] = (),
    rules: dict[str, Any] | None = None,
) -> Callable[[float | None], Scenario]:
    def build(hours: float | None) -> Scenario:
        duration = DAY if hours is None else hours * 3600
        services, loads = copies(
            app, count, {"trace": trace, "first_day": 1, "peak": peak}, duration
        )
        daemons, system_services = SYSTEMS[system]
        pools = (
            _zonal(node_type, initial_nodes, max_nodes, zones)
            if zones
            else (_pool(node_type, initial_nodes, max_nodes),)
        )
        return Scenario(
            name=name,
            title=title,
            services=(*with_rules(services, rules or {}), *system_services),
            daemonsets=daemons,
            loads=loads,
            pools=pools,
            duration=duration,
            system=system,
            sources=(app.name, trace),
        )

    return build


def _packaged(name: str) -> Callable[[float | None], Scenario]:
    """A scenario shipped as a scenario file in ``tuner/sim/scenario_files``."""

    def build_file(hours: float | None) -> Scenario:
        text = resources.files("tuner.sim.scenario_files").joinpath(f"{name}.json")
        return build(json.loads(text.read_text(encoding="utf-8")), hours)

    return build_file


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
    "thesis-wide": _thesis("thesis-wide", PATTERNS["wide-peaks"], "Thesis pattern 1: wide peaks"),
    "thesis-narrow": _thesis(
        "thesis-narrow", PATTERNS["narrow-peaks"], "Thesis pattern 2: narrow peaks"
    ),
    "thesis-high-frequency": _thesis(
        "thesis-high-frequency", PATTERNS["high-frequency"], "Thesis pattern 3: high frequency"
    ),
    "diurnal": _multi(
        "diurnal",
        "php-apache over a day of Alibaba 2018",
        app=PHP_APACHE,
        count=1,
        trace="alibaba2018",
        peak=37.0,
        node_type="e2-standard-2",
        system="gke",
        initial_nodes=2,
        max_nodes=30,
    ),
    "online-boutique": _multi(
        "online-boutique",
        "Online Boutique x6 over days of Alibaba 2018, three zones, front ends spread over them",
        app=ONLINE_BOUTIQUE,
        count=6,
        trace="alibaba2018",
        peak=40.0,
        node_type="e2-standard-4",
        system="gke",
        initial_nodes=4,
        max_nodes=60,
        zones=("a", "b", "c"),
        rules={"frontend": FRONT_END_SPREAD},
    ),
    "sock-shop": _multi(
        "sock-shop",
        "Sock Shop x6 over days of Google 2019",
        app=APPLICATIONS["sock-shop"],
        count=6,
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
        app=APPLICATIONS["robot-shop"],
        count=10,
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
        app=APPLICATIONS["social-network"],
        count=4,
        trace="google2019",
        peak=40.0,
        node_type="e2-standard-4",
        system="gke",
        initial_nodes=4,
        max_nodes=60,
    ),
    "heterogeneous": _packaged("heterogeneous"),
    "diurnal-week": _packaged("diurnal-week"),
    "large": _packaged("large"),
}
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
    return read(path, hours)
