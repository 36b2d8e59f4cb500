"""The live path at scale on the real control plane (``scripts/cluster.sh``, KWOK nodes).

    .venv/bin/python -m bench.live_scale --nodes 100 1000 --repeat 3

For each size: a private control plane (own ports and state dir, ``down`` at the end), N KWOK
nodes (2/4/8-core, labelled with instance types), ~100 Deployments, 2 DaemonSets, PDBs and HPAs
giving ~30 pods a node: created by the controllers, bound by the bench (see :func:`populate`),
run by kwok (client rate limits off: ``TUNER_DISABLE_QPS_LIMITS``). Then, each in its own
process under ``/usr/bin/time`` (wall and peak RSS), medians over the repeats: the cache's first
sync and a cycle's read + analyse + plan on the synced cache (and once, :mod:`bench.live_sync`:
where a sync's time goes), ``kubectl get pods -A -o json`` (the API server's own time),
``tuner run --dry-run --once``, the ``kubectl get … -o json`` dump, ``tuner plan --snapshot`` on
it and ``tuner plan --live``. Prints a Markdown table with the load average.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testkit.cluster_fixture import ClusterHarness, kwok_node
from tuner.daemon.run import ONCE_EXIT
from tuner.model.quantity import cpu_millis

DUMP_KINDS = (
    "nodes,pods,deployments,replicasets,statefulsets,daemonsets,"
    "poddisruptionbudgets,horizontalpodautoscalers,persistentvolumeclaims,persistentvolumes"
)
SHAPES = (("m5.large", "2", "8Gi"), ("m5.xlarge", "4", "16Gi"), ("m5.2xlarge", "8", "32Gi"))
REQUESTS = (("50m", "64Mi"), ("100m", "128Mi"), ("150m", "256Mi"))
DEPLOYMENTS = 100
NAMESPACES = 10
PODS_PER_NODE = 30
DAEMONSETS = 2


@dataclass
class Run:
    """One measured command: wall seconds and peak RSS (MB), per repeat."""

    wall: list[float] = field(default_factory=list)
    status: set[int] = field(default_factory=set)
    rss: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    size_mb: float = 0.0
    """The output's size (the dump's), where it is kept."""


def timed(
    argv: list[str], env: dict[str, str], stdout: Any = subprocess.DEVNULL, ok: int = 0
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` under /usr/bin/time (exit statuses up to ``ok`` accepted); its stderr's last
    line is ``wall rss_kb``."""
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", *argv],
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if not 0 <= proc.returncode <= ok:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def record(run: Run, proc: subprocess.CompletedProcess[str], wall: float | None = None) -> None:
    """Add one repeat to ``run`` from /usr/bin/time's line (``wall`` overrides its wall)."""
    time_wall, rss_kb = proc.stderr.strip().splitlines()[-1].split()
    run.wall.append(float(time_wall) if wall is None else wall)
    run.rss.append(int(rss_kb) / 1024)
    run.load.append(os.getloadavg()[0])
    run.status.add(proc.returncode)


# ------------------------------------------------------------------- population --
BINDER = "live-scale-binder"
"""The pods' ``schedulerName``: no scheduler runs by that name, the bench binds them itself."""


