"""The commands that print and need a cluster, with their output pipe closed before they
write (``tuner … | head -c1``): they end quietly — exit status 141, nothing on stderr but their
own log lines, no traceback (see ``tests/unit/test_closed_pipes.py`` for the others)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.cluster_fixture import ClusterHarness
from tuner.cli import CLOSED_PIPE

ROOT = Path(__file__).parents[2]


def _closed(argv: list[str]) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "tuner.cli", *argv],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("command", ["onboard", "offboard"])
def test_onboard_and_offboard_into_a_closed_pipe(
    kube: ClusterHarness, tmp_path: Path, command: str
) -> None:
    kube.add_node("pipe-node", cpu="4", memory="8Gi")
    kube.deployment("web", 1, onboarded=command == "offboard")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(kube.settings_doc()))
    workload = f"{kube.namespace}/web"
    done = _closed([command, "--dry-run", "--workloads", workload, "--settings", str(settings)])
    assert done.returncode == CLOSED_PIPE, done.stderr
    assert done.stderr == ""


def test_a_dry_run_cycle_into_a_closed_pipe(kube: ClusterHarness, tmp_path: Path) -> None:
    """One cycle with its plan printed: the window is judged from two API snapshots (no
    Prometheus: the load is unknown, which a dry run's plan does not need)."""
    kube.add_node("pipe-a", cpu="4", memory="8Gi")
    kube.add_node("pipe-b", cpu="4", memory="8Gi")
    kube.deployment("web", 2)
    settings = tmp_path / "settings.json"
    document = kube.settings_doc()
    document |= {
        "prometheus": {"url": "http://127.0.0.1:9", "timeout_s": 1},
        "load": {"query": "vector(1)"},
        "knowledge": {"path": str(tmp_path / "kb.sqlite")},
        "analyse": {"candidate_delay_s": 0, "excluded_namespaces": ["kube-system"]},
    }
    settings.write_text(json.dumps(document))
    done = _closed(["run", "--once", "--dry-run", "--settings", str(settings)])
    assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr, done.stderr
    assert done.returncode in (CLOSED_PIPE, 3, 4, 5, 6), done.stderr
