"""A controllable, in-process Prometheus exporter for integration tests (stdlib only).

It serves, on ``/metrics`` in the Prometheus text format (0.0.4), kube-state-metrics-style
series (nodes, pods, deployments) and cAdvisor-style counters whose values the test sets
at run time::

    exporter = TestExporter()          # binds 127.0.0.1 on a free port
    exporter.start()
    exporter.set_cluster(
        nodes=["node-a", ExportedNode("node-b", ready=False)],
        pods=[ExportedPod("shop", "web-7d9c-abcde", "node-a", "ReplicaSet", "web-7d9c")],
        deployments=[ExportedDeployment("shop", "web", spec=3)],
    )
    exporter.set_rate("http_requests_total", {"namespace": "shop", "service": "web"}, 1000.0)
    ...
    exporter.stop()

Counters are computed from wall-clock time at scrape time, ``value = base + rate * (now -
t_set)``, so ``rate(metric[...])`` in PromQL returns the rate the test set. Changing a rate
keeps the counter continuous; :meth:`TestExporter.reset_counter` simulates a counter reset.

Two self-describing series let a harness know which state Prometheus has ingested:
``tuner_test_exporter_scrape_seq`` (1, 2, 3, … one per served scrape; the state is
snapshotted under the same lock, so scrape ``k`` carries every change made before the
exporter's :attr:`~TestExporter.scrape_count` was ``k - 1``) and
``tuner_test_exporter_generation`` (bumped by every state change).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

__all__ = [
    "POD_PHASES",
    "ExportedDeployment",
    "ExportedNode",
    "ExportedPod",
    "TestExporter",
]

#: The phases kube-state-metrics emits for ``kube_pod_status_phase`` (1 for the current one).
POD_PHASES: tuple[str, ...] = ("Pending", "Running", "Succeeded", "Failed", "Unknown")

SCRAPE_SEQ_METRIC = "tuner_test_exporter_scrape_seq"
GENERATION_METRIC = "tuner_test_exporter_generation"

Labels = Mapping[str, str]
_LabelKey = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ExportedNode:
    """A node as kube-state-metrics would report it."""

    name: str
    ready: bool = True
    unschedulable: bool = False
    #: ``kube_node_status_allocatable{resource="cpu",unit="core"}``; omitted when None.
    cpu_cores: float | None = None
    #: ``kube_node_status_allocatable{resource="memory",unit="byte"}``; omitted when None.
    memory_bytes: float | None = None


@dataclass(frozen=True)
class ExportedPod:
    """A pod as kube-state-metrics would report it.

    ``owner_kind``/``owner_name`` become ``created_by_kind``/``created_by_name`` on
    ``kube_pod_info`` and ``owner_kind``/``owner_name`` on ``kube_pod_owner``. For a
    ReplicaSet owner named ``<deployment>-<hash>`` a matching ``kube_replicaset_owner``
    (owner_kind="Deployment") is emitted too, so pod → deployment joins work.
    """

    namespace: str
    name: str
    node: str
    owner_kind: str = "ReplicaSet"
    owner_name: str = ""
    phase: str = "Running"
    ready: bool = True
    container: str = "app"
    #: ``kube_pod_container_resource_requests{resource="cpu",unit="core"}``; omitted when None.
    cpu_request: float | None = None
    #: ``kube_pod_container_resource_requests{resource="memory",unit="byte"}``; omitted when None.
    memory_request: float | None = None

    def __post_init__(self) -> None:
        if self.phase not in POD_PHASES:
            raise ValueError(f"phase {self.phase!r} is not one of {POD_PHASES}")


@dataclass(frozen=True)
class ExportedDeployment:
    """A deployment's replica counters; the ``None`` ones default to a settled rollout."""

    namespace: str
    name: str
    spec: int
    status: int | None = None  # kube_deployment_status_replicas, default spec
    updated: int | None = None  # kube_deployment_status_replicas_updated, default status
    available: int | None = None  # kube_deployment_status_replicas_available, default status
    generation: int = 1  # kube_deployment_metadata_generation
    observed: int | None = None  # kube_deployment_status_observed_generation, default generation

    def resolved(self) -> tuple[int, int, int, int, int, int]:
        """(spec, status, updated, available, generation, observed) with defaults filled in."""
        status = self.spec if self.status is None else self.status
        updated = status if self.updated is None else self.updated
        available = status if self.available is None else self.available
        observed = self.generation if self.observed is None else self.observed
        return self.spec, status, updated, available, self.generation, observed


