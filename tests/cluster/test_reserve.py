"""Provision ahead, for real: a forecast rise read from a real Prometheus (two days of a load
that rises at this time of day, backfilled, then scraped live) makes the daemon's cycle hold
placeholder pods on the project's control plane; ``node_provision: command`` adds a KWOK node
the placeholder binds to; the Deployment's real pods, scaled as the HPA would, preempt it
(kube-scheduler's own preemption) and nothing is left. A ``tuner run`` killed with SIGKILL
while holding a placeholder leaves it behind, and the next start's recovery deletes it."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes.client.exceptions import ApiException

from knowledge.memory import MemoryKnowledge
from testkit.cluster_fixture import REPO_ROOT, TUNER_NAMESPACE, ClusterHarness, eventually
from testkit.prometheus_fixture import PrometheusHarness, free_port
from testkit.prometheus_history import METRIC, Sample, backfilled
from tests.cluster.test_provision import POOL_LABEL, _priority_class, _provision_script
from tuner.cycle import CycleReport, CycleState, Ports, run_cycle
from tuner.daemon.run import MonitorObserver
from tuner.execute.actuator import KubeActuator
from tuner.execute.reserve import KubeReserveKeeper
from tuner.model.conventions import Keys
from tuner.monitor.history import PrometheusHistory
from tuner.monitor.prometheus import PrometheusClient
from tuner.settings import Settings, settings_from_dict

pytestmark = pytest.mark.prometheus

KEYS = Keys()
STEP = 60.0
DAY = 86400.0
RISE_IN_S = 900.0
"""On the days before, the load rose this long after the time of day the module started."""
HORIZON_S = 1800.0
RESERVE_JOURNAL = f"{KEYS.journal}-reserve"


@pytest.fixture(scope="module")
def rising(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusHarness]:
    """Prometheus holding two days of a load of 100 that rose to 150 for an hour from
    :data:`RISE_IN_S` after now's time of day; live, the exporter serves 100."""
    end = math.floor(time.time() / STEP) * STEP
    rise = (end + RISE_IN_S) % DAY
    samples: list[Sample] = [
        ({}, float(t), 150.0 if 0 <= (t - rise) % DAY < 3600 else 100.0)
        for t in np.arange(end - 2 * DAY, end + 1, STEP)
    ]
    with backfilled(tmp_path_factory.mktemp("prometheus-rise"), samples) as harness:
        harness.exporter.set_gauge(METRIC, {}, 100.0)
        harness.wait_for_scrapes(2)
        yield harness


def _settings_doc(kube: ClusterHarness, prometheus: PrometheusHarness, **execute: Any) -> Any:
    return {
        **kube.settings_doc(**execute),
        "prometheus": {"url": prometheus.url},
        "load": {"query": f"sum({METRIC})"},
        "forecast": {
            "horizon_s": HORIZON_S,
            "lookback_s": 3 * DAY,
            "reserve_max_nodes": 3,
            # the reserve looks a node's start-up plus one retry ahead: the rise is within it
            "node_startup_s": RISE_IN_S,
        },
        "windows": {"measure_s": 60, "retry_s": 30},
    }


def _web_under_an_hpa(kube: ClusterHarness) -> str:
    """A full node of pool small running two 2-CPU pods of a Deployment an HPA may take to 4
    (none scales it here: no metrics-server)."""
    _priority_class(kube)
    node = kube.add_node(f"{kube.namespace}-a", cpu="4", memory="8Gi", labels={POOL_LABEL: "small"})
    kube.deployment("web", 2, cpu="2", onboarded=False, node_selector={POOL_LABEL: "small"})
    kube.hpa("web", 1, 4)
    return node


def _reserved(kube: ClusterHarness) -> list[Any]:
    pods = kube.core.list_pod_for_all_namespaces(label_selector=KEYS.reserve).items
    return [p for p in pods if not p.metadata.deletion_timestamp]


def _journal(kube: ClusterHarness) -> dict[str, str] | None:
    try:
        cm = kube.core.read_namespaced_config_map(RESERVE_JOURNAL, TUNER_NAMESPACE)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return dict(cm.data or {})


@contextlib.contextmanager
def _no_placeholder_left(kube: ClusterHarness) -> Iterator[None]:
    """However the test ends, its placeholders (outside its namespace) and journal go."""
    try:
        yield
    finally:
        for pod in _reserved(kube):
            with contextlib.suppress(ApiException):
                kube.core.delete_namespaced_pod(
                    pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                )
        with contextlib.suppress(ApiException):
            kube.core.delete_namespaced_config_map(RESERVE_JOURNAL, TUNER_NAMESPACE)


