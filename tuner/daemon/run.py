"""``tuner run``: the MAPE-K loop as a daemon against a live cluster.

Wires the adapters into the cycle's ports — the monitor over Prometheus (with API snapshots of
the cluster when kube-state-metrics is not scraped), the Kubernetes actuator, the knowledge
base and the reserve keeper (placeholder pods ahead of a forecast rise,
:mod:`tuner.execute.reserve`; a dry run only reports the reserve) — and runs the moderator. On
start it undoes what a crashed run left behind (never in a dry run); each cycle first takes
back the nodes left for an autoscaler that did not remove them
(``execute.autoscaler_grace_s``, never in a dry run). With leader election it waits for the
Lease first and stops when it loses it. Once it leads, it starts one watch-backed cluster cache
(:mod:`tuner.monitor.cache`) for the process; the cycles and the snapshots of the stability
judge read the cluster from it rather than listing every object each time. Each cycle is
logged, counted in the metrics and, unless in a dry run, recorded as a Kubernetes Event
(:mod:`tuner.daemon.cycle_events`).

SIGTERM or SIGINT: the actuator is asked to stop, so the action in flight is finished or rolled
back and no further action starts; the scheduler shuts down after the cycle; exit status 0.

Exit status of ``--once`` (one cycle, then exit) says what the cycle did:

====  ==========================================================================
0     acted: a change was carried out and every action verified (with
      ``--dry-run``: a change was planned and printed)
3     stayed: the window was stable and no change was worth making
4     waiting: a full window has not passed since the tuner's last change
5     unstable: the deployment changed during the window
6     unknown: the window could not be judged (a query failed, data missing)
7     skipped: the planned change is larger than ``execute.max_actions_per_cycle``
8     failed: an action failed its verification; the transition stopped, undone
9     held: a change was planned but not carried out (paused, outside every
      maintenance window, or the eviction budget spent)
1     a service (Kubernetes, Prometheus) failed; 2 bad input (settings)
====  ==========================================================================

``--shadow`` runs the cycles as ``--dry-run`` does (nothing in the cluster changes, nothing is
printed) and keeps the account of what each would have done and saved in the knowledge base
(:mod:`tuner.daemon.shadow`); ``tuner report`` reads it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from knowledge.lazy import LazyKnowledge
from knowledge.open import open_knowledge
from tuner.cycle import (
    Actuator,
    CycleReport,
    Outcome,
    Ports,
    ReserveKeeper,
)
from tuner.daemon import logs
from tuner.daemon.cycle_events import cycle_event
from tuner.daemon.cycle_log import log_cycle
from tuner.daemon.first_hour import first_hour, once_lacks, startup_lines
from tuner.daemon.leader import LeaderElection
from tuner.daemon.metrics import Metrics
from tuner.daemon.shadow import ShadowAccount
from tuner.errors import ServiceError
from tuner.execute.events import Sink, identity
from tuner.holds import MemorySafeguards, Safeguards
from tuner.model.reserve import Reserve
from tuner.model.window_report import WindowReport
from tuner.moderator import Moderator
from tuner.monitor.cache import SYNC_TIMEOUT_S, ClusterCache
from tuner.monitor.coverage import first_sample
from tuner.monitor.evidence import REQUIRED_METRICS
from tuner.monitor.history import PrometheusHistory
from tuner.monitor.observe import observe_window
from tuner.monitor.prometheus import PrometheusClient, Queries, QueryError
from tuner.monitor.snapshots import SnapshotHistory, SnapshotSource
from tuner.report.text import render_prices, render_text
from tuner.settings import LeaderElectionSettings, Settings, load_settings

log = logging.getLogger("tuner.daemon")

ONCE_EXIT: dict[Outcome, int] = {
    Outcome.ACTED: 0,
    Outcome.PLANNED: 0,
    Outcome.STAYED: 3,
    Outcome.WAITING: 4,
    Outcome.UNSTABLE: 5,
    Outcome.UNKNOWN: 6,
    Outcome.SKIPPED: 7,
    Outcome.FAILED: 8,
    Outcome.HELD: 9,
    Outcome.ERROR: 1,
}


class DaemonActuator(Actuator, Protocol):
    """The cycle's actuator and what the daemon asks of it besides: the stop flag it honours
    between actions, the sink of the cycles' Kubernetes Events, and the start-up recovery
    (:class:`~tuner.execute.actuator.KubeActuator`)."""

    @property
    def stop_requested(self) -> threading.Event:
        """Set to let the action in flight finish or roll back and start no other."""

    @property
    def events(self) -> Sink:
        """Where the cycles' Kubernetes Events go."""

    def recover(self) -> list[str]:
        """Undo what an earlier run left behind; one line per thing undone."""


