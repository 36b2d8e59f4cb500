"""``tuner onboard`` / ``offboard`` on the real control plane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from testkit.cluster_fixture import REPO_ROOT, TUNER_NAMESPACE, ClusterHarness
from tuner.model.conventions import Keys


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


def _rolled_out(kube: ClusterHarness, name: str) -> bool:
    deployment = kube.apps.read_namespaced_deployment(name, kube.namespace)
    status = deployment.status
    return bool(
        status.observed_generation == deployment.metadata.generation
        and status.updated_replicas == status.replicas == status.available_replicas
    )


def _onboarded(kube: ClusterHarness, name: str, namespace: str | None = None) -> bool:
    deployment = kube.apps.read_namespaced_deployment(name, namespace or kube.namespace)
    return Keys().onboarded in (deployment.metadata.annotations or {})


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
    assert dry.returncode == 0 and f"{workload}: would patch " in dry.stdout
    assert label in dry.stdout
    assert _affinity(kube) == anti

    done = _tuner(kube, tmp_path, "onboard", "--workloads", workload)
    assert done.returncode == 0, done.stderr
    assert "rolls once" in done.stderr
    assert f"{workload}: rolled out: 1 pod(s) updated and available (1/1)" in done.stdout
    assert _rolled_out(kube, "web")  # the command returned once the rollout was complete
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


def test_onboard_needs_workloads_or_an_explicit_all(kube: ClusterHarness, tmp_path: Path) -> None:
    result = _tuner(kube, tmp_path, "onboard")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "tuner: error: onboard: one of the arguments --workloads --all is required"
    )


def test_all_lists_and_refuses_without_a_terminal_or_yes(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    kube.add_node(f"{kube.namespace}-n1")
    kube.deployment("web", 1, onboarded=False)

    refused = _tuner(kube, tmp_path, "onboard", "--all")

    assert refused.returncode == 2
    assert f"  {kube.namespace}/web" in refused.stdout  # the list comes first
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .startswith("tuner: error: onboard --all: confirm the ")
    )
    assert "--yes" in refused.stderr
    assert not _onboarded(kube, "web")


def test_all_with_yes_rolls_one_at_a_time_and_never_the_tuners_own(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    kube.add_node(f"{kube.namespace}-n1")
    for name in ("a", "b"):
        kube.deployment(name, 1, onboarded=False)
    own = _tuners_own_deployment(kube)
    try:
        result = _tuner(kube, tmp_path, "onboard", "--all", "--yes")

        assert result.returncode == 0, result.stderr
        assert f"left out: {TUNER_NAMESPACE}/{own} (the tuner's own namespace)" in result.stdout
        assert not _onboarded(kube, own, TUNER_NAMESPACE)
    finally:
        kube.apps.delete_namespaced_deployment(own, TUNER_NAMESPACE)
    lines = result.stdout.splitlines()
    a, b = f"{kube.namespace}/a", f"{kube.namespace}/b"
    order = [
        line.split(":")[0] + (" done" if "rolled out" in line else " patched")
        for line in lines
        if line.startswith((a, b))
    ]
    assert order == [f"{a} patched", f"{a} done", f"{b} patched", f"{b} done"]
    assert _onboarded(kube, "a") and _onboarded(kube, "b")
    assert _rolled_out(kube, "a") and _rolled_out(kube, "b")


def test_a_failed_rollout_stops_onboarding_before_the_next_workload(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    """The only node is full: the new pod a rollout surges stays Pending, the Deployment's
    progress deadline (1 s) passes, and the next workload is never touched."""
    kube.add_node(f"{kube.namespace}-n1", cpu="1")
    kube.deployment("a-stuck", 2, onboarded=False)  # 2 x 500m: the node is full
    kube.apps.patch_namespaced_deployment(
        "a-stuck", kube.namespace, {"spec": {"progressDeadlineSeconds": 1}}
    )
    kube.deployment("b-next", 0, onboarded=False)
    stuck, following = f"{kube.namespace}/a-stuck", f"{kube.namespace}/b-next"

    result = _tuner(kube, tmp_path, "onboard", "--workloads", stuck, following)

    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tuner: error: {stuck}: rollout failed: ")
    assert f"stopped after 0 of 2 rolled out, not touched: {following}" in last
    assert _onboarded(kube, "a-stuck") and not _onboarded(kube, "b-next")


def test_the_tuners_own_deployment_is_refused_by_name(kube: ClusterHarness, tmp_path: Path) -> None:
    result = _tuner(kube, tmp_path, "onboard", "--workloads", f"{TUNER_NAMESPACE}/anything")
    assert result.returncode == 2
    assert "in the tuner's own namespace" in result.stderr.strip().splitlines()[-1]


def _tuners_own_deployment(kube: ClusterHarness) -> str:
    """A Deployment in the tuner's own namespace (as deploy/ runs it; no pods needed)."""
    name = f"tuner-{kube.namespace}"
    kube.apps.create_namespaced_deployment(
        TUNER_NAMESPACE,
        {
            "metadata": {"name": name},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "tuner", "image": "fake"}]},
                },
            },
        },
    )
    return name