class _Cycles:
    """The daemon's cycles with a reserve keeper (and the actuator's Events) on the cluster."""

    def __init__(self, kube: ClusterHarness, settings: Settings) -> None:
        self.settings = settings
        self.actuator = KubeActuator(kube.api, settings)
        actuator = self.actuator
        self.keeper = KubeReserveKeeper(actuator.kube, actuator.read, settings, actuator.events)
        self.state = CycleState()

    def __call__(self, prometheus: PrometheusClient, *, history: bool = True) -> CycleReport:
        """One cycle now; without ``history`` there is no forecast (a reserve asks nothing)."""
        settings = self.settings
        ports = Ports(
            MonitorObserver(settings, prometheus, None),
            self.actuator,
            MemoryKnowledge(),
            history=PrometheusHistory(prometheus, settings) if history else None,
            reserve=self.keeper,
        )
        report, self.state = run_cycle(time.time(), self.state, settings, ports, random.Random(0))
        return report


def test_a_forecast_rise_holds_a_node_that_the_real_pods_then_take(
    kube: ClusterHarness, rising: PrometheusHarness, tmp_path: Path
) -> None:
    _web_under_an_hpa(kube)
    new = f"{kube.namespace}-b"
    command = _provision_script(kube, tmp_path, new)
    doc = _settings_doc(kube, rising, node_provision="command", node_provision_command=command)
    settings = settings_from_dict(doc)
    cycle = _Cycles(kube, settings)

    with _no_placeholder_left(kube), PrometheusClient(settings.prometheus) as prometheus:
        first = cycle(prometheus)
        assert first.forecast is not None and first.reserve is not None
        assert first.forecast.peak.upper >= 1.4 * first.forecast.last, first.forecast
        assert [n.pool for n in first.reserve.nodes] == ["small"], first.reserve.reason
        assert first.reserved is not None and first.reserved.failed is None
        (name,) = first.reserved.created
        assert first.reserved.standing == 1
        (placeholder,) = _reserved(kube)
        assert placeholder.metadata.name == name
        assert placeholder.spec.priority == -10
        assert placeholder.spec.preemption_policy == "Never"
        assert placeholder.spec.node_selector == {POOL_LABEL: "small"}
        assert placeholder.metadata.annotations[KEYS.reserve_until]
        assert set(_journal(kube) or {}) == {name}
        # The provision command added a KWOK node of the pool: the placeholder binds to it.
        bound = eventually(
            lambda: next((p.spec.node_name for p in _reserved(kube) if p.spec.node_name), None),
            what="the placeholder bound to the new node",
        )
        assert bound == new

        again = cycle(prometheus)
        assert again.reserved is not None
        assert (again.reserved.created, again.reserved.removed) == ((), ())
        assert again.reserved.standing == 1

        # The load arrives: the HPA would take web to its maximum; two 2-CPU pods pending and
        # the new node's room held by the placeholder: kube-scheduler preempts it.
        kube.apps.patch_namespaced_deployment_scale(
            "web", kube.namespace, {"spec": {"replicas": 4}}
        )
        kube.wait_available("web", 4)
        assert sorted(kube.placement("app=web").values()).count(new) == 2
        eventually(lambda: not _reserved(kube), what="the placeholder preempted")
        preempted = kube.core.list_namespaced_event(
            TUNER_NAMESPACE, field_selector=f"involvedObject.name={name},reason=Preempted"
        ).items
        assert preempted, "kube-scheduler's Preempted event on the placeholder"

        after = cycle(prometheus)
        assert after.reserve is not None and after.reserve.nodes == ()  # web is at the max
        assert after.reserved is not None
        assert (after.reserved.created, after.reserved.removed) == ((), ())
        assert after.reserved.standing == 0
        assert _reserved(kube) == []
        assert _journal(kube) is None
        assert kube.leftovers() == []