def populate(harness: ClusterHarness, nodes: int, limit_s: float) -> dict[str, float]:
    """Nodes, workloads and their pods bound to nodes; seconds each step took, and the pods
    bound and Running.

    The controllers create the pods (Deployment -> ReplicaSet -> pods, DaemonSet -> pods: the
    owners the daemon follows), but the pods name a scheduler that does not run, and the bench
    binds them itself (the binding subresource, as a scheduler does; least-allocated CPU
    first), many at a time: kube-scheduler on this machine bound ~55 pods a second. kwok then
    marks the bound pods Running, as far as it gets within ``limit_s``.
    """
    configuration = harness.new_api().configuration
    configuration.connection_pool_maxsize = 32  # one connection a thread, kept: no handshakes
    api = client.ApiClient(configuration)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    t0 = time.monotonic()
    shapes = [_node(i) for i in range(nodes)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(core.create_node, shapes))
    t_nodes = time.monotonic() - t0
    for n in range(NAMESPACES):
        core.create_namespace({"metadata": {"name": f"scale-{n}"}})
    replicas = max(1, (PODS_PER_NODE - DAEMONSETS) * nodes // DEPLOYMENTS)
    policy = client.PolicyV1Api(api)
    scaling = client.AutoscalingV2Api(api)
    for d in range(DEPLOYMENTS):
        namespace, name = f"scale-{d % NAMESPACES}", f"app-{d}"
        cpu, memory = REQUESTS[d % len(REQUESTS)]
        apps.create_namespaced_deployment(namespace, _deployment(name, replicas, cpu, memory))
        if d % 10 == 0:
            policy.create_namespaced_pod_disruption_budget(namespace, _pdb(name))
        if d % 10 == 1:
            scaling.create_namespaced_horizontal_pod_autoscaler(namespace, _hpa(name, replicas))
    for d in range(DAEMONSETS):
        apps.create_namespaced_daemon_set("kube-system", _daemonset(f"agent-{d}"))
    target = replicas * DEPLOYMENTS + DAEMONSETS * nodes
    deadline = time.monotonic() + limit_s
    bound = _bind_all(api, Binder(shapes), target, deadline)
    t_bound = time.monotonic() - t0 - t_nodes
    running = _wait_running(core, target, deadline)
    return {
        "nodes_s": t_nodes,
        "bound_s": t_bound,
        "pods_s": time.monotonic() - t0 - t_nodes,
        "bound": bound,
        "pods": running,
        "target": target,
    }


class Binder:
    """Where the next pod goes: the node with the most CPU left (DaemonSet pods: their node)."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.free = {
            n["metadata"]["name"]: cpu_millis(n["status"]["allocatable"]["cpu"]) for n in nodes
        }
        self.heap = [(-free, name) for name, free in self.free.items()]
        heapq.heapify(self.heap)

    def place(self, pod: dict[str, Any]) -> str:
        """The node for ``pod``, its requests taken from that node's free CPU."""
        spec = pod["spec"]
        cpu = sum(
            cpu_millis(c.get("resources", {}).get("requests", {}).get("cpu", "0"))
            for c in spec["containers"]
        )
        terms = (spec.get("affinity") or {}).get("nodeAffinity", {})
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required:  # a DaemonSet pod: its node is in matchFields
            node = str(required["nodeSelectorTerms"][0]["matchFields"][0]["values"][0])
            self.free[node] -= cpu
            return node
        while True:
            free, node = heapq.heappop(self.heap)
            if -free == self.free[node]:
                break
            heapq.heappush(self.heap, (-self.free[node], node))  # it took a DaemonSet pod since
        self.free[node] -= cpu
        heapq.heappush(self.heap, (-self.free[node], node))
        return node


def _bind_all(api: client.ApiClient, binder: Binder, target: int, deadline: float) -> int:
    """Bind every unbound pod of :data:`BINDER` as the controllers create them, until
    ``target`` are bound or ``deadline`` (monotonic); how many are bound."""
    bound, start, told = 0, time.monotonic(), time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        while bound < target and time.monotonic() < deadline:
            if time.monotonic() - told > 30:
                told = time.monotonic()
                print(f"  {bound} pods bound after {told - start:.0f} s", file=sys.stderr)
            pending = _unbound(api)
            if not pending:
                time.sleep(1)
                continue
            jobs = [pool.submit(_bind, api, pod["metadata"], binder.place(pod)) for pod in pending]
            bound += sum(job.result() for job in jobs)
    return bound


def _request(api: client.ApiClient, method: str, path: str, body: Any = None) -> Any:
    """One raw request on the client's connection pool (the generated client's per-call
    validation cost the bench more CPU than the API server's work); its decoded answer, None
    for 404 and 409, a RuntimeError for other failures."""
    response = api.rest_client.pool_manager.request(
        method,
        api.configuration.host + path,
        body=None if body is None else orjson.dumps(body),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    if response.status in (404, 409):
        return None
    if response.status >= 300:
        raise RuntimeError(f"{method} {path}: {response.status} {response.data[:200]!r}")
    return orjson.loads(response.data)


def _unbound(api: client.ApiClient) -> list[dict[str, Any]]:
    unbound = f"spec.nodeName=,spec.schedulerName={BINDER}"
    query = urlencode({"limit": 2000, "fieldSelector": unbound})
    page = _request(api, "GET", f"/api/v1/pods?{query}")
    return list(page["items"])


def _bind(api: client.ApiClient, meta: dict[str, Any], node: str) -> bool:
    """Bind one pod (as a scheduler does); False when it went meanwhile or is bound."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
    return _request(api, "POST", path, body) is not None


def _wait_running(
    core: client.CoreV1Api, target: int, deadline: float, stall_s: float = 120.0
) -> int:
    """Until ``target`` pods run, none more started for ``stall_s`` or ``deadline`` (monotonic)
    passed; how many run."""
    best, since = -1, time.monotonic()
    while True:
        try:
            running = _count(core, "status.phase=Running")
        except ApiException:  # e.g. 504: the API server too busy to answer in time
            running = best
        if running > best:
            best, since = running, time.monotonic()
        now = time.monotonic()
        if running >= target or now - since > stall_s or now > deadline:
            return running
        time.sleep(5)


def _count(core: client.CoreV1Api, selector: str) -> int:
    total, token = 0, None
    while True:
        page = core.list_pod_for_all_namespaces(
            field_selector=selector, limit=5000, _continue=token, _preload_content=False
        )
        body = json.loads(page.data)
        total += len(body["items"])
        token = body["metadata"].get("continue")
        if not token:
            return total


def _node(index: int) -> dict[str, Any]:
    kind, cpu, memory = SHAPES[index % len(SHAPES)]
    zone = f"zone-{index % 3}"
    labels = {"node.kubernetes.io/instance-type": kind, "topology.kubernetes.io/zone": zone}
    return kwok_node(f"kwok-{index:05d}", cpu, memory, labels=labels)


def _template(name: str, cpu: str, memory: str) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    container = {"name": "app", "image": "fake", "resources": {"requests": requests}}
    return {
        "metadata": {"labels": {"app": name}},
        "spec": {
            "containers": [container],
            "nodeSelector": {"type": "kwok"},
            "schedulerName": BINDER,
            "terminationGracePeriodSeconds": 0,
        },
    }


def _deployment(name: str, replicas: int, cpu: str, memory: str) -> dict[str, Any]:
    selector = {"matchLabels": {"app": name}}
    template = _template(name, cpu, memory)
    return {
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    }


def _daemonset(name: str) -> dict[str, Any]:
    template = _template(name, "20m", "32Mi")
    template["spec"]["tolerations"] = [{"operator": "Exists"}]
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template},
    }


def _pdb(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}},
    }


def _hpa(name: str, replicas: int) -> dict[str, Any]:
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": target,
            "minReplicas": max(1, replicas // 2),
            "maxReplicas": replicas * 2,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                }
            ],
        },
    }


# ------------------------------------------------------------------ measurements --
STEPS = ("breakdown", "sync", "cycle", "pods", "once", "dump", "snapshot", "live")
"""The measured steps, in order: ``breakdown`` (once: :mod:`bench.live_sync`, where a sync's time
goes, with one unpaged list of every pod from the watch cache), then, each repeat, ``sync`` and
``cycle`` (one child process) and the commands."""


def measure(
    harness: ClusterHarness, repeat: int, work: Path, steps: Sequence[str], keep: Path | None
) -> dict[str, Run]:
    """Every measured command of ``steps``, ``repeat`` times each (``snapshot`` reads the dump
    ``dump`` wrote); the last dump is copied to ``keep`` if given."""
    env = dict(harness.env)
    settings = work / "settings.json"
    # tuner run needs a load query; no Prometheus runs here, so its cycle ends without one
    doc = {**harness.settings_doc(), "load": {"query": "sum(rate(requests_total[1m]))"}}
    settings.write_text(json.dumps(doc))
    dump = work / "dump.json"
    tuner = str(Path(sys.executable).with_name("tuner"))
    commands = {
        "pods": ["bash", "scripts/cluster.sh", "kubectl", "get", "pods", "-A", "-o", "json"],
        "once": [tuner, "run", "--dry-run", "--once", "--settings", str(settings)],
        "dump": ["bash", "scripts/cluster.sh", "kubectl", "get", DUMP_KINDS, "-A", "-o", "json"],
        "snapshot": [tuner, "plan", "--snapshot", str(dump), "--settings", str(settings)],
        "live": [tuner, "plan", "--live", "--settings", str(settings)],
    }
    runs = {name: Run() for name in STEPS if name in steps and name != "breakdown"}
    if "breakdown" in steps:
        parts = subprocess.run(
            [sys.executable, "-m", "bench.live_sync", str(settings)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        print(f"where a sync's time goes: {parts.stdout.strip()}", file=sys.stderr, flush=True)
    for _ in range(repeat):
        if "sync" in runs or "cycle" in runs:
            child = [sys.executable, "-m", "bench.live_scale_child", str(settings), str(repeat)]
            proc = timed(child, env, stdout=subprocess.PIPE)
            figures = json.loads(proc.stdout)
            walls = {"sync": figures["sync_s"], "cycle": statistics.median(figures["cycle_s"])}
            for key, wall in walls.items():
                if key in runs:
                    record(runs[key], proc, wall)
            print(f"cache figures: {json.dumps(figures)}", file=sys.stderr, flush=True)
        for key, argv in commands.items():
            if key not in runs:
                continue
            if key == "dump":
                with dump.open("w") as out:
                    record(runs[key], timed(argv, env, stdout=out))
            else:  # the --once cycle ends without a load reading: its exit says so
                ok = max(ONCE_EXIT.values()) if key == "once" else 0
                record(runs[key], timed(argv, env, ok=ok))
        done = {key: (run.wall[-1], run.rss[-1], run.load[-1]) for key, run in runs.items()}
        print(f"repeat (wall s, RSS MB, load): {done}", file=sys.stderr, flush=True)
    if "dump" in runs:
        runs["dump"].size_mb = dump.stat().st_size / 2**20
        if keep is not None:
            shutil.copyfile(dump, keep)
    return runs


LABELS = {
    "sync": "cache: first sync (list every kind)",
    "cycle": "cycle on the synced cache (read + analyse + plan)",
    "pods": "`kubectl get pods -A -o json > /dev/null` (reference: the API server's time)",
    "once": "`tuner run --dry-run --once`",
    "dump": "`kubectl get … -o json` (the dump)",
    "snapshot": "`tuner plan --snapshot` on the dump",
    "live": "`tuner plan --live`",
}


def table(size: int, population: dict[str, float], runs: dict[str, Run]) -> str:
    """The Markdown table for one cluster size."""
    dump = runs.get("dump")
    dumped = "" if dump is None else f"; dump {dump.size_mb:.0f} MB"
    lines = [
        f"### {size} nodes, {population['target']:.0f} pods",
        "",
        f"Created in {population['nodes_s']:.0f} s (nodes) + {population['bound_s']:.0f} s "
        f"(pods created and bound: {population['bound']:.0f}); "
        f"{population['pods']:.0f} Running after {population['pods_s']:.0f} s{dumped}.",
        "",
        "| step | wall (median) | peak RSS (median) | load (1 min) |",
        "|---|---:|---:|---:|",
    ]
    for key, run in runs.items():
        status = "" if run.status == {0} else f" (exit {', '.join(map(str, sorted(run.status)))})"
        lines.append(
            f"| {LABELS[key]}{status} | {statistics.median(run.wall):.2f} s "
            f"| {statistics.median(run.rss):.0f} MB "
            f"| {min(run.load):.1f}–{max(run.load):.1f} |"
        )
    repeats = max(len(run.wall) for run in runs.values())
    lines.append(f"\n(n = {repeats} repeats; cycle = median of its in-process runs)")
    return "\n".join(lines)


def bench_size(
    size: int, repeat: int, limit_s: float, steps: Sequence[str], keep: Path | None
) -> str:
    """Bring up, populate, measure and tear down one cluster of ``size`` nodes (``keep``: a
    directory the dump is copied to, as ``dump-<size>.json``)."""
    with tempfile.TemporaryDirectory(prefix=f"live-scale-{size}-") as tmp:
        work = Path(tmp)
        harness = ClusterHarness(work / "state", f"scale{size}-{random.randrange(10**6)}")
        harness.env["TUNER_DISABLE_QPS_LIMITS"] = "true"
        try:
            harness.start()
            population = populate(harness, size, limit_s)
            print(f"populated {size} nodes: {population}", file=sys.stderr, flush=True)
            kept = None if keep is None else keep / f"dump-{size}.json"
            return table(size, population, measure(harness, repeat, work, steps, kept))
        finally:
            harness.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--populate-limit",
        type=float,
        default=3600,
        help="seconds to wait for the pods to run before measuring what is there",
    )
    parser.add_argument(
        "--steps",
        nargs="+",
        choices=STEPS,
        default=list(STEPS),
        help="the steps to measure (default: all; at 5,000 nodes kubectl's dump would need ~12 GB "
        "and the breakdown's unpaged list several)",
    )
    parser.add_argument("--keep-dump", type=Path, help="a directory to copy each size's dump to")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # tear the cluster down on TERM
    print(f"machine: {os.cpu_count()} cores; load at start {os.getloadavg()[0]:.1f}\n")
    for size in args.nodes:
        table = bench_size(size, args.repeat, args.populate_limit, args.steps, args.keep_dump)
        print(table + "\n", flush=True)


if __name__ == "__main__":
    main()
