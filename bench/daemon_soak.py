"""The daemon's memory over many cycles (issue 26 item 5): ``tuner run`` on the real control plane.

    .venv/bin/python -m bench.daemon_soak [--cycles 600] [--warmup 50] [--runs 1] [--window 2]
        [--limit 0.07] [--output soak.json] [--prefill 4000] [--trace | --probe N | --leak B]

Each run starts a private control plane (``scripts/cluster.sh up``, as the cluster tests do:
:class:`~testkit.cluster_fixture.ClusterHarness`), three KWOK nodes of 4 cores and an onboarded
Deployment of three 1-core pods, a real Prometheus scraping a load exporter (as the end-to-end
tests do) and ``tuner run`` — the CLI's ``main`` under :mod:`bench.daemon_soak_child`, which
reports SQLite's own allocations as each cycle ends — with an embedded
knowledge base (holding :data:`PREFILL` executions of another load first), a short window
(``--window`` s) and a 1 s snapshot interval, so that it runs a cycle every few seconds. The
daemon removes one node (its pod migrated by eviction, each action verified) once a window is
stable; a couple of cycles after it has stayed on two nodes, the bench brings the node back and
deletes the pods so that the scheduler spreads them over the three again: the monitor, analyse,
plan, execute and knowledge-base paths all run round after round, not only
``unstable``/``stayed``.

The daemon's resident memory (``VmRSS`` from ``/proc``) and SQLite's share of it are sampled
as each cycle ends (the bench polls its ``/metrics`` for the cycle count every 0.2 s).
Reported per run: the RSS at start-up (``/metrics`` up, no cycle yet), after the first cycle,
after ``--warmup`` cycles, at the end and its peak; slopes as the median of the pairwise
slopes (Theil–Sen: robust to the allocator's steps) in MB per 100 cycles: of the RSS after the
warm-up and over the last third of the run, and of the RSS less SQLite's allocations over the
same (the *growth*); the outcomes and actions; what the daemon left behind; the load average.
Also, once, the RSS of a bare interpreter after importing each heavy module ``tuner run``
loads (the one-off part of its memory).

Pass (exit 0) when the median growth over the last third of the runs is at most ``--limit`` MB
per 100 cycles (default 0.07). Why the last third and not everything after the warm-up: over
600 cycles (docs/performance.md) glibc's heap settles for about 300 cycles after the start-up
(0.19 MB per 100 cycles in the middle third) and then levels off; what still rises after that
is SQLite's page cache, filling at 0.7 kB a cycle towards its bound of 1.95 MB
(:data:`SQLITE_CACHE_MB`), which is why SQLite's share is taken out. Why that bound: a daemon
with the default windows runs at most one cycle a minute (``windows.retry_s`` 60 after every
unstable window), 1,440 a day; 0.07 MB per 100 cycles is then 1 MB a day, 30 MB a month,
inside the ~400 MB between the peak measured on the real replays (113-119 MB) and
``deploy/``'s 512 Mi request for more than a year without a restart. Measured over the last
third of 600 cycles: -0.01 and 0.04 without a leak, 0.14 with a leak of 1 kB a cycle
(``--leak 1024``), which fails it.

Where the memory is: ``--trace`` (tracemalloc after the warm-up: what was allocated since and
is still alive, by site) and ``--probe N`` (every N cycles, without tracemalloc: RSS by kind of
mapping, glibc malloc's and pymalloc's heaps, SQLite's, threads, objects, dead weak references
by holder, the cyclic garbage a full collection finds), both through
:mod:`bench.daemon_soak_child`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.daemon_soak_child import COUNTS, MEMORY
from knowledge.embedded import EmbeddedKnowledgeBase
from testkit.cluster_fixture import ClusterHarness
from testkit.exporter import TestExporter
from testkit.prometheus_fixture import PrometheusHarness
from testkit.replay.run import daemon_metrics, free_port, install_deploy_objects, rss_mb
from tuner.model.cluster import Workload
from tuner.model.execution import Execution, NodeState, WorkloadType

ROOT = Path(__file__).resolve().parents[1]
APP = "web"
LOAD_METRIC = "http_requests_total"
INSTANCE_TYPE = "e2-standard-4"
NODES = ("soak-a", "soak-b", "soak-c")
PREFILL = 4000
"""Executions in the knowledge store before the daemon starts (``--prefill``): a 3 MB file,
more than SQLite's page cache holds (:data:`SQLITE_CACHE_MB`), as in a daemon that has run for
a while. The daemon no longer reads the whole store when it connects (it counts it with one
aggregate), so the cache starts small all the same and fills with the pages the daemon touches,
the store's new ones above all: it records a deployment every stable window, 0.7 kB a cycle
here, up to that bound (2.05 MB measured by ``sqlite3_memory_used`` once the file passes about
2 MB). Over hundreds of cycles that looks like growth; the judgement leaves it out
(:func:`growth`)."""
SQLITE_CACHE_MB = 2000 / 1024
"""SQLite's page cache per connection, at most: ``PRAGMA cache_size`` -2000 (KiB), its default,
which the knowledge base keeps; the daemon holds one connection."""
PREFILL_LOAD = 1e6
"""Their load: far outside the bench's band, so no cycle ever chooses one."""
STAYED_BEFORE_RETURN = 2
"""Cycles the daemon stays on two nodes before the bench brings the third back."""
POLL_S = 0.2
CYCLE_TIMEOUT_S = 180.0
"""No cycle for this long: the run fails (the daemon's log tail is printed)."""
HEAVY_MODULES = (
    "numpy",
    "urllib3",
    "kubernetes.client",
    "kubernetes.watch",
    "apscheduler.schedulers.blocking",
    "prometheus_client",
    "jsonschema",
    "sqlite3",
    "tuner.cli",
    "tuner.daemon.run",
    "tuner.execute.actuator",
    "tuner.execute.reserve",
    "tuner.daemon.safeguards",
    "knowledge.open",
    "scipy.optimize",
)
"""Imported in this order by :func:`import_ladder`: the modules ``tuner run`` loads."""


