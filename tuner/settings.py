"""settings.json as typed, immutable values, built from a document that
:mod:`tuner.settings_validation` has checked against settings/settings.schema.json."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from tuner.errors import InputError
from tuner.json_input import read_json
from tuner.model.conventions import DEFAULT_PREFIX, NAME, PRICE_ANNOTATION
from tuner.model.limits import DAY_S, EvictionLimit, Limits
from tuner.model.maintenance import maintenance_window
from tuner.model.quantity import cpu_millis, memory_bytes
from tuner.settings_validation import validated


@dataclass(frozen=True)
class Pricing:
    """How node cost per hour is computed."""

    price_per_core: float = 0.0316
    price_per_gb: float = 0.0042
    node_types: dict[str, float] = field(default_factory=dict)
    price_annotation: str = PRICE_ANNOTATION
    currency: str = "USD"


@dataclass(frozen=True)
class Usability:
    """Usability thresholds of the down-scaling thesis (003, §4.3)."""

    min_cpu: int = 0
    min_memory: int = 0
    max_cpu_to_memory: Fraction | None = None
    """Cores per GiB, or None for no cap."""
    max_memory_to_cpu: Fraction | None = None
    """GiB per core, or None for no cap."""


@dataclass(frozen=True)
class Thresholds:
    """Cluster-wide utilization limits; None means no limit."""

    cpu: Fraction | None = None
    memory: Fraction | None = None


@dataclass(frozen=True)
class Analyse:
    """Settings of the analyse step."""

    remove_nodes: bool = True
    max_parallel_removals: int = 1
    thresholds: Thresholds = field(default_factory=Thresholds)
    usability: Usability = field(default_factory=Usability)
    candidate_delay_s: float = 600.0
    migration_chance: float = 0.0
    seed: int | None = None
    excluded_namespaces: frozenset[str] = frozenset({"kube-system"})
    min_saving_per_hour: float = 0.0
    replace_nodes: bool = True
    max_replaced_nodes: int = 3
    make_room: bool = True
    """Whether removal and replace may move one smaller pod off a node that stays, to make
    room for a pod that fits nowhere else (see :mod:`tuner.analyse.search`): in the evaluation
    it takes 8 % of ``heterogeneous``'s room with no pod waiting and changes no other
    scenario's figures; the forecast's headroom still has to hold after the move."""
    headroom: str = "forecast"
    """What a removal or replace leaves room for: ``forecast`` (the upper band's demand; the
    thresholds without a forecast), ``thresholds`` or ``none``."""


@dataclass(frozen=True)
class PoolTemplate:
    """What a new node of a pool looks like, for a pool that has no node now."""

    instance_type: str
    cpu: int
    """Allocatable millicores (also taken as the capacity)."""
    memory: int
    """Allocatable bytes (also taken as the capacity)."""
    pods: int = 110
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()
    """(key, value, effect)."""


@dataclass(frozen=True)
class PoolSettings:
    """One entry of the ``pools`` section: how a pool's nodes are recognised and its bounds."""

    min_size: int | None = None
    max_size: int | None = None
    selector: tuple[tuple[str, str], ...] = ()
    """Node labels that put a node in this pool (before the pool labels are read)."""
    template: PoolTemplate | None = None


@dataclass(frozen=True)
class LoadSettings:
    """How the load is measured and compared."""

    delta: float = 0.1
    query: str | None = None
    pod_name: str | None = None


@dataclass(frozen=True)
class Windows:
    """The sliding window (seconds)."""

    measure_s: float = 600.0
    retry_s: float = 60.0
    warmup_s: float = 0.0
    scope: str = "touched"
    """What must stand still over the window: ``touched`` (nothing pending, no node joining or
    leaving; what changed is kept out of the plan) or ``cluster`` (the thesis' whole cluster)."""
    release_on_decline: bool = True
    """Under ``touched``, act during a falling load the forecast agrees with, the workloads
    the HPAs shrink counting as settled (:func:`~tuner.model.window_report.decline_release`)."""
    decline_settle_s: float | None = None
    """During a decline, the next change may come this long after the last (None: a node's
    start-up, ``forecast.node_startup_s``)."""
    decline_retry_s: float = 30.0
    """During a released decline, the next look comes this much later after staying, and a
    removal candidate need stay one only across two such looks (never more than
    ``retry_s``): two syncs of the HPAs (15 s each by default) between the looks."""


