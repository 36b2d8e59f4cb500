"""deploy/: the manifests parse, agree with each other and with settings, and the RBAC grants
exactly the Kubernetes API calls the code makes. The dashboard queries only exported metrics."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from prometheus_client.metrics_core import Metric

from tuner.daemon.metrics import Metrics
from tuner.model.movability import DO_NOT_DISRUPT, SAFE_TO_EVICT
from tuner.model.quantity import memory_bytes
from tuner.settings import Settings, settings_from_dict

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "tuner-system"
SERVICE_ACCOUNT = "deployment-tuner"

Permission = tuple[str, str, str]
"""(API group, resource, verb)."""

# Every Kubernetes API method the code calls, and the permissions it needs. What is listed for
# all namespaces is also watched (the daemon's cluster cache; tuner/execute waits for outcomes
# with list + watch on nodes and pods): both verbs. When code
# calls a method that is not here, test_every_api_call_is_known fails: add it here and to
# deploy/rbac.yaml.
CALLS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "list_node": ("", "nodes", ("list", "watch")),
    "read_node": ("", "nodes", ("get",)),
    "patch_node": ("", "nodes", ("patch",)),
    "delete_node": ("", "nodes", ("delete",)),
    "list_pod_for_all_namespaces": ("", "pods", ("list", "watch")),
    "list_namespaced_pod": ("", "pods", ("list", "watch")),
    "read_namespaced_pod": ("", "pods", ("get",)),
    "create_namespaced_pod": ("", "pods", ("create",)),
    "delete_namespaced_pod": ("", "pods", ("delete",)),
    "patch_namespaced_pod": ("", "pods", ("patch",)),
    "create_namespaced_pod_eviction": ("", "pods/eviction", ("create",)),
    "list_deployment_for_all_namespaces": ("apps", "deployments", ("list", "watch")),
    "read_namespaced_deployment": ("apps", "deployments", ("get",)),
    "patch_namespaced_deployment": ("apps", "deployments", ("patch",)),
    "read_namespaced_deployment_scale": ("apps", "deployments/scale", ("get",)),
    "patch_namespaced_deployment_scale": ("apps", "deployments/scale", ("patch",)),
    "list_replica_set_for_all_namespaces": ("apps", "replicasets", ("list", "watch")),
    "read_namespaced_replica_set": ("apps", "replicasets", ("get",)),
    "read_namespaced_replica_set_scale": ("apps", "replicasets/scale", ("get",)),
    "patch_namespaced_replica_set_scale": ("apps", "replicasets/scale", ("patch",)),
    "list_stateful_set_for_all_namespaces": ("apps", "statefulsets", ("list",)),
    "list_daemon_set_for_all_namespaces": ("apps", "daemonsets", ("list",)),
    "list_job_for_all_namespaces": ("batch", "jobs", ("list", "watch")),
    "list_pod_disruption_budget_for_all_namespaces": (
        "policy",
        "poddisruptionbudgets",
        ("list", "watch"),
    ),
    "list_namespaced_pod_disruption_budget": ("policy", "poddisruptionbudgets", ("list",)),
    "list_horizontal_pod_autoscaler_for_all_namespaces": (
        "autoscaling",
        "horizontalpodautoscalers",
        ("list", "watch"),
    ),
    "list_namespaced_horizontal_pod_autoscaler": (
        "autoscaling",
        "horizontalpodautoscalers",
        ("list",),
    ),
    "list_persistent_volume_claim_for_all_namespaces": (
        "",
        "persistentvolumeclaims",
        ("list", "watch"),
    ),
    "list_persistent_volume": ("", "persistentvolumes", ("list", "watch")),
    "read_namespaced_lease": ("coordination.k8s.io", "leases", ("get",)),
    "create_namespaced_lease": ("coordination.k8s.io", "leases", ("create",)),
    "replace_namespaced_lease": ("coordination.k8s.io", "leases", ("update",)),
    "read_namespaced_config_map": ("", "configmaps", ("get",)),
    "create_namespaced_config_map": ("", "configmaps", ("create",)),
    "replace_namespaced_config_map": ("", "configmaps", ("update",)),
    "patch_namespaced_config_map": ("", "configmaps", ("patch",)),
    "delete_namespaced_config_map": ("", "configmaps", ("delete",)),
    "create_namespaced_event": ("events.k8s.io", "events", ("create",)),
    "read_priority_class": ("scheduling.k8s.io", "priorityclasses", ("get",)),
}
NOT_THE_DAEMON = {"tuner/execute/onboard.py"}
"""Commands a person runs with their own credentials (``tuner onboard`` rolls a Deployment
once); the daemon's ServiceAccount does not get their permissions."""
NAMESPACED_TO_ITS_OWN = {"leases", "configmaps"}
"""Resources the tuner only touches in its own namespace (a Role, not the ClusterRole)."""
IN_ITS_OWN = {"create_namespaced_pod", "delete_namespaced_pod"}
"""Calls the tuner only makes in its own namespace (placeholder pods, execute.journal_namespace)."""
NOT_REQUESTS = {"close"}
"""Methods of the API classes that make no request (``close`` releases the client's pool; the
word also names closing a half-read response in the live reads)."""
API_CLASSES = (
    client.CoreV1Api,
    client.AppsV1Api,
    client.BatchV1Api,
    client.PolicyV1Api,
    client.AutoscalingV2Api,
    client.CoordinationV1Api,
    client.EventsV1Api,
    client.SchedulingV1Api,
)