@dataclass
class Soak:
    """One run: the RSS after each cycle and what the daemon did."""

    startup_mb: float = 0.0
    """RSS once /metrics answered, before the first cycle."""
    rss_mb: list[float] = field(default_factory=list)
    """RSS after cycle 1, 2, ..."""
    sqlite_mb: list[float] = field(default_factory=list)
    """SQLite's own allocations (its page cache) as each cycle ended, part of that RSS."""
    cycles: dict[str, float] = field(default_factory=dict)
    actions: dict[str, float] = field(default_factory=dict)
    returns: int = 0
    """Times the bench brought the removed node back."""
    leftovers: list[str] = field(default_factory=list)
    probes: list[dict[str, float]] = field(default_factory=list)
    """``--probe``: where the memory was (:func:`bench.daemon_soak_child.memory`) every so many
    cycles, each with its ``cycle``."""
    cycle_s: float = 0.0
    """The daemon's mean cycle duration (``tuner_cycle_duration_seconds``' sum over count)."""
    exit_status: int | None = None
    wall_s: float = 0.0
    load: list[float] = field(default_factory=list)

    def summary(self, warmup: int) -> dict[str, Any]:
        """Start, after warm-up, end, peak, slopes (MB per 100 cycles) and the rest: of the RSS
        after the warm-up and over the last third; of the RSS less SQLite's page cache (the
        growth judged, :func:`growth`) over the same."""
        rss = self.rss_mb
        after = rss[warmup - 1 :]
        last = rss[len(rss) - len(rss) // 3 :]
        return {
            "cycles_run": len(rss),
            "startup_mb": round(self.startup_mb, 1),
            "first_cycle_mb": round(rss[0], 1),
            "after_warmup_mb": round(after[0], 1),
            "end_mb": round(rss[-1], 1),
            "peak_mb": round(max(rss), 1),
            "slope_mb_per_100_cycles": round(100 * theil_sen(after), 3),
            "last_third_slope_mb_per_100_cycles": round(100 * theil_sen(last), 3),
            "sqlite_mb": [round(self.sqlite_mb[i], 3) for i in (warmup - 1, -1)],
            "growth_mb_per_100_cycles": round(100 * growth(self, warmup - 1), 3),
            "last_third_growth_mb_per_100_cycles": round(100 * growth(self, len(rss) * 2 // 3), 3),
            "end_minus_warmup_mb": round(rss[-1] - after[0], 2),
            "cycles": self.cycles,
            "actions": self.actions,
            "node_returns": self.returns,
            "leftovers": self.leftovers,
            "mean_cycle_s": round(self.cycle_s, 4),
            "exit_status": self.exit_status,
            "wall_s": round(self.wall_s),
            "load": [round(x, 2) for x in self.load],
            "rss_mb_per_cycle": [round(x, 2) for x in rss],
            "probes": self.probes,
        }


def growth(soak: Soak, skip: int) -> float:
    """MB per cycle after the first ``skip`` cycles: the Theil-Sen slope of the RSS less SQLite's
    own allocations, whose page cache fills with every page the store gains until its bound
    (:data:`SQLITE_CACHE_MB`), a bounded growth that a bench of hundreds of cycles cannot see
    the end of."""
    return theil_sen([r - q for r, q in zip(soak.rss_mb, soak.sqlite_mb, strict=True)][skip:])


def theil_sen(values: list[float]) -> float:
    """The median of the slopes between every pair of samples (per sample step)."""
    slopes = [
        (values[j] - values[i]) / (j - i)
        for i in range(len(values))
        for j in range(i + 1, len(values))
    ]
    return statistics.median(slopes) if slopes else 0.0


def settings_doc(kube: ClusterHarness, prometheus: PrometheusHarness, tmp: Path, window: float):
    """The daemon's settings: this cluster, Prometheus and an embedded knowledge base; windows
    short enough for a cycle every few seconds; one node removable (3 of 8 cores under the
    0.7 threshold, not 3 of 4)."""
    return {
        "pricing": {"price_per_core": 1.0, "price_per_gb": 0.0},
        "analyse": {
            "thresholds": {"cpu": 0.7},
            "candidate_delay_s": 0,
            "max_parallel_removals": 1,
            "excluded_namespaces": ["kube-system", "tuner-system"],
            "seed": 1,
        },
        "load": {"delta": 0.1, "query": f"sum(rate({LOAD_METRIC}[$window]))"},
        "windows": {"measure_s": window, "retry_s": 1, "warmup_s": 0},
        "knowledge": {"backend": "embedded", "path": str(tmp / "knowledge.sqlite")},
        "prometheus": {"url": prometheus.url},
        "kubernetes": {"kubeconfig": kube.kubeconfig},
        "execute": {"node_removal": "delete-node", "verify_timeout_s": 60},
        "daemon": {
            "metrics_port": free_port(),
            "metrics_host": "127.0.0.1",
            "snapshot_interval_s": 1,
        },
    }


def prefill(path: Path, count: int) -> None:
    """``count`` executions of a three-node deployment at :data:`PREFILL_LOAD`, an hour apart,
    into a new knowledge store at ``path``."""
    app = Workload("default", "Deployment", APP)
    nodes = tuple(
        NodeState(name, 4000, 16 * 2**30, INSTANCE_TYPE, 4.0, ((app, 1),)) for name in NODES
    )
    executions = [
        Execution(
            id=f"prefill-{n}",
            start=n * 3600.0,
            end=n * 3600.0 + 600,
            load=PREFILL_LOAD,
            cost=12.0,
            cpu_ratio=0.25,
            nodes=nodes,
            workloads=(WorkloadType(app, 1000, 2**30, True),),
        )
        for n in range(count)
    ]
    store = EmbeddedKnowledgeBase(path)
    try:
        store.record_many(executions)
    finally:
        store.close()


def soak(
    cycles: int,
    window: float,
    run: int,
    trace: int | None = None,
    log: Path | None = None,
    probe: int | None = None,
    prefilled: int = PREFILL,
    leak: int = 0,
) -> Soak:
    """One run on a fresh control plane, the knowledge store ``prefilled`` (:func:`prefill`);
    everything it started is stopped and removed (the daemon's log copied to ``log`` first).
    ``leak``: bytes the daemon is made to keep after every cycle (``--leak``)."""
    with tempfile.TemporaryDirectory(prefix="tuner-soak-") as name:
        tmp = Path(name)
        if prefilled:
            prefill(tmp / "knowledge.sqlite", prefilled)
        kube = ClusterHarness(tmp / "cluster", f"soak-{os.getpid()}-{run}")
        kube.start()
        try:
            install_deploy_objects(kube)
            kube.new_namespace()
            for node in NODES:
                _add_node(kube, node)
            kube.deployment(APP, 3, cpu="1", memory="1Gi")
            exporter = TestExporter().start()
            prometheus = PrometheusHarness(exporter, free_port(), tmp / "prometheus")
            try:
                prometheus.start_prometheus()
                exporter.set_rate(LOAD_METRIC, {"service": APP}, 100.0)
                doc = settings_doc(kube, prometheus, tmp, window)
                settings = tmp / "settings.json"
                settings.write_text(json.dumps(doc, indent=2))
                port = doc["daemon"]["metrics_port"]
                return _drive(kube, settings, port, cycles, tmp, trace, probe, leak)
            finally:
                if log is not None and (tmp / "tuner.log").exists():
                    shutil.copy2(tmp / "tuner.log", log)
                prometheus.stop_prometheus(keep_data=False)
                exporter.stop()
        finally:
            kube.stop()


def _add_node(kube: ClusterHarness, name: str) -> None:
    kube.add_node(
        name, cpu="4", memory="16Gi", labels={"node.kubernetes.io/instance-type": INSTANCE_TYPE}
    )


class Daemon:
    """``tuner run`` (the CLI's ``main``, under :mod:`bench.daemon_soak_child` in its ``child``
    mode: ``plain``, ``trace``, ``probe`` or ``leak=BYTES``) in a subprocess, its output in
    ``tmp/tuner.log``."""

    def __init__(self, settings: Path, port: int, tmp: Path, child: str) -> None:
        self.port = port
        self.log = tmp / "tuner.log"
        self.dumps = tmp / "trace"
        argv = [sys.executable, "-m", "bench.daemon_soak_child", child, str(self.dumps)]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [*argv, "run", "--settings", str(settings)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )

    def cycles(self) -> dict[str, float] | None:
        """Cycles by outcome so far (None while /metrics does not answer yet); RuntimeError
        with the log's tail if the daemon exited."""
        if self.process.poll() is not None:
            raise RuntimeError(f"tuner run exited {self.process.returncode}:\n{self.tail()}")
        try:
            return daemon_metrics(self.port)["cycles"]
        except OSError:
            return None

    def rss_mb(self) -> float:
        return rss_mb(self.process.pid)

    def sqlite_mb(self) -> float:
        """SQLite's own allocations as the last cycle ended (0 before the first)."""
        try:
            return int(self.dumps.with_name(f"{self.dumps.name}.sqlite").read_text()) / 2**20
        except (OSError, ValueError):
            return 0.0

    def dump(self, n: int) -> None:
        """Ask the traced daemon for its ``n``-th snapshot and wait until it is written."""
        self.process.send_signal(signal.SIGUSR1)
        types = self.dumps.with_name(f"{self.dumps.name}.{n}.types.json")
        deadline = time.monotonic() + CYCLE_TIMEOUT_S
        while not types.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"the traced daemon wrote no snapshot {n}")
            time.sleep(POLL_S)

    def probe(self, n: int, cycle: int) -> dict[str, float]:
        """Where the probed daemon's memory is now (its ``n``-th dump), after ``cycle``."""
        self.dump(n)
        types = self.dumps.with_name(f"{self.dumps.name}.{n}.types.json")
        found: dict[str, float] = json.loads(types.read_text())[MEMORY]
        return {"cycle": cycle, **{key: round(value, 3) for key, value in found.items()}}

    def stop(self) -> int:
        """SIGTERM, then its exit status (killed after two minutes)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _drive(
    kube: ClusterHarness,
    settings: Path,
    port: int,
    cycles: int,
    tmp: Path,
    trace: int | None,
    probe: int | None = None,
    leak: int = 0,
) -> Soak:
    """``tuner run`` until ``cycles`` cycles have ended, the RSS sampled after each; a node
    brought back whenever the daemon has stayed on two for a while; SIGTERM at the end.
    ``trace``: run it under tracemalloc, snapshots after that many cycles and at the end,
    their difference printed. ``probe``: where its memory is every that many cycles and at
    the end (no tracemalloc). ``leak``: bytes it keeps after every cycle."""
    result = Soak(load=[os.getloadavg()[0]])
    started = time.monotonic()
    daemon = Daemon(settings, port, tmp, _child_mode(trace, probe, leak))
    try:
        seen: dict[str, float] = {}
        stayed_on_two = 0
        last_cycle = time.monotonic()
        while len(result.rss_mb) < cycles:
            if time.monotonic() - last_cycle > CYCLE_TIMEOUT_S:
                raise RuntimeError(f"no cycle for {CYCLE_TIMEOUT_S:.0f} s:\n{daemon.tail()}")
            time.sleep(POLL_S)  # a bench's polling loop, not a test
            found = daemon.cycles()
            if found is None:
                continue
            result.startup_mb = result.startup_mb or daemon.rss_mb()
            done = int(sum(found.values()) - sum(seen.values()))
            if done <= 0:
                continue
            last_cycle = time.monotonic()
            result.rss_mb += [daemon.rss_mb()] * done
            result.sqlite_mb += [daemon.sqlite_mb()] * done
            stayed = found.get("stayed", 0) > seen.get("stayed", 0)
            seen = found
            _look_inside(daemon, result, done, trace, probe)
            missing = _missing_nodes(kube)
            stayed_on_two = stayed_on_two + 1 if missing and stayed else 0
            if stayed_on_two >= STAYED_BEFORE_RETURN:
                _bring_back(kube, missing)
                result.returns += 1
                stayed_on_two = 0
            if len(result.rss_mb) % 25 < done:
                print(f"  cycle {len(result.rss_mb)}: {result.rss_mb[-1]:.1f} MB, {found}")
        metrics = daemon_metrics(port)
        result.cycles, result.actions = metrics["cycles"], metrics["actions"]
        result.cycle_s = mean_cycle_s(port)
        if trace is not None:
            daemon.dump(2)
            print_growth(daemon.dumps, trace, len(result.rss_mb))
        if probe is not None:
            if not result.probes or result.probes[-1]["cycle"] < len(result.rss_mb):
                result.probes.append(daemon.probe(len(result.probes) + 1, len(result.rss_mb)))
            print_probes(result.probes)
    finally:
        result.exit_status = daemon.stop()
    result.wall_s = time.monotonic() - started
    result.load.append(os.getloadavg()[0])
    result.leftovers = kube.leftovers()
    return result


def _child_mode(trace: int | None, probe: int | None, leak: int) -> str:
    """How :mod:`bench.daemon_soak_child` runs the daemon."""
    if trace is not None:
        return "trace"
    if probe is not None:
        return "probe"
    return f"leak={leak}" if leak else "plain"


def mean_cycle_s(port: int) -> float:
    """The daemon's mean cycle duration so far, from its ``/metrics`` on ``port``."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        lines = response.read().decode().splitlines()
    found = {
        name: float(value)
        for name, value in (line.rsplit(" ", 1) for line in lines if not line.startswith("#"))
        if name in ("tuner_cycle_duration_seconds_sum", "tuner_cycle_duration_seconds_count")
    }
    count = found.get("tuner_cycle_duration_seconds_count", 0.0)
    return found.get("tuner_cycle_duration_seconds_sum", 0.0) / count if count else 0.0


def _look_inside(
    daemon: Daemon, result: Soak, done: int, trace: int | None, probe: int | None
) -> None:
    """After ``done`` more cycles: start tracing when the warm-up (``trace`` cycles) has just
    ended; probe when a multiple of ``probe`` cycles has just passed."""
    ran = len(result.rss_mb)
    if trace is not None and ran - done < trace <= ran:
        daemon.dump(1)
    if probe is not None and ran % probe < done:
        result.probes.append(daemon.probe(len(result.probes) + 1, ran))


def _missing_nodes(kube: ClusterHarness) -> list[str]:
    present = {n.metadata.name for n in kube.core.list_node().items}
    return [n for n in NODES if n not in present]


def _bring_back(kube: ClusterHarness, nodes: list[str]) -> None:
    """The removed nodes back, and the app's pods deleted: the scheduler spreads the new ones
    over every node, so that the next removal migrates a pod again."""
    for node in nodes:
        _add_node(kube, node)
    kube.core.delete_collection_namespaced_pod(
        kube.namespace, label_selector=f"app={APP}", grace_period_seconds=0
    )


def print_growth(prefix: Path, first: int, last: int, top: int = 15) -> None:
    """What was allocated after cycle ``first`` and is still alive at ``last``, by allocation
    site, and the object types whose count grew between the two."""
    snapshot = tracemalloc.Snapshot.load(str(prefix.with_name(f"{prefix.name}.2.snapshot")))
    stats = snapshot.statistics("traceback")
    total = sum(s.size for s in stats)
    print(
        f"allocated after cycle {first}, alive at cycle {last}: {total / 2**20:.2f} MiB in "
        f"{sum(s.count for s in stats)} blocks; the {top} largest sites:"
    )
    for stat in stats[:top]:
        frames = " <- ".join(
            f"{Path(f.filename).name}:{f.lineno}" for f in list(stat.traceback)[::-1][:4]
        )
        print(f"  {stat.size / 1024:9.1f} KiB {stat.count:7d} blocks  {frames}")
    counts = [
        json.loads(prefix.with_name(f"{prefix.name}.{n}.types.json").read_text()) for n in (1, 2)
    ]
    where = [c.pop(MEMORY) for c in counts]
    for key in where[0]:
        unit = "" if key in COUNTS else " MB"
        print(f"  {key}: {where[0][key]:.2f} -> {where[1][key]:.2f}{unit}")
    grown = sorted(
        ((counts[1].get(t, 0) - counts[0].get(t, 0), t) for t in counts[1]), reverse=True
    )
    shown = ", ".join(f"{t} {d:+d}" for d, t in grown[:top])
    print(f"  gc-tracked objects that grew most: {shown}")


def print_probes(probes: list[dict[str, float]]) -> None:
    """The ``--probe`` figures as a table, one row per dump."""
    keys = list(probes[0])
    print("| " + " | ".join(keys) + " |")
    for row in probes:
        print("| " + " | ".join(f"{row[k]:g}" for k in keys) + " |")


def import_ladder() -> list[tuple[str, float]]:
    """A fresh interpreter's RSS (MB) at start and after importing each of
    :data:`HEAVY_MODULES` in turn."""
    code = (  # nothing imported before the ladder but what reading /proc needs
        "import importlib, sys\n"
        "def rss():\n"
        "    with open('/proc/self/status') as f:\n"
        "        return next(int(l.split()[1]) / 1024 for l in f if l.startswith('VmRSS:'))\n"
        "print('python', rss())\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        "    print(name, rss())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *HEAVY_MODULES],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return [(name, float(mb)) for name, mb in (line.split() for line in out.splitlines())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=50, help="cycles before the slope")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--window", type=float, default=2.0, help="windows.measure_s")
    parser.add_argument(
        "--limit", type=float, default=0.07, help="MB per 100 cycles over the last third"
    )
    parser.add_argument("--output", type=Path, help="write every run's figures (JSON)")
    parser.add_argument("--logs", type=Path, help="keep each run's daemon log in this directory")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="run the daemon under tracemalloc and print what grew after the warm-up (its RSS "
        "is then inflated by the traces: the figures are not the plain daemon's)",
    )
    parser.add_argument(
        "--prefill",
        type=int,
        default=PREFILL,
        metavar="N",
        help="executions in the knowledge store before the daemon starts (default %(default)s: "
        "more than SQLite's page cache holds; 0: an empty store, whose cache then fills as the "
        "store grows)",
    )
    parser.add_argument(
        "--probe",
        type=int,
        metavar="N",
        help="every N cycles and at the end, record where the daemon's memory is (RSS by kind "
        "of mapping, glibc malloc, pymalloc, SQLite, threads, objects; no tracemalloc)",
    )
    parser.add_argument(
        "--leak",
        type=int,
        default=0,
        metavar="BYTES",
        help="make the daemon keep BYTES more after every cycle: a leak put there to see the "
        "judgement catch it",
    )
    args = parser.parse_args()
    if sum(map(bool, (args.trace, args.probe, args.leak))) > 1:
        parser.error("--trace, --probe and --leak exclude each other")
    if not 1 <= args.warmup < args.cycles:
        parser.error("--warmup must be at least 1 and below --cycles")
    ladder = import_ladder()
    previous = ladder[0][1]
    print("| after importing | RSS MB | + MB |")
    for name, mb in ladder:
        print(f"| {name} | {mb:.1f} | {mb - previous:+.1f} |")
        previous = mb
    runs = []
    for run in range(args.runs):
        trace = args.warmup if args.trace else None
        log = None
        if args.logs is not None:
            args.logs.mkdir(parents=True, exist_ok=True)
            log = args.logs / f"tuner-{run + 1}.log"
        result = soak(
            args.cycles, args.window, run, trace, log, args.probe, args.prefill, args.leak
        ).summary(args.warmup)
        runs.append(result)
        shown = {k: v for k, v in result.items() if k != "rss_mb_per_cycle"}
        print(f"run {run + 1}: {json.dumps(shown)}")
        curve = result["rss_mb_per_cycle"]
        print("  RSS every 25 cycles: " + " ".join(f"{mb:.1f}" for mb in curve[::25]))
    judged = statistics.median(r["last_third_growth_mb_per_100_cycles"] for r in runs)
    slope = statistics.median(r["slope_mb_per_100_cycles"] for r in runs)
    verdict = "PASS" if judged <= args.limit else "FAIL"
    print(
        f"{verdict}: median growth over the last third (RSS less SQLite's page cache) "
        f"{judged:.3f} MB per 100 cycles (limit {args.limit}); RSS slope after {args.warmup} "
        f"cycles {slope:.3f}; peak {statistics.median(r['peak_mb'] for r in runs):.1f} MB; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    if args.output is not None:
        args.output.write_text(json.dumps({"imports": ladder, "runs": runs}, indent=2))
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
