"""One replay of a scenario on a private real control plane, end to end.

:func:`replay` starts the control plane with metrics-server (``scripts/cluster.sh up`` with
``TUNER_METRICS_SERVER=true``; every port free, state under the run's directory), and for the
Karpenter comparisons Karpenter's KWOK provider (``scripts/cluster.sh karpenter up``, the
scenario's instance types); it creates the node pools (KWOK nodes of fixed size for ``hpa``; a
KWOKNodeClass, a NodePool and the initial NodeClaims for Karpenter) and the workloads, then
plays the scenario in real time, tick by tick (5 s): from ``-warmup`` to its duration it drives
the load and records (:mod:`testkit.replay.drive`). For ``karpenter-tuner`` it also runs
``tuner run`` for real beside Karpenter, as a Karpenter user would set it up (an embedded
knowledge base; emptied nodes left cordoned for Karpenter to delete, or their Node deleted at
once (``node_removal``); new nodes through a placeholder pod Karpenter provisions for; the
simulator's tuner settings otherwise), with a real
Prometheus scraping the load (an exporter whose request counter advances at the scenario's
load), and records its memory, its actions and their verifications, and what it left behind.
Everything is stopped and removed at the end, whatever happened.

The controllers' clocks cannot be sped up: a scenario's ``speedup`` compresses the load instead,
and the simulator runs the same compressed scenario.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubernetes import client, utils

from testkit.cluster_fixture import ClusterHarness
from testkit.exporter import TestExporter
from testkit.prometheus_fixture import PrometheusHarness
from testkit.replay import objects
from testkit.replay.drive import (
    AuditTail,
    LoadDriver,
    Recorder,
    Recording,
    expose_metrics,
    read_pods,
)
from tuner.model.conventions import Keys
from tuner.sim.engine import Scenario
from tuner.sim.pools import NodeGroup
from tuner.sim.strategies.tuner import simulation_settings

COMPARISONS = ("hpa", "karpenter", "karpenter-tuner")
TICK = 5.0
TICKS_PER_MINUTE = round(60 / TICK)
"""The daemon's memory curve in a report keeps one sample a minute."""
LOAD_METRIC = "replay_requests_total"
ROOT = Path(__file__).resolve().parents[2]


def pinned(scenario: Scenario) -> Scenario:
    """The scenario with every pool fixed at its initial size (no autoscaler may change it)."""
    pools = tuple(
        NodeGroup(p.name, p.node_type, p.initial_nodes, p.initial_nodes, p.initial_nodes)
        for p in scenario.pools
    )
    return replace(scenario, pools=pools)


def free_port() -> int:
    """A free TCP port on the loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DaemonReport:
    """The tuner's daemon over a replay: memory, actions, what it left behind."""

    rss_mb: list[float] = field(default_factory=list)
    """Resident memory every tick (MB)."""
    actions: dict[str, float] = field(default_factory=dict)
    """``op/result`` -> count, from its /metrics at the end."""
    cycles: dict[str, float] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    """The daemon's Kubernetes Events by reason (its decisions, actions, take-backs) that the
    API server still holds at the end (it keeps Events for an hour)."""
    leftovers: list[str] = field(default_factory=list)
    exit_status: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        rss = self.rss_mb
        return {
            "peak_rss_mb": round(max(rss), 1) if rss else None,
            "rss_mb_first_last": [round(rss[0], 1), round(rss[-1], 1)] if rss else None,
            "rss_mb_per_minute": [round(mb, 1) for mb in rss[::TICKS_PER_MINUTE]],
            "actions": self.actions,
            "cycles": self.cycles,
            "events": self.events,
            "leftovers": self.leftovers,
            "exit_status": self.exit_status,
        }


@dataclass
class RunResult:
    """One real replay: its recording and how it went."""

    comparison: str
    scenario: Scenario
    recording: Recording
    tick: float
    wall_s: float
    load_average: list[float]
    late_ticks: int
    patches: int
    daemon: DaemonReport | None = None


def start_cluster(workdir: Path, name: str, **extra: str) -> ClusterHarness:
    """A private control plane with metrics-server (and ``extra`` environment)."""
    kube = ClusterHarness(workdir / "cluster", name)
    kube.env |= {
        "TUNER_METRICS_SERVER": "true",
        "TUNER_METRICS_SERVER_PORT": str(free_port()),
        "TUNER_KARPENTER_METRICS_PORT": str(free_port()),
        "TUNER_KARPENTER_HEALTH_PORT": str(free_port()),
        **extra,
    }
    kube.start()
    return kube


