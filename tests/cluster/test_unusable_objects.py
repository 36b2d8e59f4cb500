"""Live objects the tuner cannot use, on the real control plane: a node whose price annotation
is negative and a pod whose request is beyond any real node are skipped with a warning naming
them (by a one-shot read and by the daemon's watch-backed cache), and the plan goes on with
the rest."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.cluster_fixture import REPO_ROOT, ClusterHarness
from tuner.monitor.cache import ClusterCache
from tuner.monitor.kube import read_cluster


def test_unusable_live_objects_are_skipped_with_a_warning(
    kube: ClusterHarness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = [kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2)]
    priced = kube.add_node(f"{kube.namespace}-priced")
    kube.core.patch_node(priced, {"metadata": {"annotations": {"tuner.dev/price-per-hour": "-5"}}})
    kube.deployment("web", 2)
    huge = {"name": "app", "image": "fake", "resources": {"requests": {"cpu": "5000"}}}
    kube.core.create_namespaced_pod(
        kube.namespace, {"metadata": {"name": "huge"}, "spec": {"containers": [huge]}}
    )

    api = kube.new_api()
    with ClusterCache(api, backoff_s=0.2) as cache:  # what the daemon's cycles read
        assert cache.wait_synced(60), cache.why()
        for read in (lambda: read_cluster(kube.api), lambda: cache.cluster(timeout_s=30)):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="tuner.monitor.dump"):
                cluster = read()
            names = {n.name for n in cluster.nodes}
            assert set(good) <= names and priced not in names
            mine = {p.name for p in cluster.pods if p.namespace == kube.namespace}
            assert "huge" not in mine and any(p.startswith("web-") for p in mine)
            assert f"node '{priced}': annotation tuner.dev/price-per-hour is '-5'" in caplog.text
            assert f"pod '{kube.namespace}/huge'" in caplog.text
    api.close()

    document = kube.settings_doc()
    document["analyse"] = {"candidate_delay_s": 0, "excluded_namespaces": ["kube-system"]}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(document), encoding="utf-8")
    argv = ["plan", "--live", "--settings", str(settings), "--format", "json"]
    plan = subprocess.run(
        [sys.executable, "-m", "tuner.cli", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert plan.returncode == 0, plan.stderr
    assert "Traceback" not in plan.stderr
    assert f"skipping node '{priced}'" in plan.stderr
    report = json.loads(plan.stdout)
    assert report["decision"]
    assert all(cost >= 0 for cost in _costs(report))


def _costs(report: dict[str, object]) -> list[float]:
    """Every per-hour cost the plan reports."""
    return [v for k, v in report.items() if "cost" in k and isinstance(v, int | float)]
