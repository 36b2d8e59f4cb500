"""``tuner onboard`` / ``offboard`` on the real control plane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from testkit.cluster_fixture import REPO_ROOT, ClusterHarness
from tuner.execute.marks import Keys


def _tuner(kube: ClusterHarness, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(kube.settings_doc()), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli", args[0], "--settings", str(settings), *args[1:]],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def _affinity(kube: ClusterHarness) -> Any:
    deployment = kube.apps.read_namespaced_deployment("web", kube.namespace)
    spec = deployment.spec.template.spec
    return kube.api.sanitize_for_serialization(spec.affinity) if spec.affinity else None


def test_onboard_adds_the_preference_and_offboard_removes_only_it(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    kube.add_node(f"{kube.namespace}-n1")
    kube.deployment("web", 1, onboarded=False)
    anti = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                    },
                }
            ]
        }
    }
    kube.apps.patch_namespaced_deployment(
        "web", kube.namespace, {"spec": {"template": {"spec": {"affinity": anti}}}}
    )
    workload = f"{kube.namespace}/web"
    label = Keys().workload_label(kube.namespace, "web")

    dry = _tuner(kube, tmp_path, "onboard", "--workloads", workload, "--dry-run")
    assert dry.returncode == 0 and "would add" in dry.stdout
    assert _affinity(kube) == anti

    done = _tuner(kube, tmp_path, "onboard", "--workloads", workload)
    assert done.returncode == 0, done.stderr
    assert "rolls once" in done.stderr
    preferred = _affinity(kube)["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [
        {"weight": 100, "preference": {"matchExpressions": [{"key": label, "operator": "Exists"}]}}
    ]
    assert _affinity(kube)["podAntiAffinity"] == anti["podAntiAffinity"]
    again = _tuner(kube, tmp_path, "onboard", "--workloads", workload)
    assert "already onboarded" in again.stdout

    off = _tuner(kube, tmp_path, "offboard", "--workloads", workload)
    assert off.returncode == 0, off.stderr
    assert _affinity(kube) == anti
    annotations = kube.apps.read_namespaced_deployment("web", kube.namespace).metadata.annotations
    assert Keys().onboarded not in (annotations or {})


def test_onboard_of_an_unknown_workload_is_a_one_line_error(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    result = _tuner(kube, tmp_path, "onboard", "--workloads", f"{kube.namespace}/nope")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"tuner: error: deployment {kube.namespace}/nope not found"
    )