def wait_until(what: str, probe: Callable[[], object], timeout_s: float) -> None:
    """Poll ``probe`` (set-up only) until truthy; TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(client.ApiException, OSError):
            if probe():
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.5)


def metrics_api_ready(kube: ClusterHarness) -> bool:
    """metrics-server answers through the aggregated API with every node's usage."""
    custom = client.CustomObjectsApi(kube.api)
    found = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")["items"]
    return len(found) >= len(kube.core.list_node().items) > 0


def create(kube: ClusterHarness, docs: list[dict[str, Any]]) -> None:
    """Create API objects (built-in kinds through their typed APIs, custom ones as such)."""
    custom = client.CustomObjectsApi(kube.api)
    for doc in docs:
        group, _, version = doc["apiVersion"].rpartition("/")
        if group.endswith(("karpenter.sh", "karpenter.kwok.sh")):
            plural = doc["kind"].lower() + "es" if doc["kind"].endswith("s") else ""
            plural = plural or doc["kind"].lower() + "s"
            custom.create_cluster_custom_object(group, version, plural, doc)
        elif doc["kind"] == "Node":
            kube.core.create_node(doc)
        else:
            utils.create_from_dict(kube.api, doc)


def prepare_nodes(kube: ClusterHarness, scenario: Scenario, comparison: str) -> None:
    """The node pools: fixed KWOK nodes, or Karpenter's NodeClass, NodePool and NodeClaims."""
    if comparison == "hpa":
        nodes = objects.fixed_nodes(scenario)
        create(kube, nodes)
        names = {n["metadata"]["name"] for n in nodes}
        wait_until("the fixed nodes Ready", lambda: _ready_nodes(kube) >= names, 120)
        return
    create(kube, [objects.node_class(scenario.autoscaler.provisioning_delay)])
    create(kube, [objects.node_pool(scenario)])
    claims = objects.node_claims(scenario)
    create(kube, claims)
    # The initial nodes register after the start-up delay, as the simulator's start Ready.
    wait_until(
        "the initial NodeClaims' nodes Ready",
        lambda: len(_ready_nodes(kube)) >= len(claims),
        scenario.autoscaler.provisioning_delay + 180,
    )


def _ready_nodes(kube: ClusterHarness) -> set[str]:
    return {
        n.metadata.name
        for n in kube.core.list_node().items
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        and not any(t.key == "karpenter.sh/unregistered" for t in n.spec.taints or [])
    }


