"""Every command of docs/getting-started.md and docs/operating.md, run word for word on the real
control plane, does what the page says.

The commands are the lines of the pages' ``sh`` blocks, in page order, run by bash in a
directory laid out as the pages assume (the repository's ``.venv``, ``deploy/`` and ``charts/``;
a ``settings.json`` copied from ``settings/example.json`` with the Prometheus URL set, as the
README says; ``kubectl`` and ``helm`` on the PATH, ``$KUBECONFIG`` the harness' cluster). An
optional ``[--flag value]`` is run without and with; ``ID`` is the id ``kb record`` printed.
What a command must do is in :data:`EXPECTED`; any other must exit 0; a command the test
cannot run is in :data:`NOT_RUN` with the reason.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from testkit.cluster_fixture import ClusterHarness
from testkit.helm import Helm
from testkit.prometheus_fixture import PrometheusHarness
from tests.e2e.harness import ROOT, free_port, wait_for

PAGES = ("docs/getting-started.md", "docs/operating.md")
NOT_RUN = {
    "make demo": "the offline plan and `tuner demo`: tests/unit/test_cli.py holds the sample "
    "to what it prints, tests/unit/test_demo.py runs the demo",
    "make test": "the whole suite, of which this test is a part",
    "kubectl -n tuner-system logs -f deploy/deployment-tuner": "KWOK pods run no container, so "
    "there is no log to follow (and -f never ends)",
}
LONG_RUNNING = (
    "tuner run --settings settings.json --dry-run",
    "tuner run --settings settings.json",
)
"""Daemons: stopped with SIGTERM once they run their first cycle; the page says exit 0."""
SHOP = "shop"


@dataclass
class Walk:
    """Where the commands run and what they left to check."""

    cwd: Path
    env: dict[str, str]
    kube: ClusterHarness
    ids: list[str]

    def run(self, line: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def fenced_commands(page: str) -> Iterator[str]:
    """The command lines of a page's ``sh`` blocks, comments cut, continuations joined."""
    text = (ROOT / page).read_text(encoding="utf-8")
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.split(r"\s{2,}#", line, maxsplit=1)[0].strip()
            if command and not command.startswith("#"):
                yield command


def variants(command: str) -> list[str]:
    """A command with its optional ``[...]`` parts left out, then with all of them."""
    if "[" not in command:
        return [command]
    bare = re.sub(r"\s*\[[^]]*\]", "", command)
    full = re.sub(r"\[([^]]*)\]", r"\1", command)
    return [bare, full]


def _ok(done: subprocess.CompletedProcess[str], _walk: Walk) -> None:
    assert done.returncode == 0, done.stderr + done.stdout


def _dump(done: subprocess.CompletedProcess[str], walk: Walk) -> None:
    _ok(done, walk)
    dump = json.loads((walk.cwd / "dump.json").read_text())
    kinds = {item["kind"] for item in dump["items"]}
    assert {"Node", "Pod", "Deployment", "ReplicaSet"} <= kinds, kinds


def _plan(done: subprocess.CompletedProcess[str], walk: Walk) -> None:
    _ok(done, walk)
    if "--format json" in done.args[-1]:
        assert json.loads(done.stdout)["decision"]
    else:
        assert done.stdout.startswith("decision: ")
        assert "\nprices:   " in done.stdout  # which prices were used


def _recorded(done: subprocess.CompletedProcess[str], walk: Walk) -> None:
    _ok(done, walk)
    walk.ids.append(done.stdout.strip())


def _listed(done: subprocess.CompletedProcess[str], walk: Walk) -> None:
    _ok(done, walk)
    assert walk.ids[-1] in done.stdout


def _shown(done: subprocess.CompletedProcess[str], walk: Walk) -> None:
    _ok(done, walk)
    assert json.loads(done.stdout)["id"] == walk.ids[-1]


def _monitor(done: subprocess.CompletedProcess[str], _walk: Walk) -> None:
    """No kube-state-metrics here: what the page says of that case, with exit status 1."""
    report = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    assert report["verdict"] == "unknown"
    assert "kube-state-metrics series absent" in report["reason"]


def _once(done: subprocess.CompletedProcess[str], _walk: Walk) -> None:
    """Exit status 6 (unknown: a single cycle without kube-state-metrics), saying so."""
    assert done.returncode == 6, done.stderr
    (lacked,) = [line for line in done.stderr.splitlines() if "single cycle lacked" in line]
    assert "kube-state-metrics" in lacked
    assert "next in" not in done.stderr


def _onboarded(workloads: tuple[str, ...], onboarded: bool) -> Callable[..., None]:
    def check(done: subprocess.CompletedProcess[str], walk: Walk) -> None:
        _ok(done, walk)
        for name in workloads:
            spec = walk.kube.apps.read_namespaced_deployment(name, SHOP).spec.template.spec
            terms = (spec.affinity and spec.affinity.node_affinity) or None
            assert bool(terms) == onboarded, (name, terms)

    return check