@dataclass(frozen=True)
class ForecastSettings:
    """The load forecast: its history, horizon and band."""

    enabled: bool = True
    lookback_s: float = 14 * 86400.0
    step_s: float = 60.0
    node_startup_s: float = 120.0
    """From the decision to add a node until it is Ready (the Cluster Autoscaler model's
    provisioning delay in the simulator)."""
    horizon_s: float | None = None
    """None: :attr:`node_startup_s` plus the window."""
    quantile: float = 0.95
    reserve_max_nodes: int = 0
    """At most this many nodes are held ahead of a forecast rise (0: none)."""

    def horizon(self, windows: Windows) -> float:
        """The horizon the peak is forecast over: the override, else a node's start-up plus the
        window, from one step to a day."""
        if self.horizon_s is not None:
            return self.horizon_s
        return min(max(self.node_startup_s + windows.measure_s, self.step_s), DAY_S)

    def lead(self, windows: Windows) -> float:
        """How far ahead a reserve looks: a node's start-up plus the longest a cycle waits for
        the next while reserving (``windows.retry_s``): room needed later can be asked for
        later."""
        return self.node_startup_s + windows.retry_s


@dataclass(frozen=True)
class Knowledge:
    """Where the knowledge base lives."""

    backend: str = "embedded"
    path: str = "tuner-knowledge.sqlite"
    uri: str = "bolt://127.0.0.1:7687"
    user: str = "neo4j"
    database: str = "neo4j"
    password_env: str = "TUNER_NEO4J_PASSWORD"
    lookup_limit: int = 10
    """Executions a lookup reads in full: the cheapest that cost less than the cluster now."""


@dataclass(frozen=True)
class Prometheus:
    """Prometheus connection."""

    url: str = "http://127.0.0.1:9090"
    timeout_s: float = 10.0
    token_env: str = "TUNER_PROMETHEUS_TOKEN"


@dataclass(frozen=True)
class Kubernetes:
    """Kubernetes connection."""

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    api_server: str | None = None
    timeout_s: float = 60.0
    """How long an API request (watches aside) may wait for an answer."""


@dataclass(frozen=True)
class Execute:
    """How plans are carried out."""

    node_removal: str = "autoscaler"
    node_removal_command: tuple[str, ...] = ()
    verify_timeout_s: float = 180.0
    max_actions_per_cycle: int = 50
    max_moves_at_once: int = 10
    """Most migrations of a transition in flight at once (a wave, :mod:`tuner.plan.waves`); 1
    moves one pod at a time."""
    surge_lone_pods: bool = True
    """Move the pod of a one-replica Deployment whose rollout surges by restarting its rollout
    (:mod:`tuner.plan.rollout`): its new pod starts first, the old goes once the new one is
    available. Off: evicted as any other pod."""
    label_prefix: str = DEFAULT_PREFIX
    eviction_retries: int = 8
    eviction_backoff_s: float = 2.0
    api_retry_s: float = 60.0
    journal_namespace: str = "tuner-system"
    """The tuner's own namespace (the journal, placeholder pods): where ``deploy/`` runs it and
    its Role grants ConfigMaps and pods."""
    autoscaler_grace_s: float = 1800.0
    """How long a node left for the autoscaler may stay before the tuner takes it back (0: for
    ever)."""
    node_provision: str = "autoscaler"
    node_provision_command: tuple[str, ...] = ()
    provision_timeout_s: float = 900.0
    """How long obtaining a node from a pool may take (the Cluster Autoscaler's own
    ``--max-node-provision-time`` default, 15 min)."""
    placeholder_priority_class: str = f"{NAME}-placeholder"


@dataclass(frozen=True)
class LeaderElectionSettings:
    """A ``coordination.k8s.io`` Lease that lets only one replica act."""

    enabled: bool = False
    namespace: str = "tuner-system"
    name: str = NAME
    lease_duration_s: int = 30
    identity_env: str = "POD_NAME"


@dataclass(frozen=True)
class DaemonSettings:
    """How ``tuner run`` operates."""

    metrics_port: int = 9102
    metrics_host: str = "0.0.0.0"
    snapshot_interval_s: float = 30.0
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)


@dataclass(frozen=True)
class Settings:
    """All settings of the tuner."""

    pricing: Pricing = field(default_factory=Pricing)
    analyse: Analyse = field(default_factory=Analyse)
    load: LoadSettings = field(default_factory=LoadSettings)
    windows: Windows = field(default_factory=Windows)
    knowledge: Knowledge = field(default_factory=Knowledge)
    prometheus: Prometheus = field(default_factory=Prometheus)
    kubernetes: Kubernetes = field(default_factory=Kubernetes)
    execute: Execute = field(default_factory=Execute)
    limits: Limits = field(default_factory=Limits)
    daemon: DaemonSettings = field(default_factory=DaemonSettings)
    pools: dict[str, PoolSettings] = field(default_factory=dict)
    forecast: ForecastSettings = field(default_factory=ForecastSettings)


def load_settings(path: Path | None) -> Settings:
    """Read and validate a settings file; None gives the documented defaults."""
    if path is None:
        return Settings()
    document = read_json(path, "settings")
    try:
        return settings_from_dict(document)
    except InputError as err:
        raise InputError(f"settings {path}: {err}") from err