class Daemon:
    """``tuner run`` for real beside Karpenter, with its Prometheus and load exporter."""

    def __init__(
        self,
        kube: ClusterHarness,
        scenario: Scenario,
        workdir: Path,
        seed: int,
        node_removal: str = "autoscaler",
    ):
        self.kube = kube
        self.node_removal = node_removal
        self.scenario = scenario
        self.workdir = workdir
        self.exporter = TestExporter().start()
        self.prometheus = PrometheusHarness(self.exporter, free_port(), workdir / "prometheus")
        self.metrics_port = free_port()
        self.settings = workdir / "tuner-settings.json"
        self.settings.write_text(json.dumps(self.settings_doc(seed), indent=2))
        self.process: subprocess.Popen[bytes] | None = None
        self.report = DaemonReport()

    def settings_doc(self, seed: int) -> dict[str, Any]:
        """The simulator's tuner settings (no thresholds, the daemon's default), as a
        Karpenter user writes them: pools by instance type, Karpenter deletes emptied nodes
        and provisions for placeholders (``execute.node_removal`` as given: ``autoscaler``,
        or ``delete-node``, Karpenter's documented manual removal of one node)."""
        sim = simulation_settings(self.scenario, seed)
        pools = {}
        for pool in self.scenario.pools:
            kind = pool.node_type
            pools[pool.name] = {
                "min": pool.min_nodes,
                "max": pool.max_nodes,
                "selector": {"node.kubernetes.io/instance-type": kind.name},
                "template": {
                    "instance_type": kind.name,
                    "cpu": f"{kind.allocatable.cpu}m",
                    "memory": str(kind.allocatable.memory),
                    "pods": kind.max_pods,
                    "labels": {"node.kubernetes.io/instance-type": kind.name},
                },
            }
        return {
            "pricing": {
                "node_types": dict(sim.pricing.node_types),
                "currency": sim.pricing.currency,
            },
            "analyse": {
                "max_parallel_removals": sim.analyse.max_parallel_removals,
                "candidate_delay_s": sim.analyse.candidate_delay_s,
                "migration_chance": 0,
                "seed": seed,
            },
            "load": {"delta": sim.load.delta, "query": f"sum(rate({LOAD_METRIC}[$window]))"},
            "windows": {"measure_s": sim.windows.measure_s, "retry_s": sim.windows.retry_s},
            "knowledge": {"backend": "embedded", "path": str(self.workdir / "knowledge.sqlite")},
            "prometheus": {"url": self.prometheus.url},
            "kubernetes": {"kubeconfig": self.kube.kubeconfig},
            "execute": {"node_removal": self.node_removal, "node_provision": "autoscaler"},
            "pools": pools,
            "daemon": {
                "metrics_port": self.metrics_port,
                "metrics_host": "127.0.0.1",
                "snapshot_interval_s": 5,
            },
        }

    def start(self) -> None:
        """``deploy/``'s objects (:func:`install_deploy_objects`), Prometheus scraping the
        exporter, then the daemon."""
        install_deploy_objects(self.kube)
        self.prometheus.start_prometheus()
        log = (self.workdir / "tuner.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "run", "--settings", str(self.settings)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def tick(self, load: float) -> None:
        """The load's request counter advances at ``load`` per second; the daemon's memory."""
        self.exporter.set_rate(LOAD_METRIC, {"service": "replay"}, max(load, 0.0))
        if self.process is not None and self.process.poll() is None:
            self.report.rss_mb.append(rss_mb(self.process.pid))

    def stop(self) -> None:
        """Read its metrics, SIGTERM it, then record what it left in the cluster."""
        if self.process is not None:
            with contextlib.suppress(OSError):
                found = daemon_metrics(self.metrics_port)
                self.report.actions, self.report.cycles = found["actions"], found["cycles"]
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
            try:
                self.report.exit_status = self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.report.exit_status = self.process.wait()
        self.report.leftovers = leftovers(self.kube, self.scenario)
        events: Counter[str] = Counter()
        for event in self.kube.core.list_event_for_all_namespaces().items:
            if event.reporting_component == Keys().controller:
                events[event.reason] += event.count or 1
        self.report.events = dict(events)
        with contextlib.suppress(RuntimeError):
            self.prometheus.stop_prometheus(keep_data=False)
        self.exporter.stop()


def daemon_metrics(port: int) -> dict[str, dict[str, float]]:
    """A daemon's actions (op/result) and cycles (outcome) from its /metrics on ``port``."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    found: dict[str, dict[str, float]] = {"actions": {}, "cycles": {}}
    for line in text.splitlines():
        for metric, key in (
            ("tuner_actions_total{", "actions"),
            ("tuner_cycles_total{", "cycles"),
        ):
            if line.startswith(metric):
                labels, value = line[len(metric) :].rsplit("} ", 1)
                name = "/".join(p.split("=", 1)[1].strip('"') for p in labels.split(","))
                found[key][name] = float(value)
    return found


def install_deploy_objects(kube: ClusterHarness) -> None:
    """``deploy/``'s Namespace (where the daemon's Lease and its Events about the cycles go)
    and the placeholders' PriorityClass, each unless it exists (the cluster harness makes the
    Namespace as ``deploy/`` does)."""
    for name in ("namespace.yaml", "priorityclass.yaml"):
        try:
            utils.create_from_yaml(kube.api, str(ROOT / "deploy" / name))
        except utils.FailToCreateError as err:
            if any(e.status != 409 for e in err.api_exceptions):
                raise


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def leftovers(kube: ClusterHarness, scenario: Scenario) -> list[str]:
    """What the tuner left: labels, annotations, taints, cordons (a node left cordoned for
    Karpenter that it has not deleted yet included), its journal, placeholder pods, and
    workloads without an HPA whose replicas differ from the scenario's."""
    found = kube.leftovers()
    placeholder = Keys().placeholder
    found += [
        f"placeholder pod {p.metadata.namespace}/{p.metadata.name}"
        for p in kube.core.list_pod_for_all_namespaces(label_selector=placeholder).items
    ]
    fixed = {objects.service_key(s): s.replicas for s in scenario.services if s.hpa is None}
    for item in kube.apps.list_deployment_for_all_namespaces().items:
        key = (item.spec.selector.match_labels or {}).get(objects.SERVICE_LABEL)
        if key in fixed and item.spec.replicas != fixed[key]:
            found.append(f"{key} replicas {item.spec.replicas} (was {fixed[key]})")
    return found