class MonitorObserver:
    """The cycle's :class:`~tuner.cycle.WindowObserver`: the monitor's ``observe_window``."""

    def __init__(
        self, settings: Settings, prometheus: Queries, snapshots: SnapshotSource | None
    ) -> None:
        self.settings = settings
        self.prometheus = prometheus
        self.snapshots = snapshots

    def observe(self, start: float, end: float) -> WindowReport:
        return observe_window(self.settings, end, self.prometheus, self.snapshots, start=start)


def add_run_parser(commands: Any) -> None:
    """Register ``tuner run``."""
    run = commands.add_parser("run", help="run the tuner: a MAPE-K cycle every window")
    run.add_argument("--settings", type=Path, required=True, help="settings.json")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="print each cycle's planned transitions; change nothing (cluster or knowledge base)",
    )
    mode.add_argument(
        "--shadow",
        action="store_true",
        help="change nothing in the cluster; keep the account of what each cycle would have "
        "done and saved in the knowledge base (read it with tuner report)",
    )
    run.add_argument(
        "--once",
        action="store_true",
        help="run one cycle and exit with what it did: 0 acted (or planned), 3 stayed, "
        "4 waiting, 5 unstable, 6 unknown, 7 skipped, 8 failed, 9 held",
    )
    run.add_argument("--log-format", choices=("text", "json"), default="text")
    run.set_defaults(run=run_daemon)


def run_daemon(args: argparse.Namespace) -> int:
    """``tuner run``."""
    settings = load_settings(args.settings)
    from tuner.daemon.safeguards import ClusterSafeguards
    from tuner.execute.actuator import KubeActuator
    from tuner.execute.reserve import KubeReserveKeeper
    from tuner.monitor.kube import api_client

    logs.configure(verbose=args.verbose, json_lines=args.log_format == "json")
    dry_run: bool = args.dry_run
    api = api_client(settings.kubernetes)
    actuator = KubeActuator(api, settings)
    actuator.cache = ClusterCache(api)
    forecast = settings.forecast
    reserve = None  # a dry run (or shadow) only reports the reserve
    if forecast.enabled and forecast.reserve_max_nodes > 0 and not (dry_run or args.shadow):
        reserve = KubeReserveKeeper(actuator.kube, actuator.read, settings, actuator.events)
    kb = LazyKnowledge(lambda: open_knowledge(settings.knowledge, read_only=dry_run))
    with PrometheusClient(settings.prometheus) as prometheus, kb, api:
        daemon = Daemon(
            settings,
            actuator,
            prometheus,
            kb,
            dry_run=dry_run,
            shadow=args.shadow,
            cache=actuator.cache,
            safeguards=ClusterSafeguards(actuator.kube, settings.limits),
            reserve=reserve,
        )
        if args.once:
            return daemon.once()
        return daemon.serve(api)