def settings_from_dict(document: Any) -> Settings:
    """Validate a settings document (already parsed JSON)."""
    doc = validated(document)
    return Settings(
        pricing=Pricing(**doc.get("pricing", {})),
        analyse=_analyse(doc.get("analyse", {})),
        load=LoadSettings(**doc.get("load", {})),
        windows=Windows(**doc.get("windows", {})),
        knowledge=Knowledge(**doc.get("knowledge", {})),
        prometheus=Prometheus(**doc.get("prometheus", {})),
        kubernetes=Kubernetes(**doc.get("kubernetes", {})),
        execute=_execute(doc.get("execute", {})),
        limits=_limits(doc.get("limits", {})),
        daemon=_daemon(doc.get("daemon", {})),
        pools={name: _pool(name, spec) for name, spec in doc.get("pools", {}).items()},
        forecast=_forecast(doc.get("forecast", {})),
    )


def _ratio(value: float | None) -> Fraction | None:
    return None if value is None else Fraction(str(value))


def _analyse(section: dict[str, Any]) -> Analyse:
    section = dict(section)
    thresholds = section.pop("thresholds", {})
    usability = section.pop("usability", {})
    if "excluded_namespaces" in section:
        section["excluded_namespaces"] = frozenset(section["excluded_namespaces"])
    try:
        usable = Usability(
            min_cpu=cpu_millis(usability.get("min_cpu", 0)),
            min_memory=memory_bytes(usability.get("min_memory", 0)),
            max_cpu_to_memory=_ratio(usability.get("max_cpu_to_memory")),
            max_memory_to_cpu=_ratio(usability.get("max_memory_to_cpu")),
        )
    except InputError as err:
        raise InputError(f"analyse.usability: {err}") from err
    return Analyse(
        thresholds=Thresholds(_ratio(thresholds.get("cpu")), _ratio(thresholds.get("memory"))),
        usability=usable,
        **section,
    )


def _execute(section: dict[str, Any]) -> Execute:
    section = dict(section)
    commands = {
        key: tuple(section.pop(f"{key}_command", ())) for key in ("node_removal", "node_provision")
    }
    for key, command in commands.items():
        if section.get(key) == "command" and not command:
            raise InputError(f"execute.{key}_command: required when {key} is 'command'")
    return Execute(
        node_removal_command=commands["node_removal"],
        node_provision_command=commands["node_provision"],
        **section,
    )


def _limits(section: dict[str, Any]) -> Limits:
    def limit(spec: dict[str, Any], prefix: str = "") -> EvictionLimit:
        return EvictionLimit(
            spec.get(f"{prefix}evictions_per_hour"), spec.get(f"{prefix}evictions_per_day")
        )

    windows = section.get("maintenance_windows", ())
    return Limits(
        cluster=limit(section),
        each_namespace=limit(section, "namespace_"),
        namespaces={name: limit(spec) for name, spec in section.get("namespaces", {}).items()},
        maintenance_windows=tuple(
            maintenance_window(w, f"limits.maintenance_windows.{i}") for i, w in enumerate(windows)
        ),
        pause_config_map=section.get("pause_config_map", Limits.pause_config_map),
    )


def _forecast(section: dict[str, Any]) -> ForecastSettings:
    forecast = ForecastSettings(**section)
    horizon = forecast.horizon_s
    if horizon is not None and horizon < forecast.step_s:
        raise InputError(
            f"forecast.horizon_s: {horizon:g} is shorter than one step (step_s {forecast.step_s:g})"
        )
    if forecast.step_s * 2 > forecast.lookback_s:
        raise InputError(
            f"forecast.lookback_s: {forecast.lookback_s:g} holds less than two steps of "
            f"{forecast.step_s:g} s"
        )
    return forecast


def _daemon(section: dict[str, Any]) -> DaemonSettings:
    section = dict(section)
    election = LeaderElectionSettings(**section.pop("leader_election", {}))
    return DaemonSettings(leader_election=election, **section)


def _pool(name: str, spec: dict[str, Any]) -> PoolSettings:
    low, high = spec.get("min"), spec.get("max")
    if low is not None and high is not None and low > high:
        raise InputError(f"pools.{name}.max: {high} is below min {low}")
    template = spec.get("template")
    shape = None
    if template is not None:
        where = f"pools.{name}.template"
        shape = PoolTemplate(
            instance_type=template["instance_type"],
            cpu=_quantity(cpu_millis, template["cpu"], f"{where}.cpu"),
            memory=_quantity(memory_bytes, template["memory"], f"{where}.memory"),
            pods=template.get("pods", 110),
            labels=tuple(sorted(template.get("labels", {}).items())),
            taints=tuple(
                (t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
                for t in template.get("taints", ())
            ),
        )
    return PoolSettings(low, high, tuple(sorted(spec.get("selector", {}).items())), shape)


def _quantity(parse: Callable[[Any], int], value: Any, where: str) -> int:
    try:
        return parse(value)
    except InputError as err:
        raise InputError(f"{where}: {err}") from err
