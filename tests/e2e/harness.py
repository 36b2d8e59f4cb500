"""What the end-to-end tests drive on the private control plane of
:mod:`testkit.cluster_fixture`: KWOK nodes and an onboarded workload, the tuner's own
ServiceAccount (so the audit log tells its requests apart), a paused scheduler (so an action
stays in flight), and ``tuner run`` as a subprocess whose /metrics the tests read."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client

from testkit.cluster_fixture import ClusterHarness
from tests.unit.test_deploy import DEPLOY, NAMESPACE, SERVICE_ACCOUNT

ROOT = Path(__file__).resolve().parents[2]
APP = "web"
LOAD_METRIC = "http_requests_total"
INSTANCE_TYPE = "e2-standard-4"
MUTATING = {"create", "update", "patch", "delete", "deletecollection"}
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float, every_s: float = 0.5) -> T:
    """Poll ``probe`` until it answers something truthy; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = probe()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def kubectl(kube: ClusterHarness, *args: str) -> subprocess.CompletedProcess[str]:
    """The cluster's own kubectl (test set-up only; the tuner never shells out)."""
    return subprocess.run(
        [kube.env["TUNER_KUBECTL"], "--kubeconfig", kube.kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def applied(kube: ClusterHarness, *args: str) -> str:
    done = kubectl(kube, *args)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def tuner_kubeconfig(kube: ClusterHarness, path: Path) -> Path:
    """Install deploy/'s Namespace, ServiceAccount and RBAC; a kubeconfig with its token."""
    for name in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
        applied(kube, "apply", "-f", str(DEPLOY / name))
    return account_kubeconfig(kube, NAMESPACE, SERVICE_ACCOUNT, path)


def account_kubeconfig(kube: ClusterHarness, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that authenticates as a ServiceAccount (a token valid for two hours)."""
    token = applied(kube, "create", "token", account, "-n", namespace, "--duration", "2h").strip()
    admin = yaml.safe_load(Path(kube.kubeconfig).read_text())
    cluster_entry = admin["clusters"][0]["cluster"]
    if "certificate-authority" in cluster_entry:
        ca = Path(cluster_entry.pop("certificate-authority")).read_bytes()
        cluster_entry["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster_entry}],
        "users": [{"name": "tuner", "user": {"token": token}}],
        "contexts": [{"name": "tuner", "context": {"cluster": "e2e", "user": "tuner"}}],
        "current-context": "tuner",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def scheduler_paused(kube: ClusterHarness) -> Iterator[None]:
    """kube-scheduler stopped (SIGSTOP) inside the block: new pods stay Pending, so an action
    waiting for its pod stays in flight for as long as the test needs."""
    pid = int((Path(kube.kubeconfig).parent / "pids" / "kube-scheduler.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def add_nodes(kube: ClusterHarness, names: list[str]) -> None:
    """Same-shape KWOK nodes (4 cores, 16 GiB), Ready and untainted."""
    for name in names:
        kube.add_node(
            name, cpu="4", memory="16Gi", labels={"node.kubernetes.io/instance-type": INSTANCE_TYPE}
        )


def deploy_app(kube: ClusterHarness, replicas: int) -> None:
    """The onboarded workload (1 core per pod), all replicas Ready."""
    kube.deployment(APP, replicas, cpu="1", memory="1Gi")


def scale_app(kube: ClusterHarness, replicas: int) -> None:
    kube.apps.patch_namespaced_deployment_scale(
        APP, kube.namespace, {"spec": {"replicas": replicas}}
    )


def journal_left(kube: ClusterHarness) -> bool:
    """Whether the tuner's journal of a transition in flight is still there."""
    try:
        kube.core.read_namespaced_config_map("tuner-dev-journal", NAMESPACE)
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


@dataclass(frozen=True)
class State:
    """What the tests assert about the cluster."""

    nodes: dict[str, Any]
    pods: dict[str, str | None]
    """Running app pods -> node."""
    ready: int
    replicas: int

    @property
    def pods_per_node(self) -> dict[str, int]:
        counts = dict.fromkeys(self.nodes, 0)
        for node in self.pods.values():
            if node is not None:
                counts[node] = counts.get(node, 0) + 1
        return counts


def read_state(kube: ClusterHarness) -> State:
    core, namespace = kube.core, kube.namespace
    nodes = {n.metadata.name: n for n in core.list_node().items}
    pods = {
        p.metadata.name: p.spec.node_name
        for p in core.list_namespaced_pod(namespace, label_selector=f"app={APP}").items
        if p.metadata.deletion_timestamp is None
    }
    deployment = kube.apps.read_namespaced_deployment(APP, namespace)
    return State(nodes, pods, deployment.status.ready_replicas or 0, deployment.spec.replicas or 0)


def settled(kube: ClusterHarness, replicas: int) -> State | None:
    """The state once the app runs exactly ``replicas`` ready pods, all placed."""
    state = read_state(kube)
    placed = all(state.pods.values())
    ok = state.replicas == replicas == state.ready == len(state.pods) and placed
    return state if ok else None


def audit_offset(kube: ClusterHarness) -> int:
    """Where the audit log ends now: read from here to see only later requests."""
    return kube.audit_log.stat().st_size


def audit_events(kube: ClusterHarness, user: str, since: int = 0) -> Iterator[dict[str, Any]]:
    """Completed requests of ``user`` in the API server's audit log (from byte ``since``)."""
    with kube.audit_log.open("rb") as log:
        log.seek(since)
        lines = log.read().decode().splitlines()
    for line in lines:
        event = json.loads(line)
        if event.get("stage") == "ResponseComplete" and event["user"]["username"] == user:
            yield event


def mutations(kube: ClusterHarness, user: str, since: int = 0) -> list[str]:
    """``verb resource/subresource name`` of every mutating request ``user`` made."""
    found = []
    for event in audit_events(kube, user, since):
        if event["verb"] in MUTATING:
            ref = event.get("objectRef", {})
            resource = "/".join(x for x in (ref.get("resource"), ref.get("subresource")) if x)
            found.append(f"{event['verb']} {resource} {ref.get('name', '')}".strip())
    return found


@dataclass
class Tuner:
    """``tuner run`` in a subprocess."""

    settings: Path
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    log: Path | None = None

    def start(self) -> Tuner:
        self.log = self.settings.with_suffix(f".{int(time.time() * 1000)}.log")
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tuner.cli",
                    "run",
                    "--settings",
                    str(self.settings),
                    *self.args,
                ],
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        return self

    @property
    def metrics_url(self) -> str:
        port = json.loads(self.settings.read_text())["daemon"]["metrics_port"]
        return f"http://127.0.0.1:{port}/metrics"

    def scrape(self) -> str:
        """/metrics now ("" while it is not up)."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=2) as response:
                return str(response.read().decode())
        except OSError:
            return ""

    def metric(self, name: str) -> float | None:
        """An unlabelled sample's value from /metrics (None while absent)."""
        for line in self.scrape().splitlines():
            if line.startswith(f"{name} "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def cycles(self, outcome: str | None = None) -> float:
        """Cycles so far (of one outcome), from /metrics; 0 while it is not up."""
        text = self.scrape()
        total = 0.0
        for line in text.splitlines():
            if line.startswith("tuner_cycles_total{") and (
                outcome is None or f'outcome="{outcome}"' in line
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def signal(self, number: int) -> None:
        assert self.process is not None
        self.process.send_signal(number)

    def stop(self, timeout_s: float = 120) -> int:
        """SIGTERM and wait; the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def output(self) -> str:
        return self.log.read_text() if self.log else ""


def write_settings(path: Path, **sections: dict[str, Any]) -> Path:
    path.write_text(json.dumps(sections, indent=2))
    return path