class Daemon:
    """The moderator with its ports, metrics, snapshots, cluster cache and signal handling.

    The ``cache`` (the one the actuator reads) is started once this replica may act: at once
    with ``--once``, after winning the lease otherwise; it is stopped on the way out. A
    ``shadow`` daemon runs its cycles as a dry run and keeps their account.
    """

    def __init__(
        self,
        settings: Settings,
        actuator: DaemonActuator,
        prometheus: Queries,
        kb: LazyKnowledge,
        *,
        dry_run: bool,
        shadow: bool = False,
        cache: ClusterCache | None = None,
        safeguards: Safeguards | None = None,
        reserve: ReserveKeeper | None = None,
    ) -> None:
        windows = settings.windows
        interval = settings.daemon.snapshot_interval_s
        self.settings = settings
        self.actuator = actuator
        self.prometheus = prometheus
        self.kb = kb
        self.dry_run = dry_run or shadow
        self.cache = cache
        self.single = False
        """``--once``: the only cycle."""
        self.prices = ""
        """The node prices last logged (logged again when they change)."""
        self.history = SnapshotHistory(
            actuator.read,
            max_age_s=2 * interval,
            keep_s=windows.measure_s + windows.warmup_s + 2 * interval,
        )
        self.metrics = Metrics(stale_after_s=3 * (windows.measure_s + windows.warmup_s) + 60)
        self.shadow = ShadowAccount(kb, self.metrics) if shadow else None
        observer = MonitorObserver(settings, prometheus, self.history)
        history = PrometheusHistory(prometheus, settings)
        ports = Ports(observer, actuator, kb, safeguards or MemorySafeguards(), history, reserve)
        self.moderator = Moderator(settings, ports, dry_run=self.dry_run, on_cycle=self._on_cycle)
        self.reserve = reserve
        self.paused: str | None = None
        self.stopping = threading.Event()
        self.lost = threading.Event()

    def once(self) -> int:
        """Recover, run one cycle, exit with its status (0 after a signal)."""
        self._handle_signals()
        self.single = True
        try:
            self._start_cache()
            if self.stopping.is_set():  # a signal while the cache was syncing
                return 0
            if not self.dry_run:
                self._recover()
            report = self.moderator.run_once()
        finally:
            self._stop_cache()
        lacks = once_lacks(report, self.settings)
        if lacks:
            log.info("what this single cycle lacked: %s", lacks)
        return 0 if self.stopping.is_set() else ONCE_EXIT[report.outcome]

    def serve(self, api: Any) -> int:
        """Run until a signal (exit 0) or a lost lease (exit 1)."""
        daemon = self.settings.daemon
        server = self.metrics.serve(daemon.metrics_port, daemon.metrics_host)
        host = f"[{daemon.metrics_host}]" if ":" in daemon.metrics_host else daemon.metrics_host
        log.info("metrics on http://%s:%d/metrics", host, server.server_address[1])
        self._handle_signals()
        election = _election(api, daemon.leader_election)
        try:
            if election is not None:
                self.metrics.leader.set(0)
                if not self._wait_for_lease(election):
                    return 0
                election.keep_renewing(self._on_lost_lease)
            self.metrics.leader.set(1)
            self._start_cache()
            if self.stopping.is_set():  # a signal (or a lost lease) while the cache synced
                return 1 if self.lost.is_set() else 0
            if not self.dry_run:
                self._recover()
            self.history.take()
            self.moderator.every(daemon.snapshot_interval_s, self._snapshot, "snapshot")
            mode = " (dry run: nothing is changed)" if self.dry_run else ""
            if self.shadow is not None:
                mode = " (shadow: nothing is changed; the account goes to the knowledge base)"
            log.info("tuner running%s: a window is %.0f s", mode, self.settings.windows.measure_s)
            self._log_first_hour()
            self.moderator.run_forever()
        finally:
            self._release_reserve()
            self._stop_cache()
            if election is not None:
                election.release()
            self.metrics.leader.set(0)
            server.shutdown()
        log.info("tuner stopped")
        return 1 if self.lost.is_set() else 0

    def stop(self) -> None:
        """Ask the action in flight to finish or roll back, then stop scheduling."""
        self.stopping.set()
        self.actuator.stop_requested.set()
        threading.Thread(target=self.moderator.stop, daemon=True, name="stop").start()

    def _handle_signals(self) -> None:
        def on_signal(number: int, _frame: FrameType | None) -> None:
            log.info("%s: stopping after the action in flight", signal.Signals(number).name)
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def _on_lost_lease(self, why: str) -> None:
        log.error("lost the lease (%s): stopping", why)
        self.lost.set()
        self.stop()

    def _log_first_hour(self) -> None:
        """When the first verdict and the first removal can come, and why."""
        now = time.time()
        windows = self.settings.windows
        span = windows.measure_s + windows.warmup_s
        series = REQUIRED_METRICS[0]
        try:
            since = first_sample(self.prometheus, series, now - span, now, max(span / 100, 1.0))
        except QueryError as err:
            log.warning("could not ask Prometheus for %s (%s): assuming it absent", series, err)
            since = None
        for line in startup_lines(self.settings, now, first_hour(self.settings, now, since)):
            log.info(line)

    def _on_cycle(self, report: CycleReport, seconds: float) -> None:
        log_cycle(report, log, once=self.single)
        self._log_pause(report)
        if report.plan is not None:
            prices = render_prices(report.plan.prices, report.plan.currency)
            if prices != self.prices:
                log.info("node prices: %s", prices)
                self.prices = prices
        if self.shadow is not None:
            self.shadow.account(report)
        elif self.dry_run and report.plan is not None:
            try:
                print(render_text(report.plan), flush=True)
            except BrokenPipeError:  # `tuner run --dry-run | head`: the reader is gone
                log.info("the output's reader is gone: stopping")
                self.stop()
        if not self.dry_run:
            self.actuator.events.record(cycle_event(report, self.settings.daemon.leader_election))
        self.metrics.observe(report, seconds)
        size = self.kb.size()
        if size is not None:
            self.metrics.knowledge.set(size)

    def _log_pause(self, report: CycleReport) -> None:
        """Say when the pause switch was flipped (an ERROR cycle does not know)."""
        if report.outcome is Outcome.ERROR or report.paused == self.paused:
            return
        if report.paused is not None:
            log.warning("%s: the tuner plans but changes nothing meanwhile", report.paused)
        else:
            log.info("resumed: the pause annotation is gone")
        self.paused = report.paused

    def _snapshot(self) -> None:
        try:
            self.history.take()
        except ServiceError as err:
            log.warning("cluster snapshot failed: %s", err)

    def _start_cache(self) -> None:
        """Start the cluster cache and wait (bounded) for its first sync; a cycle that finds it
        still unsynced fails with a ServiceError saying which kinds are missing."""
        if self.cache is None:
            return
        started = time.monotonic()
        self.cache.start()
        while not self.cache.wait_synced(1.0):
            if self.stopping.is_set() or time.monotonic() - started > SYNC_TIMEOUT_S:
                log.warning("cluster cache not synced yet: %s", self.cache.why())
                return
        objects = sum(count[0] for count in self.cache.counts().values())
        log.info("cluster cache synced in %.1f s (%d objects)", time.monotonic() - started, objects)

    def _stop_cache(self) -> None:
        if self.cache is not None:
            self.cache.stop()

    def _release_reserve(self) -> None:
        """On the way out, remove the placeholders held: a stopped daemon holds no room (after
        a crash, the next start's recovery removes them)."""
        if self.reserve is None or self.dry_run:
            return
        now = time.time()
        outcome = self.reserve.hold(Reserve(now, now, reason="the daemon stopped", last=True), now)
        if outcome.removed:
            log.info("stopping: removed placeholder pods %s", ", ".join(outcome.removed))
        if outcome.failed is not None:
            log.error("stopping: placeholders left (recovery deletes them): %s", outcome.failed)

    def _recover(self) -> None:
        undone: list[str] = self.actuator.recover()
        for line in undone:
            log.warning("recovered from an earlier run: %s", line)
        if not undone:
            log.info("nothing left over from an earlier run")

    def _wait_for_lease(self, election: LeaderElection) -> bool:
        """Block until this replica holds the lease (True) or a signal arrives (False)."""
        log.info(
            "waiting for lease %s/%s as %s", election.namespace, election.name, election.identity
        )
        while not election.try_acquire():
            self.metrics.touch()  # a standby replica is healthy
            if self.stopping.wait(election.duration_s / 3):
                return False
        log.info("leading as %s", election.identity)
        return True


def _election(api: Any, settings: LeaderElectionSettings) -> LeaderElection | None:
    if not settings.enabled:
        return None
    return LeaderElection(
        api,
        settings.namespace,
        settings.name,
        identity(settings.identity_env),
        settings.lease_duration_s,
    )
