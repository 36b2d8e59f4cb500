"""``tuner monitor`` against the real Prometheus: what a user sees while tuning the load query."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.exporter import ExportedDeployment, ExportedPod
from tests.support.prometheus_fixture import PrometheusHarness

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).parents[2]
NS = "monitorcli"


def tuner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=60,
    )


def test_monitor_prints_load_verdict_and_reason(
    prometheus: PrometheusHarness, tmp_path: Path
) -> None:
    exporter = prometheus.exporter
    exporter.set_cluster(
        nodes=["cli-node-a"],
        pods=[
            ExportedPod(NS, f"shop-6b5c4-{n}", "cli-node-a", "ReplicaSet", "shop-6b5c4")
            for n in "ab"
        ],
        deployments=[ExportedDeployment(NS, "shop", spec=2)],
    )
    exporter.set_network_receive_rate(NS, "shop-6b5c4-a", 4000.0)
    exporter.set_network_receive_rate(NS, "shop-6b5c4-b", 1000.0)
    prometheus.wait_for_scrapes(1)
    ready = time.time() + 6
    while time.time() < ready:
        prometheus.wait_for_scrapes(1)
    settings = tmp_path / "settings.json"
    # The 2019 flat keys, as an old settings file has them.
    settings.write_text(
        json.dumps(
            {"prometheus_address": prometheus.url, "load_pod_name": "shop-", "measure_window": 600}
        )
    )

    as_json = tuner("monitor", "--settings", str(settings), "--window", "5", "--format", "json")
    as_text = tuner("monitor", "--settings", str(settings), "--window", "5")

    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["verdict"] == "stable", report
    assert report["load"] == pytest.approx(5000.0, rel=0.1), report
    assert report["window"]["length_s"] == pytest.approx(5.0)
    assert report["load_query"].endswith('{pod=~"shop-.*"}[5s]))')
    assert "1 node, 2 pods in 1 workload," in report["reason"], report
    assert as_text.returncode == 0, as_text.stdout + as_text.stderr
    lines = dict(line.split(":", 1) for line in as_text.stdout.splitlines() if ":" in line)
    assert lines["verdict"].strip() == "stable", as_text.stdout
    assert float(lines["load"]) == pytest.approx(5000.0, rel=0.1), as_text.stdout
    assert lines["reason"].strip().startswith("stable from ")
    assert "Traceback" not in as_json.stderr + as_text.stderr
