"""charts/deployment-tuner rendered by the real helm: it lints, its RBAC is exactly what the code
needs (as deploy/'s is), its settings are valid and put the lease, the journal and the
exclusions in the release namespace, and it has what deploy/ has (the semantics are compared,
not the text: deploy/ stays the kustomize way to install)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from testkit.helm import CHART, Helm
from tests.unit.test_deploy import documents, needed, permissions
from tuner.settings import Settings, settings_from_dict

RELEASE_NAMESPACE = "autoscaling"
CHART_ONLY = {"PodDisruptionBudget", "Secret", "ServiceMonitor"}
"""Kinds the chart may render that deploy/ has no file for."""
NOT_IN_A_CHART = {"Namespace"}
"""deploy/ creates its namespace; a chart is installed into one (``--create-namespace``)."""


def kinds(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def the(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = kinds(objects, kind)
    return found


def rendered_settings(objects: list[dict[str, Any]]) -> Settings:
    return settings_from_dict(json.loads(the(objects, "ConfigMap")["data"]["settings.json"]))


@pytest.fixture(scope="module")
def rendered(helm: Helm) -> list[dict[str, Any]]:
    return helm.template(namespace=RELEASE_NAMESPACE)


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["--set", "knowledge.backend=embedded", "--set", "replicas=1"],
        ["--set", "serviceMonitor.enabled=true", "--set", "knowledge.neo4j.password=secret"],
    ],
)
def test_the_chart_lints(helm: Helm, values: list[str]) -> None:
    out = helm.ok("lint", "--strict", str(CHART), *values)
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_rbac_is_exactly_what_the_code_needs_as_in_deploy(rendered: list[dict[str, Any]]) -> None:
    cluster_role = permissions(the(rendered, "ClusterRole"))
    role = the(rendered, "Role")
    assert cluster_role == needed(own_namespace=False)
    assert permissions(role) == needed(own_namespace=True)
    assert role["metadata"]["namespace"] == RELEASE_NAMESPACE
    deploy = {d["kind"]: d for d in documents() if d["kind"] in ("ClusterRole", "Role")}
    assert cluster_role == permissions(deploy["ClusterRole"])
    assert permissions(role) == permissions(deploy["Role"])


def test_the_bindings_give_the_roles_to_the_charts_service_account(
    rendered: list[dict[str, Any]],
) -> None:
    account = the(rendered, "ServiceAccount")["metadata"]
    assert account["namespace"] == RELEASE_NAMESPACE
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": RELEASE_NAMESPACE}
    for kind, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = the(rendered, kind)
        assert binding["roleRef"]["name"] == the(rendered, role)["metadata"]["name"]
        assert binding["subjects"] == [subject]
    pod = the(rendered, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["name"]


def test_the_chart_has_what_deploy_has(rendered: list[dict[str, Any]]) -> None:
    ours = set(Counter(o["kind"] for o in rendered))
    theirs = {d["kind"] for d in documents()} - NOT_IN_A_CHART
    assert theirs <= ours, f"deploy/ has, the chart lacks: {sorted(theirs - ours)}"
    assert ours - theirs <= CHART_ONLY, sorted(ours - theirs - CHART_ONLY)
    (deployed,) = [d for d in documents() if d["kind"] == "Deployment"]
    charted = the(rendered, "Deployment")
    (theirs_c,) = deployed["spec"]["template"]["spec"]["containers"]
    (ours_c,) = charted["spec"]["template"]["spec"]["containers"]
    assert ours_c["resources"] == theirs_c["resources"]  # sized from docs/performance.md alike
    assert ours_c["securityContext"] == theirs_c["securityContext"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert ours_c[probe] == theirs_c[probe]
    assert {e["name"] for e in ours_c["env"]} == {e["name"] for e in theirs_c["env"]}
    assert [a for a in ours_c["args"] if a not in ("--shadow", "--dry-run")] == theirs_c["args"]
    ours_pod, theirs_pod = (d["spec"]["template"]["spec"] for d in (charted, deployed))
    for key in ("securityContext", "terminationGracePeriodSeconds"):
        assert ours_pod[key] == theirs_pod[key]
    (deployed_class,) = [d for d in documents() if d["kind"] == "PriorityClass"]
    placeholder = the(rendered, "PriorityClass")
    for key in ("value", "preemptionPolicy", "globalDefault"):
        assert placeholder[key] == deployed_class[key]


def test_settings_are_valid_and_keep_the_tuner_in_the_release_namespace(
    rendered: list[dict[str, Any]],
) -> None:
    settings = rendered_settings(rendered)
    assert settings.kubernetes.in_cluster
    assert settings.daemon.leader_election.enabled  # two replicas
    assert settings.daemon.leader_election.namespace == RELEASE_NAMESPACE
    assert settings.execute.journal_namespace == RELEASE_NAMESPACE
    assert RELEASE_NAMESPACE in settings.analyse.excluded_namespaces
    assert "kube-system" in settings.analyse.excluded_namespaces
    assert (
        settings.execute.placeholder_priority_class
        == (the(rendered, "PriorityClass")["metadata"]["name"])
    )
    assert settings.knowledge.backend == "neo4j"
    (container,) = the(rendered, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert settings.knowledge.password_env in env
    identity = env[settings.daemon.leader_election.identity_env]
    assert identity["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == settings.daemon.metrics_port


def test_it_installs_in_shadow_mode_until_told_to_act(helm: Helm) -> None:
    def args(values: dict[str, Any]) -> list[str]:
        (container,) = the(helm.template(values), "Deployment")["spec"]["template"]["spec"][
            "containers"
        ]
        return list(container["args"])

    assert "--shadow" in args({})
    assert "--dry-run" in args({"mode": "dry-run"})
    assert not {"--shadow", "--dry-run"} & set(args({"mode": "act"}))


def test_values_reach_the_settings_and_the_chart_keeps_its_own(helm: Helm) -> None:
    objects = helm.template(
        {
            "replicas": 1,
            "pricing": {"currency": "EUR", "nodeTypes": {"e2-standard-4": 0.12}},
            "settings": {
                "windows": {"measure_s": 300, "retry_s": 30},
                "execute": {"journal_namespace": "elsewhere", "verify_timeout_s": 90},
                "daemon": {"leader_election": {"namespace": "elsewhere", "lease_duration_s": 20}},
                "knowledge": {"lookup_limit": 5},
            },
        },
        namespace=RELEASE_NAMESPACE,
    )
    settings = rendered_settings(objects)
    assert settings.windows.measure_s == 300 and settings.windows.retry_s == 30
    assert settings.execute.verify_timeout_s == 90
    assert settings.pricing.currency == "EUR"
    assert settings.pricing.node_types == {"e2-standard-4": 0.12}
    assert settings.knowledge.lookup_limit == 5
    # What the chart decides stays the chart's.
    assert settings.execute.journal_namespace == RELEASE_NAMESPACE
    assert settings.daemon.leader_election.namespace == RELEASE_NAMESPACE
    assert settings.daemon.leader_election.lease_duration_s == 20
    assert not settings.daemon.leader_election.enabled  # one replica


def test_disruption_budget_spread_and_no_do_not_evict(rendered: list[dict[str, Any]]) -> None:
    deployment = the(rendered, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    template = deployment["spec"]["template"]
    assert selector.items() <= template["metadata"]["labels"].items()
    budget = the(rendered, "PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"] == selector
    assert budget["spec"]["maxUnavailable"] == 1 < deployment["spec"]["replicas"]
    spread = template["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    }
    assert all(c["labelSelector"]["matchLabels"] == selector for c in spread)
    # The tuner finishes or rolls back its action on SIGTERM: autoscalers may move it.
    annotations = template["metadata"].get("annotations", {})
    assert "cluster-autoscaler.kubernetes.io/safe-to-evict" not in annotations
    assert "karpenter.sh/do-not-disrupt" not in annotations
    assert not kinds(rendered, "ServiceMonitor")
    assert not kinds(rendered, "Secret")  # the password's Secret is the user's by default


def test_every_namespaced_object_is_in_the_release_namespace(
    rendered: list[dict[str, Any]],
) -> None:
    cluster_wide = {"ClusterRole", "ClusterRoleBinding", "PriorityClass"}
    for obj in rendered:
        if obj["kind"] not in cluster_wide:
            assert obj["metadata"]["namespace"] == RELEASE_NAMESPACE, obj["kind"]


def test_optional_objects(helm: Helm, tmp_path: Path) -> None:
    objects = helm.template(
        {
            "serviceMonitor": {"enabled": True},
            "knowledge": {"neo4j": {"password": "s3cret"}},
            "placeholderPriorityClass": {"create": False},
            "podDisruptionBudget": {"enabled": False},
            "mode": "act",
        },
        values_file=tmp_path / "values.yaml",
    )
    monitor = the(objects, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    secret = the(objects, "Secret")
    (container,) = the(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert (
        env["TUNER_NEO4J_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"]
        == (secret["metadata"]["name"])
    )
    assert not {"--dry-run", "--shadow"} & set(container["args"])
    assert not kinds(objects, "PriorityClass")
    assert not kinds(objects, "PodDisruptionBudget")


def test_the_embedded_knowledge_base_gets_a_writable_volume(helm: Helm) -> None:
    objects = helm.template({"knowledge": {"backend": "embedded"}})
    settings = rendered_settings(objects)
    pod = the(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert Path(settings.knowledge.path).parent.as_posix() in mounts
    assert "TUNER_NEO4J_PASSWORD" not in {e["name"] for e in container["env"]}


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("knowledge.backend=mysql", "at '/knowledge/backend': value must be one of"),
        ("Mode=act", "additional properties 'Mode' not allowed"),  # a typo of mode
        ("mode=on", "at '/mode': value must be one of"),
        ("replicas=two", "at '/replicas': got string, want integer"),
        ("metrics.port=0", "at '/metrics/port'"),
    ],
)
def test_bad_values_are_refused_by_the_values_schema(helm: Helm, value: str, error: str) -> None:
    done = helm.run("template", "x", str(CHART), "--set", value)
    assert done.returncode != 0
    assert error in done.stderr
