"""pytest plugin: a real, private Kubernetes control plane with KWOK fake nodes.

Enable it from ``tests/conftest.py`` (``pytest_plugins``). Fixtures:

``kube_harness`` (session)
    Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok through
    ``scripts/cluster.sh up`` on free ports, with a unique cluster name and a private state
    dir under pytest's tmp dir (the binaries come from the shared build cache; an empty cache
    is built first). Stops and wipes it at the end of the session.
``kube`` (function)
    The harness with a fresh namespace for the test; afterwards the namespace and every
    node the test created are deleted (namespace first, so that no pod of this test is
    left pending to land on the next test's nodes).

Tests using them get the ``cluster`` marker. Without Go and an empty cache they are skipped,
or fail when ``CI`` or ``TUNER_REQUIRE_CLUSTER`` is set.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tuner.execute.affinity import with_preference
from tuner.execute.marks import DELETION_COST
from tuner.model.conventions import Keys
from tuner.settings import Execute

from .scripts import run_script

REPO_ROOT = Path(__file__).resolve().parents[1]
PORTS = ("APISERVER", "ETCD", "ETCD_PEER", "KCM", "SCHEDULER", "KWOK")
TUNER_NAMESPACE = Execute().journal_namespace
KEYS = Keys()
"""The tuner's keys under the default prefix, which the harness's settings keep."""
T = TypeVar("T")

__all__ = ["ClusterHarness", "kube", "kube_harness", "kwok_node", "require_cluster"]


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def eventually(probe: Callable[[], T | None], timeout_s: float = 60.0, what: str = "") -> T:
    """Poll ``probe`` (test set-up only) until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = probe()
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            value = None  # e.g. the API server is restarting
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or probe}")
        time.sleep(0.1)


def kwok_node(
    name: str,
    cpu: str,
    memory: str,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    extended: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A KWOK fake node's API object with that capacity (and ``extended`` resources such as
    ``nvidia.com/gpu``), labels and taints."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extended or {})}
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "type": "kwok",
                **(labels or {}),
            },
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": taints or []},
        "status": {"capacity": resources, "allocatable": resources},
    }


