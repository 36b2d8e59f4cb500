"""``tuner monitor`` against the real Prometheus: what a user sees while tuning the load query."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from testkit.exporter import ExportedDeployment, ExportedPod
from testkit.prometheus_fixture import PrometheusHarness
from tuner.cli import main

pytestmark = pytest.mark.prometheus

NS = "monitorcli"


def tuner(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``tuner ARGS`` through the CLI's main(): (exit status, stdout, stderr)."""
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_monitor_prints_load_verdict_and_reason(
    prometheus: PrometheusHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
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

    status, out, err = tuner(
        capsys, "monitor", "--settings", str(settings), "--window", "5", "--format", "json"
    )
    text_status, text, text_err = tuner(
        capsys, "monitor", "--settings", str(settings), "--window", "5"
    )

    assert status == 0, out + err
    report = json.loads(out)
    assert report["verdict"] == "stable", report
    assert report["load"] == pytest.approx(5000.0, rel=0.1), report
    assert report["window"]["length_s"] == pytest.approx(5.0)
    assert report["load_query"].endswith('{pod=~"shop-.*"}[5s]))')
    assert "1 node, 2 pods in 1 workload," in report["reason"], report
    assert text_status == 0, text + text_err
    lines = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    assert lines["verdict"].strip() == "stable", text
    assert float(lines["load"]) == pytest.approx(5000.0, rel=0.1), text
    assert lines["reason"].strip().startswith("stable from ")
    assert lines["judged"].strip() == "from kube-state-metrics"
    assert "Traceback" not in err + text_err


def test_monitor_when_prometheus_is_paused_says_which_query_timed_out(
    prometheus: PrometheusHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "load": {"query": "sum(rate(http_requests_total[$window]))"},
                "prometheus": {"url": prometheus.url, "timeout_s": 0.5},
            }
        )
    )
    with prometheus.paused():
        status, out, err = tuner(capsys, "monitor", "--settings", str(settings))

    assert status == 1, out + err
    lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert lines["verdict"].strip() == "unknown"
    assert lines["load"].strip() == "unknown"
    assert (
        lines["reason"]
        .strip()
        .startswith(
            f"stability query failed: Prometheus at {prometheus.url} did not answer within 0.5 s"
        )
    )
    assert lines["failed"].strip().startswith("count by (__name__)")
    assert err == ""


def test_monitor_warns_when_the_load_series_cover_part_of_the_window(
    prometheus: PrometheusHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A series Prometheus has held for seconds, read over a 600 s window: the rate is
    extrapolated from those seconds, and the monitor says so (text and JSON)."""
    started = time.time()
    prometheus.exporter.set_rate("fresh_requests_total", {"service": "new"}, 240.0)
    prometheus.wait_for_scrapes(3)
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "load": {"query": 'sum(rate(fresh_requests_total{service="new"}[$window]))'},
                "prometheus": {"url": prometheus.url},
            }
        )
    )
    status, out, _ = tuner(capsys, "monitor", "--settings", str(settings), "--format", "json")
    report = json.loads(out)
    assert report["load_covered_from"] >= started - 2
    assert report["load_warning"].startswith("the load query's series cover only the last ")
    assert "of the 600 s window" in report["load_warning"]
    text_status, text, _ = tuner(capsys, "monitor", "--settings", str(settings))
    assert "\nwarning:  the load query's series cover only the last " in text
    assert {status, text_status} <= {0, 1}  # no kube-state-metrics here: the verdict may be unknown
    # Over a window the series covers, there is nothing to warn about.
    _, whole, _ = tuner(
        capsys, "monitor", "--settings", str(settings), "--window", "1", "--format", "json"
    )
    assert json.loads(whole)["load_warning"] is None