@dataclass
class _Counter:
    """A counter advancing at ``rate`` per second of wall-clock time since ``t0``."""

    base: float
    rate: float
    t0: float

    def value(self, now: float) -> float:
        return self.base + self.rate * max(0.0, now - self.t0)


@dataclass
class _State:
    nodes: tuple[ExportedNode, ...] = ()
    pods: tuple[ExportedPod, ...] = ()
    deployments: tuple[ExportedDeployment, ...] = ()
    counters: dict[str, dict[_LabelKey, _Counter]] = field(default_factory=dict)
    gauges: dict[str, dict[_LabelKey, float]] = field(default_factory=dict)


def _key(labels: Labels) -> _LabelKey:
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _fmt_labels(labels: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}" if inner else ""


class _Family:
    """Samples of one metric name, rendered as one contiguous block with HELP/TYPE."""

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help_text = help_text
        self.samples: list[tuple[_LabelKey, float]] = []

    def add(self, value: float, **labels: str) -> None:
        self.samples.append((tuple(labels.items()), float(value)))

    def render(self, out: list[str]) -> None:
        if not self.samples:
            return
        out.append(f"# HELP {self.name} {self.help_text}")
        out.append(f"# TYPE {self.name} {self.kind}")
        out.extend(f"{self.name}{_fmt_labels(k)} {_fmt_value(v)}" for k, v in self.samples)


def _deployment_of_replicaset(rs_name: str) -> str | None:
    """``web-7d9c5b`` → ``web`` (a ReplicaSet is named <deployment>-<pod-template-hash>)."""
    head, sep, _ = rs_name.rpartition("-")
    return head if sep and head else None