class ClusterHarness:
    """A running private control plane: its environment, an API client and set-up helpers."""

    def __init__(self, state_dir: Path, name: str) -> None:
        ports = _free_ports(len(PORTS))
        self.env = {
            **os.environ,
            "TUNER_CLUSTER_NAME": name,
            "TUNER_CLUSTER_STATE": str(state_dir),
            **{f"TUNER_{p}_PORT": str(port) for p, port in zip(PORTS, ports, strict=True)},
        }
        self.namespace = "default"
        self.nodes: list[str] = []
        self._names = itertools.count(1)

    # ------------------------------------------------------------ lifecycle --
    def script(self, *args: str, timeout: float = 1800) -> str:
        """Run ``scripts/cluster.sh ARGS`` for this cluster; its output."""
        return run_script("cluster.sh", args, self.env, timeout)

    def start(self) -> None:
        """``up``, then read the exported environment (KUBECONFIG, TUNER_AUDIT_LOG, ...)."""
        for line in self.script("up").splitlines():
            if line.startswith("export "):
                key, _, value = line.removeprefix("export ").partition("=")
                self.env[key] = value
        self.kubeconfig = self.env["KUBECONFIG"]
        self.audit_log = Path(self.env["TUNER_AUDIT_LOG"])
        self.api = self.new_api()
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        # The tuner's own namespace (its journal, placeholder pods), as deploy/ creates it.
        self.core.create_namespace({"metadata": {"name": TUNER_NAMESPACE}})

    def stop(self) -> None:
        """``down``: stop every component and remove the state."""
        self.script("down", timeout=120)

    def new_api(self) -> client.ApiClient:
        """A fresh API client for this cluster."""
        configuration = client.Configuration()
        config.load_kube_config(config_file=self.kubeconfig, client_configuration=configuration)
        return client.ApiClient(configuration)

    def settings_doc(self, **execute: Any) -> dict[str, Any]:
        """A settings document pointing at this cluster (short timeouts for tests)."""
        return {
            "kubernetes": {"kubeconfig": self.kubeconfig},
            "execute": {
                "node_removal": "delete-node",
                "verify_timeout_s": 30,
                "eviction_retries": 2,
                "eviction_backoff_s": 0.2,
                "api_retry_s": 30,
                **execute,
            },
        }

    # --------------------------------------------------------------- set-up --
    def new_namespace(self) -> str:
        """A fresh namespace whose default ServiceAccount exists (pods need it)."""
        name = f"t{os.getpid()}-{next(self._names)}"
        self.core.create_namespace({"metadata": {"name": name}})

        def account() -> bool:
            try:
                self.core.read_namespaced_service_account("default", name)
            except ApiException:
                return False
            return True

        eventually(account, what=f"the default ServiceAccount in {name}")
        self.namespace = name
        return name

    def add_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: int = 110,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        extended: dict[str, str] | None = None,
    ) -> str:
        """A KWOK fake node with real capacity, labels and taints; waits until it is Ready."""
        self.core.create_node(kwok_node(name, cpu, memory, pods, labels, taints, extended))
        self.nodes.append(name)

        def ready() -> bool:
            node = self.core.read_node(name)
            conditions = node.status.conditions or []
            taint_keys = {t.key for t in node.spec.taints or []}
            return any(c.type == "Ready" and c.status == "True" for c in conditions) and (
                "node.kubernetes.io/not-ready" not in taint_keys
            )

        eventually(ready, what=f"node {name} Ready")
        return name

    def deployment(
        self,
        name: str,
        replicas: int,
        *,
        cpu: str = "500m",
        memory: str = "256Mi",
        onboarded: bool = True,
        node_selector: dict[str, str] | None = None,
        pod_spec: dict[str, Any] | None = None,
    ) -> None:
        """A Deployment (onboarded: with the tuner's preferred node affinity; ``pod_spec``:
        more fields of its pod template's spec); waits until all its replicas are available."""
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "app",
                    "image": "fake",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
        }
        if onboarded:
            spec["affinity"] = with_preference(None, KEYS.workload_label(self.namespace, name))
        if node_selector:
            spec["nodeSelector"] = node_selector
        spec.update(pod_spec or {})
        self.apps.create_namespaced_deployment(
            self.namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
                },
            },
        )
        self.wait_available(name, replicas)

    def hpa(self, name: str, min_replicas: int, max_replicas: int) -> None:
        """An HPA (autoscaling/v2, the default CPU target) scaling Deployment ``name``; nothing
        scales it here (no metrics-server): the tuner only reads its bounds."""
        client.AutoscalingV2Api(self.api).create_namespaced_horizontal_pod_autoscaler(
            self.namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "minReplicas": min_replicas,
                    "maxReplicas": max_replicas,
                },
            },
        )

    def bare_pod(self, name: str, node: str, **spec: Any) -> None:
        """A pod bound to ``node`` with no owner (never moved: its node is no candidate),
        100m by default (``containers`` and more spec fields may be given); waits until it
        runs."""
        containers = spec.pop(
            "containers",
            [{"name": "c", "image": "fake", "resources": {"requests": {"cpu": "100m"}}}],
        )
        body = {
            "metadata": {"name": name, "labels": {"role": name}},
            "spec": {"nodeName": node, "containers": containers, **spec},
        }
        self.core.create_namespaced_pod(self.namespace, body)
        eventually(
            lambda: self.core.read_namespaced_pod(name, self.namespace).status.phase == "Running",
            what=f"bare pod {name} running",
        )

    def wait_available(self, name: str, replicas: int) -> None:
        """Until the Deployment has exactly ``replicas`` Ready pods and nothing else."""

        def settled() -> bool:
            pods = [p for p in self.pods(f"app={name}") if not p.metadata.deletion_timestamp]
            return len(pods) == replicas and all(_ready(p) for p in pods)

        try:
            eventually(settled, what=f"deployment {name} with {replicas} Ready pods")
        except AssertionError as err:
            raise AssertionError(f"{err}\n{self.diagnosis(f'app={name}')}") from None

    def diagnosis(self, selector: str) -> str:
        """What a timed-out wait leaves to read: the pods, the namespace's Events and the
        last lines of every component's log (not the audit log's)."""
        lines = [
            f"pod {p.metadata.name}: {p.status.phase} on {p.spec.node_name}, "
            + ", ".join(f"{c.type}={c.status}" for c in p.status.conditions or [])
            for p in self.pods(selector)
        ]
        events = self.core.list_namespaced_event(self.namespace).items
        lines += [f"event {e.involved_object.name}: {e.reason} {e.message}" for e in events]
        for log in sorted(self.audit_log.parent.glob("*.log")):
            if log == self.audit_log:
                continue  # the diagnosis' own requests
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
            lines += [f"{log.name}: {line}" for line in tail]
        return "\n".join(lines)

    def pods(self, selector: str = "") -> list[Any]:
        """Pods of the test's namespace."""
        return list(self.core.list_namespaced_pod(self.namespace, label_selector=selector).items)

    def placement(self, selector: str) -> dict[str, str]:
        """Live pod name -> node."""
        return {
            p.metadata.name: p.spec.node_name
            for p in self.pods(selector)
            if not p.metadata.deletion_timestamp
        }

    def leftovers(self) -> list[str]:
        """Every tuner label, annotation, taint or cordon left on nodes and pods (but a surge
        move's ``moved-at``, which its pod template keeps on purpose, as a record)."""
        found = []
        for node in self.core.list_node().items:
            name = node.metadata.name
            found += [f"{name} label {k}" for k in node.metadata.labels or {} if KEYS.owns(k)]
            found += [
                f"{name} annotation {k}" for k in node.metadata.annotations or {} if KEYS.owns(k)
            ]
            found += [f"{name} taint {t.key}" for t in node.spec.taints or [] if KEYS.owns(t.key)]
            if node.spec.unschedulable:
                found.append(f"{name} cordoned")
        for pod in self.core.list_pod_for_all_namespaces().items:
            meta = pod.metadata
            keys = [*(meta.labels or {}), *(meta.annotations or {})]
            found += [
                f"pod {meta.name} {k}"
                for k in keys
                if (KEYS.owns(k) and k != KEYS.moved_at) or k == DELETION_COST
            ]
        try:
            self.core.read_namespaced_config_map(KEYS.journal, TUNER_NAMESPACE)
            found.append("journal ConfigMap")
        except ApiException:
            pass
        return found

    def clean_up(self) -> None:
        """Delete the test's namespace (and wait until it is gone), then its nodes.

        The namespace controller looks at a deleted namespace 5 s after the event and, while
        pods remain, again after half their grace period (16 s for the default 30 s). Its
        pods are force-deleted at once (a terminating namespace admits no new pod) and, while
        it is still there, once a second again with a touch of the namespace, which makes the
        controller look again: 5-6 s per test instead of up to 18 s.
        """
        if self.namespace != "default":
            namespace = self.namespace
            with contextlib.suppress(ApiException):
                self.core.delete_namespace(namespace)
            hurried = [time.monotonic()]
            self._hurry(namespace, touch=False)

            def gone() -> bool:
                try:
                    self.core.read_namespace(namespace)
                except ApiException as err:
                    return err.status == 404
                if time.monotonic() - hurried[0] >= 1.0:
                    hurried[0] = time.monotonic()
                    self._hurry(namespace, touch=True)
                return False

            eventually(gone, 120, what=f"namespace {namespace} deleted")
        for name in self.nodes:
            with contextlib.suppress(ApiException):
                self.core.delete_node(name)
        self.nodes = []
        self.namespace = "default"

    def _hurry(self, namespace: str, touch: bool) -> None:
        """Force-delete the pods left in a deleted namespace; ``touch`` it so that the
        namespace controller looks at it again now rather than after its estimate."""
        with contextlib.suppress(ApiException):
            self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        if touch:
            stamp = {"metadata": {"annotations": {"test.tuner/hurried": str(time.monotonic())}}}
            with contextlib.suppress(ApiException):
                self.core.patch_namespace(namespace, stamp)


