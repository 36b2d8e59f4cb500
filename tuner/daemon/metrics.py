"""Prometheus metrics and the /healthz endpoint of the daemon.

Served on one port: ``/metrics`` (Prometheus text format) and ``/healthz`` (200 while cycles
keep completing, 503 once no cycle has finished for three windows).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tuner.cycle import CycleReport, Outcome
from tuner.daemon.http_server import READ_TIMEOUT_S, BoundedServer
from tuner.model.account import saving
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode
from tuner.plan.reserve import per_pool


def action_op(action: Action) -> str:
    """The op name of an action, as in the plan output."""
    match action:
        case Migrate():
            return "migrate"
        case Add():
            return "add"
        case Remove():
            return "remove"
        case RemoveNode():
            return "remove_node"
        case ProvisionNode():
            return "provision_node"


class Metrics:
    """The daemon's metrics in their own registry."""

    def __init__(self, stale_after_s: float) -> None:
        self.registry = CollectorRegistry()
        self.cycles = Counter(
            "tuner_cycles", "Cycles by outcome", ["outcome"], registry=self.registry
        )
        self.actions = Counter(
            "tuner_actions", "Actions by op and result", ["op", "result"], registry=self.registry
        )
        self.eviction_only = Counter(
            "tuner_eviction_only_actions",
            "Verified migrations and adds of workloads not onboarded: placement not controlled "
            "(the scheduler chose the node; verified off the source)",
            ["op"],
            registry=self.registry,
        )
        self.landed_elsewhere = Counter(
            "tuner_landed_elsewhere_actions",
            "Verified migrations and adds of onboarded workloads whose pod the scheduler put on "
            "another node than the labelled destination (its other scores outweighed the "
            "label's preferred affinity; verified off the source and the nodes being emptied)",
            ["op"],
            registry=self.registry,
        )
        self.cost = Gauge(
            "tuner_cost_per_hour",
            "Estimated node cost per hour before and after the last decision",
            ["when"],
            registry=self.registry,
        )
        self.knowledge = Gauge(
            "tuner_knowledge_executions",
            "Stable deployments in the knowledge base",
            registry=self.registry,
        )
        self.duration = Histogram(
            "tuner_cycle_duration_seconds",
            "Wall-clock duration of a cycle",
            buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800),
            registry=self.registry,
        )
        self.last_cycle = Gauge(
            "tuner_last_cycle_timestamp_seconds",
            "When the last cycle finished (wall clock)",
            registry=self.registry,
        )
        self.leader = Gauge(
            "tuner_leader",
            "1 while this replica holds the lease (always 1 without leader election)",
            registry=self.registry,
        )
        self.saved = Counter(
            "tuner_saved_usd",
            "Saved by verified transitions: each acting cycle's saving per hour held until the "
            "next cycle (in pricing.currency, USD by default)",
            registry=self.registry,
        )
        self.would_save = Counter(
            "tuner_would_save_usd",
            "Shadow mode: what each cycle's plan would have saved until the next cycle (in "
            "pricing.currency), as in tuner report",
            registry=self.registry,
        )
        self.paused = Gauge(
            "tuner_paused",
            "1 while the pause annotation on limits.pause_config_map holds every change",
            registry=self.registry,
        )
        self.forecast = Gauge(
            "tuner_load_forecast",
            "The peak load expected over the next horizon (forecast.horizon_s, else "
            "forecast.node_startup_s + windows.measure_s): expected, and its band's lower and "
            "upper edges",
            ["bound"],
            registry=self.registry,
        )
        self.reserve_nodes = Gauge(
            "tuner_reserve_nodes",
            "Nodes the last forecast asks to hold ahead of its rise, per pool",
            ["pool"],
            registry=self.registry,
        )
        self.placeholders = Gauge(
            "tuner_reserve_placeholders",
            "Placeholder pods standing for the reserve after the last cycle",
            registry=self.registry,
        )
        self.placeholders_created = Counter(
            "tuner_reserve_placeholders_created",
            "Placeholder pods created for a reserve (each verified)",
            registry=self.registry,
        )
        self.placeholders_removed = Counter(
            "tuner_reserve_placeholders_removed",
            "Placeholder pods the keeper removed (no longer asked for, or their reserve ended; "
            "not those the scheduler preempted), each verified gone",
            registry=self.registry,
        )
        self._reserved_pools: set[str] = set()
        self.stale_after_s = stale_after_s
        self._finished = time.time()

    def observe(self, report: CycleReport, seconds: float) -> None:
        """Account for one finished cycle."""
        self.cycles.labels(report.outcome.value).inc()
        self.duration.observe(seconds)
        if report.outcome is not Outcome.ERROR:
            self.paused.set(report.paused is not None)
        if report.forecast is not None:
            peak = report.forecast.peak
            for bound, value in peak.to_json().items():
                self.forecast.labels(bound).set(value)
        self._observe_reserve(report)
        if report.plan is not None:
            analysis = report.plan.analysis
            self.cost.labels("before").set(analysis.cost_current)
            self.cost.labels("after").set(analysis.cost_after)
            if report.outcome is Outcome.ACTED:
                self.saved.inc(saving(analysis.cost_current, analysis.cost_after, report.next_in))
        if report.result is not None and report.plan is not None:
            ok = "dry_run" if report.outcome is Outcome.PLANNED else "verified"
            for action in report.result.done:
                self.actions.labels(action_op(action), ok).inc()
            for action in report.result.eviction_only:
                self.eviction_only.labels(action_op(action)).inc()
            for action, _ in report.result.landed_elsewhere:
                self.landed_elsewhere.labels(action_op(action)).inc()
            if not report.result.completed and len(report.result.done) < len(report.plan.actions):
                failed = report.plan.actions[len(report.result.done)]
                self.actions.labels(action_op(failed), "failed").inc()
        self._finished = time.time()
        self.last_cycle.set(self._finished)

    def _observe_reserve(self, report: CycleReport) -> None:
        if report.reserve is not None:
            pools = per_pool(report.reserve)
            self._reserved_pools |= set(pools)
            for pool in self._reserved_pools:  # a pool asked for before and not now: 0
                self.reserve_nodes.labels(pool).set(pools.get(pool, 0))
        held = report.reserved
        if held is not None:
            self.placeholders.set(held.standing)
            self.placeholders_created.inc(len(held.created))
            self.placeholders_removed.inc(len(held.removed))

    def touch(self) -> None:
        """Count as alive without a cycle (a standby replica waiting for the lease)."""
        self._finished = time.time()

    def healthy(self) -> bool:
        """True while cycles keep finishing."""
        return time.time() - self._finished < self.stale_after_s

    def serve(self, port: int, host: str = "0.0.0.0") -> BoundedServer:
        """Serve /metrics and /healthz in a background thread (bounded: see
        :mod:`tuner.daemon.http_server`); returns the server."""
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            timeout = READ_TIMEOUT_S

            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry))
                elif self.path == "/healthz":
                    ok = metrics.healthy()
                    self._send(200 if ok else 503, "text/plain", b"ok\n" if ok else b"stale\n")
                else:
                    self._send(404, "text/plain", b"not found\n")

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: scrapes are not news."""

        server = BoundedServer(host, port, Handler)
        threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
        return server