def documents() -> Iterator[dict[str, Any]]:
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            yield from (d for d in yaml.safe_load_all(path.read_text()) if d)


def one(kind: str) -> dict[str, Any]:
    (found,) = [d for d in documents() if d["kind"] == kind]
    return found


def api_calls() -> set[str]:
    """Kubernetes client methods named in the code that talks to the API."""
    methods = {
        name for api in API_CLASSES for name in dir(api) if not name.startswith("_")
    } - NOT_REQUESTS
    used: set[str] = set()
    for path in [*ROOT.glob("tuner/**/*.py"), *ROOT.glob("knowledge/**/*.py")]:
        if str(path.relative_to(ROOT)) in NOT_THE_DAEMON:
            continue
        text = path.read_text()
        if "kubernetes" in text:
            used |= set(re.findall(r"\b[a-z][a-z0-9_]+\b", text)) & methods
    return used


def granted(kind: str) -> set[Permission]:
    return permissions(one(kind))


def permissions(role: dict[str, Any]) -> set[Permission]:
    """What a ClusterRole or Role grants."""
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def needed(*, own_namespace: bool) -> set[Permission]:
    return {
        (group, resource, verb)
        for method in api_calls()
        for group, resource, verbs in [CALLS[method]]
        if (resource in NAMESPACED_TO_ITS_OWN or method in IN_ITS_OWN) == own_namespace
        for verb in verbs
    }


def deployed_settings() -> Settings:
    return settings_from_dict(json.loads(one("ConfigMap")["data"]["settings.json"]))


def test_the_commands_left_out_exist() -> None:
    assert all((ROOT / path).exists() for path in NOT_THE_DAEMON)


def test_every_api_call_is_known() -> None:
    unknown = api_calls() - set(CALLS)
    assert not unknown, f"add to CALLS and deploy/rbac.yaml: {sorted(unknown)}"
    assert {"list_node", "read_namespaced_lease"} <= api_calls()  # the scan finds calls


def test_cluster_role_grants_exactly_what_the_code_uses() -> None:
    assert granted("ClusterRole") == needed(own_namespace=False)