EXPECTED: dict[str, Callable[[subprocess.CompletedProcess[str], Walk], None]] = {
    "kubectl get nodes,pods,deployments,replicasets,statefulsets,daemonsets,"
    "poddisruptionbudgets,horizontalpodautoscalers -A -o json > dump.json": _dump,
    ".venv/bin/tuner plan --snapshot dump.json --settings settings.json": _plan,
    ".venv/bin/tuner plan --snapshot dump.json --settings settings.json --load 1200 "
    "--format json": _plan,
    ".venv/bin/tuner kb record --snapshot dump.json --load 1200": _recorded,
    ".venv/bin/tuner kb list": _listed,
    ".venv/bin/tuner kb show ID": _shown,
    ".venv/bin/tuner monitor --settings settings.json --format json": _monitor,
    ".venv/bin/tuner run --settings settings.json --dry-run --once": _once,
    ".venv/bin/tuner onboard --settings settings.json --workloads shop/cart shop/web": _onboarded(
        ("cart", "web"), True
    ),
    ".venv/bin/tuner offboard --settings settings.json --workloads shop/cart": _onboarded(
        ("cart",), False
    ),
}


def run_daemon(line: str, walk: Walk) -> None:
    """Start it, wait for its first cycle, SIGTERM: exit 0 (operating.md)."""
    log = walk.cwd / "daemon.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {line}"], cwd=walk.cwd, env=walk.env, stdout=out, stderr=out
        )
    try:
        wait_for(f"{line}: its first cycle", lambda: "cycle " in log.read_text(), 180)
        assert "first verdict possible at" in log.read_text()
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def clean_installs(walk: Walk) -> None:
    """Before each way of installing (the chart, then deploy/), remove what an earlier one (or
    an earlier test of the session) installed: the two are alternatives."""
    walk.run("helm uninstall deployment-tuner --namespace tuner-system --wait", 180)
    done = walk.run("kubectl delete -k deploy/ --ignore-not-found --wait=true", 180)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def walk(
    kube: ClusterHarness, helm: Helm, prometheus: PrometheusHarness, tmp_path: Path
) -> Iterator[Walk]:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "kubectl").symlink_to(kube.env["TUNER_KUBECTL"])
    (tools / "helm").symlink_to(helm.binary)
    for name in (".venv", "deploy", "charts"):
        (tmp_path / name).symlink_to(ROOT / name)
    settings = json.loads((ROOT / "settings" / "example.json").read_text())
    settings["prometheus"]["url"] = prometheus.url
    settings["daemon"] = {"metrics_port": free_port(), "metrics_host": "127.0.0.1"}
    (tmp_path / "settings.json").write_text(json.dumps(settings, indent=2))
    (tmp_path / "my-values.yaml").write_text(
        yaml.safe_dump({"settings": {"prometheus": {"url": prometheus.url}}})
    )
    env = {
        **helm.env,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "KUBECONFIG": kube.kubeconfig,
    }
    prometheus.exporter.set_rate("http_requests_total", {"namespace": SHOP}, 50.0)
    for name in ("node-a", "node-b", "node-c"):
        kube.add_node(name, labels={"node.kubernetes.io/instance-type": "e2-standard-4"})
    kube.core.create_namespace({"metadata": {"name": SHOP}})
    here = kube.namespace
    kube.namespace = SHOP
    for name in ("cart", "web"):
        kube.deployment(name, 2, onboarded=False)
    kube.namespace = here
    walk = Walk(tmp_path, env, kube, [])
    try:
        yield walk
    finally:
        clean_installs(walk)
        walk.run("kubectl delete namespace shop --wait=true", 180)


def test_the_pages_commands_do_what_the_pages_say(walk: Walk) -> None:
    ran: list[str] = []
    for page in PAGES:
        for command in fenced_commands(page):
            if command in NOT_RUN:
                continue
            if command.startswith("kubectl create namespace tuner-system"):
                clean_installs(walk)  # the chart and deploy/ are two ways to install
            for variant in variants(command):
                line = variant.replace(" ID", f" {walk.ids[-1]}") if " ID" in variant else variant
                if any(line.endswith(daemon) for daemon in LONG_RUNNING):
                    run_daemon(line, walk)
                else:
                    check = EXPECTED.get(variant)
                    done = walk.run(line)
                    (check or _ok)(done, walk)
                ran.append(f"{page}: {line}")
    assert len(ran) >= 20, ran
    assert any("helm install" in r for r in ran) and any("apply -k deploy/" in r for r in ran)