@contextlib.contextmanager
def control_plane(
    workdir: Path, scenario: Scenario, comparison: str, logs: Path | None = None
) -> Iterator[ClusterHarness]:
    """The private control plane (and Karpenter) for one replay; stopped and wiped after (its
    components' logs, but the audit log's, copied into ``logs`` first)."""
    extra = {}
    if comparison != "hpa":
        types = workdir / "instance-types.json"
        types.write_text(json.dumps(objects.instance_types(scenario), indent=2))
        extra["TUNER_KARPENTER_INSTANCE_TYPES"] = str(types)
    kube = start_cluster(workdir, f"replay-{os.getpid()}-{int(time.time())}", **extra)
    try:
        if comparison != "hpa":
            kube.script("karpenter", "up")
        yield kube
    finally:
        if logs is not None:
            keep_logs(kube, workdir, logs)
        kube.stop()


def keep_logs(kube: ClusterHarness, workdir: Path, logs: Path) -> None:
    """Copy the components' logs (Karpenter's included, not the audit log) and the daemon's."""
    logs.mkdir(parents=True, exist_ok=True)
    for log in Path(kube.env["TUNER_CLUSTER_LOGS"]).glob("*.log"):
        if log.name != "audit.log":
            shutil.copy2(log, logs / log.name)
    for name in ("tuner.log", "tuner-settings.json"):
        if (workdir / name).exists():
            shutil.copy2(workdir / name, logs / name)


def replay(
    scenario: Scenario,
    comparison: str,
    workdir: Path,
    seed: int = 1,
    tick: float = TICK,
    progress: Callable[[float, Recording], object] | None = None,
    stop: threading.Event | None = None,
    downscale_s: float | None = None,
    logs: Path | None = None,
    node_removal: str = "autoscaler",
) -> RunResult:
    """Replay ``scenario`` for ``comparison`` on a fresh private control plane; the recording.

    ``progress(t, recording)`` is called after each tick; ``stop`` ends the replay early (the
    recording then covers what was played); ``downscale_s`` shortens the HPAs' scale-down
    stabilisation (tests only); ``logs`` keeps the components' and the daemon's logs;
    ``node_removal`` is the daemon's ``execute.node_removal`` (``karpenter-tuner``)."""
    if comparison not in COMPARISONS:
        raise ValueError(f"comparison must be one of {COMPARISONS}, not {comparison!r}")
    played = pinned(scenario) if comparison == "hpa" else scenario
    workdir.mkdir(parents=True, exist_ok=True)
    with control_plane(workdir, played, comparison, logs) as kube:
        prepare_nodes(kube, played, comparison)
        create(kube, objects.workload_objects(played, downscale_s))
        expose_metrics(kube.core, kube.core.list_node().items)
        wait_until("metrics-server's node metrics", lambda: metrics_api_ready(kube), 180)
        daemon = (
            Daemon(kube, played, workdir, seed, node_removal)
            if comparison == "karpenter-tuner"
            else None
        )
        try:
            if daemon is not None:
                daemon.start()
            return _play(kube, played, comparison, tick, daemon, progress, stop)
        finally:
            if daemon is not None:
                daemon.stop()


def _play(
    kube: ClusterHarness,
    scenario: Scenario,
    comparison: str,
    tick: float,
    daemon: Daemon | None,
    progress: Callable[[float, Recording], object] | None,
    stop: threading.Event | None,
) -> RunResult:
    audit = AuditTail(kube.audit_log)
    audit.start_here()
    prices = {p.node_type.name: p.node_type.price for p in scenario.pools}
    driver = LoadDriver(scenario, kube.core)
    recorder = Recorder(scenario, kube.api, audit, prices, karpenter=comparison != "hpa")
    stop = stop or threading.Event()
    ticks = round((scenario.warmup + scenario.duration) / tick)
    loads: list[float] = []
    late = 0
    started = time.monotonic()
    for k in range(ticks):
        due = started + k * tick
        if stop.wait(max(due - time.monotonic(), 0.0)):
            break
        if time.monotonic() - due > tick:
            late += 1
        t = -scenario.warmup + k * tick
        pods = read_pods(kube.core)
        nodes = kube.core.list_node().items
        expose_metrics(kube.core, nodes)
        load = scenario.load(t)
        driver.drive(t, pods)
        if daemon is not None:
            daemon.tick(load)
        recorder.sample(t, load, pods, nodes, driver)
        if k % round(60 / tick) == 0:
            loads.append(os.getloadavg()[0])
        if progress is not None:
            progress(t, recorder.recording)
    return RunResult(
        comparison,
        scenario,
        recorder.recording,
        tick,
        time.monotonic() - started,
        loads,
        late,
        driver.patches,
        daemon.report if daemon is not None else None,
    )