def test_role_grants_leases_and_the_journal_in_the_tuners_namespace_only() -> None:
    role = one("Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert granted("Role") == needed(own_namespace=True)
    settings = deployed_settings()
    assert settings.daemon.leader_election.namespace == NAMESPACE
    assert settings.execute.journal_namespace == NAMESPACE


def test_bindings_give_the_roles_to_the_service_account() -> None:
    account = one("ServiceAccount")["metadata"]
    assert (account["name"], account["namespace"]) == (SERVICE_ACCOUNT, NAMESPACE)
    for kind, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = one(kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role,
            "name": one(role)["metadata"]["name"],
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
        ]


def test_every_object_is_in_the_tuners_namespace_and_in_the_kustomization() -> None:
    for doc in documents():
        if doc["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    files = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(listed) == sorted(files)


def test_configmap_holds_valid_settings_that_fit_the_deployment() -> None:
    settings = deployed_settings()
    spec = one("Deployment")["spec"]
    assert settings.kubernetes.in_cluster
    assert NAMESPACE in settings.analyse.excluded_namespaces  # the tuner never moves itself
    assert settings.daemon.leader_election.enabled == (spec["replicas"] > 1)
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    identity = env[settings.daemon.leader_election.identity_env]
    assert identity["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert settings.knowledge.password_env in env


def test_deployment_is_probed_on_healthz_and_locked_down() -> None:
    pod = one("Deployment")["spec"]["template"]["spec"]
    settings = deployed_settings()
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == settings.daemon.metrics_port
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert "memory" in container["resources"]["limits"]
    # The limit leaves room above the request for the first sync's listing peak.
    memory = {k: memory_bytes(v["memory"]) for k, v in container["resources"].items()}
    assert memory["limits"] >= 2 * memory["requests"]
    # Long enough to finish or roll back the action in flight after SIGTERM.
    assert pod["terminationGracePeriodSeconds"] > settings.execute.verify_timeout_s
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/etc/tuner" in mounts
    assert "/etc/tuner/settings.json" in container["args"]


def test_the_defaults_match_the_shipped_rbac() -> None:
    """Without a setting, the journal, the placeholders and the Lease go where the Role grants
    them (the trial's journal went to ``default``, where the Role grants nothing)."""
    defaults = Settings()
    role = one("Role")["metadata"]["namespace"]
    assert defaults.execute.journal_namespace == role == NAMESPACE
    assert defaults.daemon.leader_election.namespace == role


def test_the_tuner_never_pins_its_nodes_and_spreads_its_replicas() -> None:
    deployment = one("Deployment")
    template = deployment["spec"]["template"]
    labels = template["metadata"]["labels"]
    annotations = template["metadata"].get("annotations") or {}
    assert annotations.get(SAFE_TO_EVICT) != "false"  # an autoscaler may drain its nodes
    assert annotations.get(DO_NOT_DISRUPT) != "true"
    pdb = one("PodDisruptionBudget")
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selector == deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1 < deployment["spec"]["replicas"]
    spread = {c["topologyKey"]: c for c in template["spec"]["topologySpreadConstraints"]}
    hostname = spread["kubernetes.io/hostname"]
    assert (hostname["maxSkew"], hostname["whenUnsatisfiable"]) == (1, "ScheduleAnyway")
    assert all(c["labelSelector"]["matchLabels"] == selector for c in spread.values())


def exported_names(metric: Metric) -> set[str]:
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}
    return {metric.name + s for s in suffixes.get(metric.type, ("",))}


@pytest.fixture
def exported() -> set[str]:
    registry = Metrics(stale_after_s=60).registry
    return {name for metric in registry.collect() for name in exported_names(metric)}


def test_dashboard_queries_only_exported_metrics(exported: set[str]) -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queried = {name for e in exprs for name in re.findall(r"\btuner_[a-z_]+", e)}
    assert queried, "the dashboard queries the tuner's metrics"
    assert queried <= exported, sorted(queried - exported)
    families = {"tuner_cycles", "tuner_actions", "tuner_cost_per_hour"}
    families |= {"tuner_knowledge_executions", "tuner_cycle_duration_seconds"}
    assert all(any(q.startswith(f) for q in queried) for f in families)
