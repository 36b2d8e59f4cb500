"""The Helm chart on the real control plane: ``helm install`` is accepted, its pods are
scheduled, and the daemon run as the chart's ServiceAccount (a kubeconfig with its token, the
settings the chart rendered into its ConfigMap, the Neo4j password from the chart's Secret)
goes through a cycle that acts with zero 403s in the API server's audit log. A ServiceAccount
without the chart's RBAC gets a 403 that names what was refused."""

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
from testkit.helm import CHART, Helm
from testkit.neo4j_fixture import Neo4jServer
from testkit.prometheus_fixture import PrometheusHarness
from tests.e2e.harness import (
    APP,
    LOAD_METRIC,
    ROOT,
    Tuner,
    account_kubeconfig,
    add_nodes,
    applied,
    audit_events,
    audit_offset,
    deploy_app,
    free_port,
    mutations,
    read_state,
    settled,
    wait_for,
)

RELEASE = "chart-e2e"
NAMESPACE = "tuner-chart"
FULLNAME = f"{RELEASE}-deployment-tuner"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
HOME = "tuner-home"
"""The node the chart's own pods run on (tainted: the app's pods never land there)."""


def chart_values(prometheus: PrometheusHarness, neo4j: Neo4jServer) -> dict[str, Any]:
    """Production defaults but for the test's servers, short windows, a test-named
    PriorityClass (cluster-wide) and the chart's pods on their own node."""
    return {
        "mode": "act",
        "knowledge": {
            "neo4j": {"uri": neo4j.uri, "database": neo4j.database, "password": neo4j.password}
        },
        "placeholderPriorityClass": {"name": f"{RELEASE}-placeholder"},
        "settings": {
            "analyse": {"candidate_delay_s": 0},
            "load": {"query": f"sum(rate({LOAD_METRIC}[$window]))"},
            "windows": {"measure_s": 10, "retry_s": 2, "warmup_s": 0},
            "prometheus": {"url": prometheus.url},
            "execute": {"node_removal": "delete-node", "verify_timeout_s": 60},
            "daemon": {"snapshot_interval_s": 1},
        },
        "nodeSelector": {HOME: "true"},
        "tolerations": [{"key": HOME, "operator": "Exists", "effect": "NoSchedule"}],
    }


@pytest.fixture
def installed(
    kube: ClusterHarness,
    helm: Helm,
    prometheus: PrometheusHarness,
    neo4j: Neo4jServer,
    tmp_path: Path,
) -> Iterator[ClusterHarness]:
    """The chart installed as release chart-e2e in namespace tuner-chart; uninstalled after."""
    kube.add_node(
        HOME,
        cpu="2",
        memory="4Gi",
        labels={HOME: "true"},
        taints=[{"key": HOME, "value": "true", "effect": "NoSchedule"}],
    )
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(chart_values(prometheus, neo4j)))
    args = ("--kubeconfig", kube.kubeconfig, "--namespace", NAMESPACE)
    helm.ok("install", RELEASE, str(CHART), *args, "--create-namespace", "--values", str(values))
    try:
        yield kube
    finally:
        helm.run("uninstall", RELEASE, *args, "--wait", timeout=180)
        applied(kube, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true")


def local_settings(kube: ClusterHarness, kubeconfig: Path, path: Path) -> Path:
    """The settings the chart rendered, read from its ConfigMap, for a daemon outside the
    cluster: its kubeconfig instead of the in-cluster one, a free metrics port on loopback."""
    config_map = kube.core.read_namespaced_config_map(FULLNAME, NAMESPACE)
    settings = json.loads(config_map.data["settings.json"])
    settings["kubernetes"] = {"kubeconfig": str(kubeconfig)}
    settings["daemon"] |= {"metrics_port": free_port(), "metrics_host": "127.0.0.1"}
    path.write_text(json.dumps(settings))
    return path


def password(kube: ClusterHarness) -> str:
    """The Neo4j password from the Secret the chart created."""
    secret = kube.core.read_namespaced_secret(f"{FULLNAME}-neo4j", NAMESPACE)
    return base64.b64decode(secret.data["password"]).decode()


def chart_pods_running(kube: ClusterHarness) -> bool:
    pods = kube.core.list_namespaced_pod(NAMESPACE).items
    running = [p for p in pods if p.status.phase == "Running" and p.spec.node_name == HOME]
    return len(running) == 2


def test_installed_chart_runs_the_daemon_as_its_service_account_with_no_403(
    installed: ClusterHarness, prometheus: PrometheusHarness, tmp_path: Path
) -> None:
    kube = installed
    wait_for("the chart's two pods Running on their node", lambda: chart_pods_running(kube), 60)
    add_nodes(kube, ["node-a", "node-b", "node-c"])
    deploy_app(kube, replicas=3)
    prometheus.exporter.set_rate(LOAD_METRIC, {"service": APP}, 100.0)
    prometheus.wait_for_scrapes(1)
    wait_for("three app pods", lambda: settled(kube, 3), 60)

    since = audit_offset(kube)
    kubeconfig = account_kubeconfig(kube, NAMESPACE, FULLNAME, tmp_path / "chart.kubeconfig")
    settings = local_settings(kube, kubeconfig, tmp_path / "settings.json")
    env = {"TUNER_NEO4J_PASSWORD": password(kube), "POD_NAME": "chart-e2e-local"}
    tuner = Tuner(settings, (), env).start()
    try:
        wait_for("a cycle that acted", lambda: tuner.cycles("acted") >= 1 or None, 180)
    finally:
        status = tuner.stop()
    assert status == 0, tuner.output()

    nodes = read_state(kube).nodes
    assert len([n for n in nodes if n.startswith("node-")]) == 2, tuner.output()
    done = mutations(kube, ACCOUNT, since)
    assert any(m.startswith("create pods/eviction") for m in done), done
    assert any(m.startswith("delete nodes") for m in done), done
    assert any(m.startswith("update leases") or m.startswith("create leases") for m in done)
    assert any(m.startswith("create events") for m in done), done
    refused = [
        f"{e['verb']} {e.get('objectRef', {})}"
        for e in audit_events(kube, ACCOUNT, since)
        if e.get("responseStatus", {}).get("code") == 403
    ]
    assert refused == [], refused
    log = tuner.output()
    assert "first verdict possible at" in log
    assert "first node removal possible at" in log


def test_a_service_account_without_the_rbac_is_told_what_was_refused(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    applied(kube, "create", "serviceaccount", "nobody", "-n", kube.namespace)
    kubeconfig = account_kubeconfig(kube, kube.namespace, "nobody", tmp_path / "nobody.kubeconfig")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"kubernetes": {"kubeconfig": str(kubeconfig)}}))
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "plan", "--live", "--settings", str(settings)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("tuner: error: kubernetes API: 403 Forbidden: ")
    who = f"system:serviceaccount:{kube.namespace}:nobody"
    assert f'User "{who}" cannot list resource' in line
    assert "hint: the tuner's RBAC lacks this permission" in line