class _QuietServer(ThreadingHTTPServer):
    """Says nothing when a scraper hangs up mid-answer (its scrape timeout): the traceback
    would land in whichever test's captured stderr is open at that moment."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class TestExporter:
    """In-process HTTP exporter whose metric values the test controls.

    Thread-safe: setters may be called while Prometheus scrapes. ``port=0`` (default)
    binds a free port, available as :attr:`port` after :meth:`start`.
    """

    __test__: ClassVar[bool] = False  # not a pytest test class despite the name

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._requested_port = port
        self._lock = threading.Condition()
        self._state = _State()
        self._generation = 0
        self._scrape_seq = 0
        self._status_code = 200
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> TestExporter:
        """Bind and serve in a daemon thread; returns self. Idempotent."""
        if self._server is not None:
            return self
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404)
                    return
                code, body = exporter._scrape()
                payload = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep pytest output clean

        server = _QuietServer((self._host, self._requested_port), Handler)
        server.daemon_threads = True
        # Reuse the same port across stop()/start() so Prometheus' target stays valid.
        self._requested_port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"test-exporter-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (Prometheus then sees ``up == 0``). Idempotent; state is kept."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> TestExporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The bound port (the requested one before the first start())."""
        return self._requested_port

    @property
    def target(self) -> str:
        """``host:port`` as a Prometheus static target."""
        return f"{self._host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.target}/metrics"

    @property
    def running(self) -> bool:
        return self._server is not None

    # ------------------------------------------------------------------ state setters

    def set_cluster(
        self,
        nodes: Sequence[str | ExportedNode] = (),
        pods: Sequence[ExportedPod] = (),
        deployments: Sequence[ExportedDeployment] = (),
    ) -> None:
        """Replace the whole kube-state-metrics view (nodes, pods, deployments)."""
        node_objs = tuple(ExportedNode(n) if isinstance(n, str) else n for n in nodes)
        with self._lock:
            self._state.nodes = node_objs
            self._state.pods = tuple(pods)
            self._state.deployments = tuple(deployments)
            self._bump()

    def set_rate(
        self, metric: str, labels: Labels, per_second: float, *, initial: float = 0.0
    ) -> None:
        """Make counter ``metric{labels}`` advance at ``per_second`` from now on.

        A new series starts at ``initial``; an existing one continues from its current
        value (no reset). ``per_second=0`` freezes it.
        """
        if per_second < 0:
            raise ValueError("a counter cannot decrease; use reset_counter()")
        now = time.time()
        with self._lock:
            series = self._state.counters.setdefault(metric, {})
            key = _key(labels)
            old = series.get(key)
            base = old.value(now) if old is not None else initial
            series[key] = _Counter(base=base, rate=float(per_second), t0=now)
            self._bump()

    def reset_counter(self, metric: str, labels: Labels, value: float = 0.0) -> None:
        """Simulate a counter reset (e.g. container restart); the rate is kept."""
        now = time.time()
        with self._lock:
            series = self._state.counters.setdefault(metric, {})
            key = _key(labels)
            rate = series[key].rate if key in series else 0.0
            series[key] = _Counter(base=value, rate=rate, t0=now)
            self._bump()

    def set_gauge(self, metric: str, labels: Labels, value: float) -> None:
        """Serve an arbitrary gauge ``metric{labels} value``."""
        with self._lock:
            self._state.gauges.setdefault(metric, {})[_key(labels)] = float(value)
            self._bump()

    def remove_series(self, metric: str, labels: Labels | None = None) -> None:
        """Stop serving one counter/gauge series (``labels``) or all series of ``metric``."""
        with self._lock:
            for table in (self._state.counters, self._state.gauges):
                if metric not in table:
                    continue
                if labels is None:
                    del table[metric]
                else:
                    table[metric].pop(_key(labels), None)
            self._bump()

    # cAdvisor / application conveniences -------------------------------------------------

    def set_network_receive_rate(
        self, namespace: str, pod: str, bytes_per_second: float, interface: str = "eth0"
    ) -> None:
        """``container_network_receive_bytes_total{namespace,pod,interface}``."""
        self.set_rate(
            "container_network_receive_bytes_total",
            {"namespace": namespace, "pod": pod, "interface": interface},
            bytes_per_second,
        )

    def set_cpu_rate(self, namespace: str, pod: str, container: str, cores: float) -> None:
        """``container_cpu_usage_seconds_total{namespace,pod,container}`` at ``cores``."""
        self.set_rate(
            "container_cpu_usage_seconds_total",
            {"namespace": namespace, "pod": pod, "container": container},
            cores,
        )

    def set_request_rate(self, namespace: str, service: str, per_second: float) -> None:
        """``http_requests_total{namespace,service}`` (an application counter)."""
        self.set_rate(
            "http_requests_total", {"namespace": namespace, "service": service}, per_second
        )

    def set_available(self, available: bool, status_code: int = 503) -> None:
        """When False, /metrics answers ``status_code`` (Prometheus sets ``up`` to 0)."""
        with self._lock:
            self._status_code = 200 if available else status_code
            self._bump()

    def reset(self) -> None:
        """Forget all served state (cluster, counters, gauges); keeps the scrape sequence."""
        with self._lock:
            self._state = _State()
            self._status_code = 200
            self._bump()

    # ------------------------------------------------------------------ observation

    @property
    def scrape_count(self) -> int:
        """Successful /metrics responses served so far (== last served scrape_seq)."""
        with self._lock:
            return self._scrape_seq

    @property
    def generation(self) -> int:
        """Number of state changes so far."""
        with self._lock:
            return self._generation

    def wait_for_http_scrapes(self, n: int = 1, timeout: float = 30.0) -> int:
        """Block until ``n`` more scrapes were *served* (not necessarily ingested yet).

        Returns the new scrape count; raises TimeoutError.
        """
        with self._lock:
            target = self._scrape_seq + n
            if not self._lock.wait_for(lambda: self._scrape_seq >= target, timeout):
                raise TimeoutError(
                    f"exporter served {self._scrape_seq}, wanted {target} within {timeout}s"
                )
            return self._scrape_seq

    def render(self) -> str:
        """The exposition text a scrape would get now (does not count as a scrape)."""
        with self._lock:
            return self._render(time.time(), self._scrape_seq)

    # ------------------------------------------------------------------ internals

    def _bump(self) -> None:
        self._generation += 1

    def _scrape(self) -> tuple[int, str]:
        with self._lock:
            if self._status_code != 200:
                return self._status_code, "exporter unavailable (set_available(False))\n"
            self._scrape_seq += 1
            body = self._render(time.time(), self._scrape_seq)
            self._lock.notify_all()
            return 200, body

    def _render(self, now: float, seq: int) -> str:
        st = self._state
        families = [
            *self._node_families(st.nodes),
            *self._pod_families(st.pods),
            *self._deployment_families(st.deployments),
        ]
        for name, series in sorted(st.counters.items()):
            fam = _Family(name, "counter", f"test counter {name}")
            for key, counter in sorted(series.items()):
                fam.samples.append((key, counter.value(now)))
            families.append(fam)
        for name, gauges in sorted(st.gauges.items()):
            fam = _Family(name, "gauge", f"test gauge {name}")
            fam.samples.extend(sorted(gauges.items()))
            families.append(fam)
        seq_fam = _Family(SCRAPE_SEQ_METRIC, "gauge", "sequence number of this scrape")
        seq_fam.add(seq)
        gen_fam = _Family(GENERATION_METRIC, "gauge", "state changes made before this scrape")
        gen_fam.add(self._generation)
        families += [seq_fam, gen_fam]

        out: list[str] = []
        for fam in families:
            fam.render(out)
        return "\n".join(out) + "\n"

    @staticmethod
    def _node_families(nodes: Sequence[ExportedNode]) -> list[_Family]:
        info = _Family("kube_node_info", "gauge", "Information about a cluster node.")
        cond = _Family("kube_node_status_condition", "gauge", "The condition of a node.")
        unsched = _Family(
            "kube_node_spec_unschedulable", "gauge", "Whether a node can schedule new pods."
        )
        alloc = _Family(
            "kube_node_status_allocatable", "gauge", "The allocatable resources of a node."
        )
        for n in nodes:
            info.add(1, node=n.name)
            for status, on in (("true", n.ready), ("false", not n.ready), ("unknown", False)):
                cond.add(int(on), node=n.name, condition="Ready", status=status)
            unsched.add(int(n.unschedulable), node=n.name)
            if n.cpu_cores is not None:
                alloc.add(n.cpu_cores, node=n.name, resource="cpu", unit="core")
            if n.memory_bytes is not None:
                alloc.add(n.memory_bytes, node=n.name, resource="memory", unit="byte")
        return [info, cond, unsched, alloc]

    @staticmethod
    def _pod_families(pods: Sequence[ExportedPod]) -> list[_Family]:
        info = _Family("kube_pod_info", "gauge", "Information about pod.")
        owner = _Family("kube_pod_owner", "gauge", "Information about the Pod's owner.")
        rs_owner = _Family(
            "kube_replicaset_owner", "gauge", "Information about the ReplicaSet's owner."
        )
        phase = _Family("kube_pod_status_phase", "gauge", "The pods current phase.")
        ready = _Family("kube_pod_status_ready", "gauge", "Describes whether the pod is ready.")
        requests = _Family(
            "kube_pod_container_resource_requests",
            "gauge",
            "The number of requested resource by a container.",
        )
        seen_rs: set[tuple[str, str]] = set()
        for p in pods:
            info.add(
                1,
                namespace=p.namespace,
                pod=p.name,
                node=p.node,
                created_by_kind=p.owner_kind,
                created_by_name=p.owner_name,
            )
            owner.add(
                1,
                namespace=p.namespace,
                pod=p.name,
                owner_kind=p.owner_kind,
                owner_name=p.owner_name,
                owner_is_controller="true",
            )
            if p.owner_kind == "ReplicaSet" and (p.namespace, p.owner_name) not in seen_rs:
                seen_rs.add((p.namespace, p.owner_name))
                deployment = _deployment_of_replicaset(p.owner_name)
                if deployment is not None:
                    rs_owner.add(
                        1,
                        namespace=p.namespace,
                        replicaset=p.owner_name,
                        owner_kind="Deployment",
                        owner_name=deployment,
                        owner_is_controller="true",
                    )
            for ph in POD_PHASES:
                phase.add(int(ph == p.phase), namespace=p.namespace, pod=p.name, phase=ph)
            for cond, on in (("true", p.ready), ("false", not p.ready), ("unknown", False)):
                ready.add(int(on), namespace=p.namespace, pod=p.name, condition=cond)
            common = {
                "namespace": p.namespace,
                "pod": p.name,
                "container": p.container,
                "node": p.node,
            }
            if p.cpu_request is not None:
                requests.add(p.cpu_request, **common, resource="cpu", unit="core")
            if p.memory_request is not None:
                requests.add(p.memory_request, **common, resource="memory", unit="byte")
        return [info, owner, rs_owner, phase, ready, requests]

    @staticmethod
    def _deployment_families(deployments: Sequence[ExportedDeployment]) -> list[_Family]:
        names = (
            ("kube_deployment_spec_replicas", "Number of desired pods for a deployment."),
            ("kube_deployment_status_replicas", "The number of replicas per deployment."),
            (
                "kube_deployment_status_replicas_updated",
                "The number of updated replicas per deployment.",
            ),
            (
                "kube_deployment_status_replicas_available",
                "The number of available replicas per deployment.",
            ),
            (
                "kube_deployment_metadata_generation",
                "Sequence number representing a specific generation of the desired state.",
            ),
            (
                "kube_deployment_status_observed_generation",
                "The generation observed by the deployment controller.",
            ),
        )
        fams = [_Family(name, "gauge", text) for name, text in names]
        for d in deployments:
            spec, status, updated, available, generation, observed = d.resolved()
            values = (spec, status, updated, available, generation, observed)
            for fam, value in zip(fams, values, strict=True):
                fam.add(value, namespace=d.namespace, deployment=d.name)
        return fams
