"""Issue 28, worst 1: ``kubernetes.api_server`` is where every request goes, whatever the
kubeconfig's auth — proved on two real control planes from both API servers' audit logs.

Cluster A is the session's control plane, cluster B a second one started for this module. The
tuner's kubeconfig names A's server with a token user (the token is B's tuner ServiceAccount's,
the CA bundle trusts both), and the settings name B in ``api_server``. ``plan --live``,
``monitor``, ``run --once --dry-run`` and a daemon that removes a node (with leader election and
Events) must all reach B and never A: before the fix, the client's token refresh hook copied A
back into every request.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testkit.cluster_fixture import ClusterHarness
from testkit.prometheus_fixture import PrometheusHarness
from tests.e2e.harness import (
    APP,
    LOAD_METRIC,
    ROOT,
    Tuner,
    add_nodes,
    audit_events,
    deploy_app,
    free_port,
    mutations,
    settled,
    tuner_kubeconfig,
    wait_for,
    write_settings,
)
from tests.unit.test_deploy import NAMESPACE, SERVICE_ACCOUNT

USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
CLIENT = "OpenAPI-Generator/"
"""The user agent of the Python client (the tuner's requests, and this test's own)."""


@pytest.fixture(scope="module")
def cluster_b(
    tmp_path_factory: pytest.TempPathFactory, kube_harness: ClusterHarness
) -> Iterator[ClusterHarness]:
    """A second control plane (``kube_harness`` first: the binaries are built, or skipped)."""
    harness = ClusterHarness(
        tmp_path_factory.mktemp("cluster-b"), f"{kube_harness.env['TUNER_CLUSTER_NAME']}-b"
    )
    try:
        harness.start()
        yield harness
    finally:
        harness.stop()


def _ca(kubeconfig: str) -> bytes:
    entry = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    if "certificate-authority-data" in entry:
        return base64.b64decode(entry["certificate-authority-data"])
    return Path(entry["certificate-authority"]).read_bytes()


def _server(kubeconfig: str) -> str:
    return str(yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"])


def _pointing_at_a(a: ClusterHarness, b: ClusterHarness, path: Path) -> Path:
    """B's tuner token, A's server, a CA bundle of both."""
    own = yaml.safe_load(tuner_kubeconfig(b, path).read_text())
    cluster = own["clusters"][0]["cluster"]
    cluster["server"] = _server(a.kubeconfig)
    cluster["certificate-authority-data"] = base64.b64encode(
        _ca(a.kubeconfig) + b"\n" + _ca(b.kubeconfig)
    ).decode()
    assert "token" in own["users"][0]["user"]
    path.write_text(yaml.safe_dump(own))
    return path


def _from_the_client(kube: ClusterHarness, since: int) -> list[dict[str, Any]]:
    """Requests that reached ``kube`` from the Python client, or unauthenticated, since then."""
    with kube.audit_log.open("rb") as log:
        log.seek(since)
        events = [json.loads(line) for line in log.read().decode().splitlines() if line]
    return [
        e
        for e in events
        if e.get("userAgent", "").startswith(CLIENT)
        or e.get("responseStatus", {}).get("code") == 401
    ]


def _tuner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_every_command_and_the_daemon_reach_the_configured_api_server_only(
    kube: ClusterHarness,
    cluster_b: ClusterHarness,
    prometheus: PrometheusHarness,
    tmp_path: Path,
) -> None:
    a, b = kube, cluster_b
    b.new_namespace()
    try:
        kubeconfig = _pointing_at_a(a, b, tmp_path / "tuner.kubeconfig")
        add_nodes(b, ["b-node-1", "b-node-2", "b-node-3"])
        deploy_app(b, replicas=3)
        prometheus.exporter.set_rate(LOAD_METRIC, {"service": APP}, 100.0)
        state = wait_for("3 ready pods on B", lambda: settled(b, 3), 60)
        assert sorted(state.pods_per_node.values()) == [1, 1, 1]
        a_from, b_from = a.audit_log.stat().st_size, b.audit_log.stat().st_size

        settings = write_settings(
            tmp_path / "settings.json",
            pricing={"price_per_core": 1.0, "price_per_gb": 0.0},
            analyse={
                "candidate_delay_s": 0,
                "thresholds": {"cpu": 0.7},
                "excluded_namespaces": ["kube-system", NAMESPACE],
            },
            load={"delta": 0.1, "query": f"sum(rate({LOAD_METRIC}[$window]))"},
            windows={"measure_s": 10, "retry_s": 2, "warmup_s": 0},
            knowledge={"path": str(tmp_path / "kb.sqlite")},
            prometheus={"url": prometheus.url},
            kubernetes={"kubeconfig": str(kubeconfig), "api_server": _server(b.kubeconfig)},
            execute={
                "node_removal": "delete-node",
                "verify_timeout_s": 60,
                "journal_namespace": NAMESPACE,
            },
            daemon={
                "metrics_port": free_port(),
                "metrics_host": "127.0.0.1",
                "snapshot_interval_s": 1,
                "leader_election": {"enabled": True, "namespace": NAMESPACE},
            },
        )

        plan = _tuner("plan", "--live", "--settings", str(settings))
        assert plan.returncode == 0, plan.stderr
        assert "b-node-" in plan.stdout
        monitor = _tuner("monitor", "--settings", str(settings))
        assert monitor.returncode in (0, 1), monitor.stderr
        once = _tuner("run", "--once", "--dry-run", "--settings", str(settings))
        assert once.returncode in (0, 3, 4, 5, 6, 7), once.stderr
        assert mutations(b, USER, b_from) == []  # the dry run wrote nothing

        daemon = Tuner(settings).start()
        try:
            wait_for("a node of B removed", lambda: len(b.core.list_node().items) == 2 or None, 180)
        finally:
            assert daemon.stop() == 0, daemon.output()

        done = mutations(b, USER, b_from)
        assert sum(m.startswith("delete nodes b-node-") for m in done) == 1, done
        assert any(m.startswith("create leases") for m in done), done  # leader election
        assert any(m.startswith("create events") for m in done), done
        reads = {e["verb"] for e in audit_events(b, USER, b_from)}
        assert {"list", "watch"} <= reads  # plan --live, the daemon's cache
        assert _from_the_client(a, a_from) == []
    finally:
        b.clean_up()