def test_a_reserve_node_no_pod_took_is_released_through_the_removal_command(
    kube: ClusterHarness, rising: PrometheusHarness, tmp_path: Path
) -> None:
    _web_under_an_hpa(kube)
    new = f"{kube.namespace}-b"
    provision = _provision_script(kube, tmp_path, new)
    removal = [kube.env["TUNER_KUBECTL"], "--kubeconfig", kube.kubeconfig, "delete", "node"]
    doc = _settings_doc(
        kube,
        rising,
        node_provision="command",
        node_provision_command=provision,
        node_removal="command",
        node_removal_command=removal,
    )
    cycle = _Cycles(kube, settings_from_dict(doc))

    with _no_placeholder_left(kube), PrometheusClient(cycle.settings.prometheus) as prometheus:
        first = cycle(prometheus)
        assert first.reserved is not None and first.reserved.failed is None, first.reserve
        (name,) = first.reserved.created
        eventually(
            lambda: any(p.spec.node_name == new for p in _reserved(kube)),
            what="the placeholder bound to the new node",
        )

        # The forecast no longer holds the reserve (none at all here): a false alarm, no real
        # pod took the node. The placeholder goes and the node with it, at once.
        after = cycle(prometheus, history=False)

        assert after.reserve is not None and after.reserve.nodes == (), after.reserve
        assert after.reserved is not None and after.reserved.failed is None, after.reserved
        assert after.reserved.removed == (name,) and after.reserved.standing == 0
        assert new not in {n.metadata.name for n in kube.core.list_node().items}
        (event,) = kube.core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={new},reason=Released"
        ).items
        assert "removed by the provider command (kubectl)" in event.message, event.message
        assert _reserved(kube) == []
        assert _journal(kube) is None
        assert sorted(kube.placement("app=web").values()) == [f"{kube.namespace}-a"] * 2
        assert kube.leftovers() == []


def _daemon_settings(kube: ClusterHarness, prometheus: PrometheusHarness, path: Path) -> Any:
    """``tuner run``'s settings, written to ``path``; the document."""
    doc = _settings_doc(kube, prometheus)
    doc["knowledge"] = {"path": str(path.with_suffix(".sqlite"))}
    doc["daemon"] = {"metrics_port": free_port(), "metrics_host": "127.0.0.1"}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return doc


def _tuner(settings: Path, *args: str) -> subprocess.Popen[str]:
    """``tuner run`` in a subprocess, its output in a log file beside the settings."""
    log = settings.with_suffix(f".{len(list(settings.parent.glob('*.log')))}.log")
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "run", "--settings", str(settings), *args],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _output(tmp_path: Path) -> str:
    return "".join(p.read_text() for p in sorted(tmp_path.glob("*.log")))


def _holding(kube: ClusterHarness) -> str:
    """The name of the one placeholder the daemon holds, once it does (journaled first)."""
    (placeholder,) = eventually(lambda: _reserved(kube) or None, 120, what="a placeholder")
    name = str(placeholder.metadata.name)
    assert set(_journal(kube) or {}) == {name}
    return name


def test_a_sigkill_while_holding_a_placeholder_leaves_nothing_after_the_next_start(
    kube: ClusterHarness, rising: PrometheusHarness, tmp_path: Path
) -> None:
    _web_under_an_hpa(kube)
    settings = tmp_path / "settings.json"
    doc = _daemon_settings(kube, rising, settings)
    with _no_placeholder_left(kube):
        running = _tuner(settings)
        try:
            name = _holding(kube)
        finally:
            os.kill(running.pid, signal.SIGKILL)
            running.wait(60)
        assert [p.metadata.name for p in _reserved(kube)] == [name]  # left behind

        off = tmp_path / "off.json"  # the same daemon, reserving nothing: only recovery acts
        forecast = {**doc["forecast"], "reserve_max_nodes": 0}
        off.write_text(json.dumps({**doc, "forecast": forecast}), encoding="utf-8")
        _tuner(off, "--once").wait(120)
        output = _output(tmp_path)
        assert f"recovered from an earlier run: placeholder pod {TUNER_NAMESPACE}/{name}" in (
            output
        ), output
        assert "a reserve of 1 placeholder pod(s) was held" in output
        assert _reserved(kube) == []
        assert _journal(kube) is None


def test_a_daemon_stopped_by_sigterm_removes_its_placeholders(
    kube: ClusterHarness, rising: PrometheusHarness, tmp_path: Path
) -> None:
    _web_under_an_hpa(kube)
    settings = tmp_path / "settings.json"
    _daemon_settings(kube, rising, settings)
    with _no_placeholder_left(kube):
        running = _tuner(settings)
        try:
            name = _holding(kube)
        finally:
            running.send_signal(signal.SIGTERM)
            status = running.wait(120)
        assert status == 0, _output(tmp_path)
        assert f"stopping: removed placeholder pods {name}" in _output(tmp_path)
        assert _reserved(kube) == []
        assert _journal(kube) is None