def _ready(pod: Any) -> bool:
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or [])


def _can_run() -> bool:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tuner" / "k8s"
    return shutil.which("go") is not None or (cache / "bin").is_dir()


def require_cluster() -> None:
    """Skip the test without Go and without cached binaries (fail instead under ``CI`` or
    ``TUNER_REQUIRE_CLUSTER``)."""
    if not _can_run():
        if os.environ.get("CI") or os.environ.get("TUNER_REQUIRE_CLUSTER"):
            pytest.fail("Go is not installed and no cached Kubernetes binaries exist")
        pytest.skip("Go is not installed and no cached Kubernetes binaries exist")


@pytest.fixture(scope="session")
def kube_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    """A private control plane for the whole session."""
    require_cluster()
    state = tmp_path_factory.mktemp("cluster")
    harness = ClusterHarness(state, f"tuner-test-{os.getpid()}")
    try:
        harness.start()
        yield harness
    finally:
        harness.stop()


@pytest.fixture
def kube(kube_harness: ClusterHarness) -> Iterator[ClusterHarness]:
    """The control plane with a fresh namespace; the test's nodes and namespace are
    deleted afterwards."""
    kube_harness.new_namespace()
    try:
        yield kube_harness
    finally:
        kube_harness.clean_up()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the control plane."""
    for item in items:
        if {"kube", "kube_harness"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)
