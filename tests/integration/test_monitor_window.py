"""The monitor against a real Prometheus scraping the test exporter every second.

Each test serves its own nodes/pods (distinct names), waits until Prometheus has ingested the
state, and observes a window that starts after that, so series of earlier tests cannot leak in.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from testkit.builders import cluster, node, pod
from testkit.exporter import ExportedDeployment, ExportedNode, ExportedPod
from testkit.prometheus_fixture import PrometheusHarness
from tuner.model.cluster import Cluster
from tuner.model.conventions import Keys
from tuner.model.load import Load
from tuner.model.window_report import Verdict, WindowReport
from tuner.monitor import window as window_module
from tuner.monitor.evidence import Probe
from tuner.monitor.observe import observe_window
from tuner.monitor.prometheus import InstantResult, PrometheusClient
from tuner.monitor.series import Series
from tuner.settings import LoadSettings, Prometheus, Settings, Windows

pytestmark = pytest.mark.prometheus

WINDOW_S = 15.0
_ids = itertools.count(1)


@pytest.fixture
def ns() -> str:
    """A namespace (and name prefix) no other test uses."""
    return f"t{next(_ids)}x{int(time.time()) % 100000}"


def settings_for(
    prometheus: PrometheusHarness,
    measure_s: float,
    *,
    query: str | None = None,
    pod_name: str | None = None,
    timeout_s: float = 5.0,
) -> Settings:
    return Settings(
        load=LoadSettings(delta=0.1, query=query, pod_name=pod_name),
        windows=Windows(measure_s=measure_s, retry_s=measure_s / 10, warmup_s=0.0),
        prometheus=Prometheus(url=prometheus.url, timeout_s=timeout_s),
    )


def observe(settings: Settings, end: float, snapshots: SnapshotsAt | None = None) -> WindowReport:
    with PrometheusClient(settings.prometheus) as client:
        return observe_window(settings, end, client, snapshots)


def rate_query(ns: str) -> str:
    """The namespace's request rate over the window."""
    return f'sum(rate(http_requests_total{{namespace="{ns}"}}[$window]))'


def observe_rate(prometheus: PrometheusHarness, ns: str, start: float, end: float) -> WindowReport:
    """The window from ``start`` to ``end`` with the namespace's request rate as its load."""
    return observe(settings_for(prometheus, end - start, query=rate_query(ns)), end)


def wait_past(prometheus: PrometheusHarness, t: float) -> None:
    """Wait until Prometheus has ingested a scrape taken after ``t`` (no sleeping)."""
    while time.time() < t:
        prometheus.wait_for_scrapes(1)
    prometheus.wait_for_scrapes(1)


def begin(prometheus: PrometheusHarness) -> float:
    """A window may start now: the state just set is ingested, and two evaluation steps
    (``MIN_STEP_S``) have passed since. Once (under CI load) a window started right after the
    ingest saw the previous test's nodes at its first step: the scrape that ended their series
    is timestamped when it starts, before it is ingested, and the margin covers one that starts
    late (cause not pinned down; the margin costs about 2 s a test)."""
    prometheus.wait_for_scrapes(1)
    start = time.time() + 2 * window_module.MIN_STEP_S
    while time.time() < start:
        prometheus.wait_for_scrapes(1)
    return start


def web_pods(ns: str, names: str, phase: str = "Running", ready: bool = True) -> list[ExportedPod]:
    rs = "web-5f7d8"
    return [
        ExportedPod(ns, f"{rs}-{n}", f"{ns}-node-a", "ReplicaSet", rs, phase=phase, ready=ready)
        for n in names.split()
    ]


def two_workloads(ns: str, web: int = 3) -> dict[str, Any]:
    """Keyword arguments of set_cluster: web (``web`` pods) and api (2 pods) on two nodes."""
    pods = web_pods(ns, " ".join("abcdefgh"[:web]))
    pods += [
        ExportedPod(ns, f"api-9c8b7-{n}", f"{ns}-node-b", "ReplicaSet", "api-9c8b7") for n in "xy"
    ]
    return {
        "nodes": [f"{ns}-node-a", f"{ns}-node-b"],
        "pods": pods,
        "deployments": [
            ExportedDeployment(ns, "web", spec=web),
            ExportedDeployment(ns, "api", spec=2),
        ],
    }


def test_stable_window_and_the_load_it_served(prometheus: PrometheusHarness, ns: str) -> None:
    exporter = prometheus.exporter
    exporter.set_cluster(**two_workloads(ns))
    # Bytes received: the three web pods (the load) and the api pods (another prefix).
    for name, rate in (("a", 1000.0), ("b", 2000.0), ("c", 3000.0)):
        exporter.set_network_receive_rate(ns, f"web-5f7d8-{name}", rate)
    for name in "xy":
        exporter.set_network_receive_rate(ns, f"api-9c8b7-{name}", 50_000.0)
    exporter.set_request_rate(ns, "web", 120.0)
    exporter.set_request_rate(ns, "api", 30.0)
    start = begin(prometheus)
    end = start + WINDOW_S
    wait_past(prometheus, end)

    # The 2019 key: the thesis' query, bytes received by pods whose name starts with it.
    thesis = observe(settings_for(prometheus, WINDOW_S, pod_name="web-"), end)
    assert thesis.verdict is Verdict.STABLE, thesis.findings
    assert thesis.source == "kube-state-metrics"
    assert "2 nodes, 5 pods in 2 workloads" in thesis.reason
    assert thesis.load_query == (
        'sum(rate(container_network_receive_bytes_total{pod=~"web-.*"}[15s]))'
    )
    assert thesis.load is not None and thesis.load.is_scalar
    assert thesis.load.total == pytest.approx(6000.0, rel=0.05)
    assert thesis.actionable

    # A per-workload load vector over the same window.
    query = f'sum by (service) (rate(http_requests_total{{namespace="{ns}"}}[$window]))'
    vector = observe(settings_for(prometheus, WINDOW_S, query=query), end)
    assert vector.verdict is Verdict.STABLE
    assert vector.load is not None and not vector.load.is_scalar
    assert set(vector.load.values) == {'{service="api"}', '{service="web"}'}
    assert vector.load.values['{service="web"}'] == pytest.approx(120.0, rel=0.05)
    assert vector.load.values['{service="api"}'] == pytest.approx(30.0, rel=0.05)
    served = Load.vector({'{service="web"}': 120.0, '{service="api"}': 30.0})
    assert served.within(vector.load, 0.05)
    assert not served.within(Load.vector({'{service="web"}': 120.0}), 0.05)


def test_scale_up_and_down_inside_the_window_is_unstable(
    prometheus: PrometheusHarness, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = prometheus.exporter
    exporter.set_request_rate(ns, "web", 10.0)
    exporter.set_cluster(**two_workloads(ns, web=3))
    start = begin(prometheus)
    prometheus.wait_for_scrapes(3)
    exporter.set_cluster(**two_workloads(ns, web=5))
    prometheus.wait_for_scrapes(3)
    exporter.set_cluster(**two_workloads(ns, web=3))
    prometheus.wait_for_scrapes(3)
    end = time.time()
    prometheus.wait_for_scrapes(1)

    report = observe_rate(prometheus, ns, start, end)

    assert report.verdict is Verdict.UNSTABLE
    assert report.actionable  # windows.scope touched: only web and its node changed
    assert report.unsettled.nodes == {f"{ns}-node-a"}
    assert {str(w) for w in report.unsettled.workloads} == {f"{ns}/Deployment/web"}
    web = f"{ns}/Deployment/web"
    assert any(f.startswith(f"{web}: pod count changed 3 → 5 → 3") for f in report.findings)
    assert any(
        f.startswith(f"deployment {ns}/web: desired replicas changed 3 → 5 → 3")
        for f in report.findings
    ), report.findings
    assert not any(f"{ns}/Deployment/api" in f for f in report.findings)
    assert report.load is not None  # the load is still measured, to tune the query

    # With only two steps (the window's start and end, the thesis' comparison) the timelines
    # see 3 and 3; the over-the-window probes still see every scraped sample.
    monkeypatch.setattr(window_module, "MAX_STEPS", 1)
    coarse = observe_rate(prometheus, ns, start, end)
    assert coarse.verdict is Verdict.UNSTABLE
    assert not any("pod count changed" in f for f in coarse.findings)
    assert f"{web}: 5 different pods in the window but 3 at a time" in coarse.reason
    assert any(
        f.startswith(f"deployment {ns}/web: replicas or generation changed inside the window")
        for f in coarse.findings
    ), coarse.findings


def test_a_pod_pending_for_two_scrapes_makes_the_window_unstable(
    prometheus: PrometheusHarness, ns: str
) -> None:
    exporter = prometheus.exporter
    exporter.set_request_rate(ns, "web", 10.0)
    exporter.set_cluster(**two_workloads(ns))
    start = begin(prometheus)
    prometheus.wait_for_scrapes(2)
    pending = two_workloads(ns)
    pending["pods"][2] = web_pods(ns, "c", phase="Pending", ready=False)[0]
    exporter.set_cluster(**pending)
    prometheus.wait_for_scrapes(2)
    exporter.set_cluster(**two_workloads(ns))
    prometheus.wait_for_scrapes(2)
    end = time.time()
    prometheus.wait_for_scrapes(1)

    report = observe_rate(prometheus, ns, start, end)

    assert report.verdict is Verdict.UNSTABLE
    assert report.findings == (f"pending pods: {ns}/web-5f7d8-c",)


def test_the_tuners_placeholder_pending_then_bound_leaves_the_window_stable(
    prometheus: PrometheusHarness, ns: str
) -> None:
    """A reserve's placeholder waits for its node, then binds: room held for an autoscaler to
    fill, no workload's change (the probes leave the tuner's placeholder pods out)."""
    exporter = prometheus.exporter
    exporter.set_request_rate(ns, "web", 10.0)
    name = f"{Keys().placeholder_pod_prefix}general-1-0a1b2c"
    waiting = two_workloads(ns)
    waiting["pods"].append(ExportedPod(ns, name, "", "<none>", "", phase="Pending", ready=False))
    exporter.set_cluster(**waiting)
    start = begin(prometheus)
    prometheus.wait_for_scrapes(2)
    bound = two_workloads(ns)
    bound["pods"].append(ExportedPod(ns, name, f"{ns}-node-b", "<none>", ""))
    exporter.set_cluster(**bound)
    prometheus.wait_for_scrapes(2)
    end = time.time()
    prometheus.wait_for_scrapes(1)

    report = observe_rate(prometheus, ns, start, end)

    assert report.verdict is Verdict.STABLE, report.findings


def test_a_node_added_inside_the_window_makes_it_unstable(
    prometheus: PrometheusHarness, ns: str
) -> None:
    exporter = prometheus.exporter
    exporter.set_request_rate(ns, "web", 10.0)
    state = two_workloads(ns)
    exporter.set_cluster(**state)
    start = begin(prometheus)
    prometheus.wait_for_scrapes(2)
    added = time.time()
    exporter.set_cluster(**{**state, "nodes": [*state["nodes"], f"{ns}-node-c"]})
    prometheus.wait_for_scrapes(3)
    end = time.time()
    prometheus.wait_for_scrapes(1)

    report = observe_rate(prometheus, ns, start, end)

    assert report.verdict is Verdict.UNSTABLE
    [finding] = report.findings
    assert finding.startswith(f"node {ns}-node-c appeared at ")
    seen = time.strptime(finding.rsplit(" ", 1)[1], "%H:%M:%SZ")
    expected = time.gmtime(added)
    assert (
        abs(
            (seen.tm_hour * 3600 + seen.tm_min * 60 + seen.tm_sec)
            - (expected.tm_hour * 3600 + expected.tm_min * 60 + expected.tm_sec)
        )
        <= 3
    )


def test_touched_scope_a_cordon_unsettles_its_node_a_new_node_blocks(
    prometheus: PrometheusHarness, ns: str
) -> None:
    exporter = prometheus.exporter
    exporter.set_request_rate(ns, "web", 10.0)
    state = two_workloads(ns)
    exporter.set_cluster(**state)
    start = begin(prometheus)
    prometheus.wait_for_scrapes(2)
    cordoned = [f"{ns}-node-a", ExportedNode(f"{ns}-node-b", unschedulable=True)]
    exporter.set_cluster(**{**state, "nodes": cordoned})
    prometheus.wait_for_scrapes(2)
    end = time.time()
    prometheus.wait_for_scrapes(1)
    exporter.set_cluster(**{**state, "nodes": [*cordoned, f"{ns}-node-c"]})
    prometheus.wait_for_scrapes(2)
    later = time.time()
    prometheus.wait_for_scrapes(1)

    cordon = observe_rate(prometheus, ns, start, end)
    # A cordon alone leaves the whole cluster stable (as the thesis' rule has it): nothing to
    # keep out; the probe still names the node once the window is not stable as a whole.
    assert cordon.verdict is Verdict.STABLE
    assert cordon.actionable

    joined = observe_rate(prometheus, ns, start, later)
    assert joined.verdict is Verdict.UNSTABLE
    assert not joined.actionable
    assert joined.unsettled.blockers == (f"nodes joining or leaving: {ns}-node-c",)
    assert joined.unsettled.nodes == {f"{ns}-node-b", f"{ns}-node-c"}
    assert joined.unsettled.workloads == frozenset()
    assert joined.judgement.startswith("touched scope: 2 nodes and 0 workloads changed")

    thesis = settings_for(prometheus, later - start, query=rate_query(ns))
    thesis = replace(thesis, windows=replace(thesis.windows, scope="cluster"))
    assert observe(thesis, later).judgement.startswith("cluster scope: the cluster changed")


@dataclass
class SnapshotsAt:
    """The cluster before ``change`` and after it, as the daemon's SnapshotHistory keeps them."""

    first: Cluster
    last: Cluster
    change: float

    def snapshot(self, at: float) -> Cluster | None:
        return self.first if at < self.change else self.last


def test_without_kube_state_metrics_the_snapshots_decide(
    prometheus: PrometheusHarness, ns: str
) -> None:
    prometheus.exporter.set_request_rate(ns, "web", 10.0)  # no cluster series at all
    start = begin(prometheus)
    prometheus.wait_for_scrapes(3)
    end = time.time()
    prometheus.wait_for_scrapes(1)
    settings = settings_for(prometheus, end - start, query=rate_query(ns))
    a = cluster([node("n1"), node("n2")], [pod("web-1", "n1"), pod("web-2", "n2")])
    grown = cluster([*a.nodes, node("n3")], list(a.pods))

    same = observe(settings, end, SnapshotsAt(a, a, end))
    changed = observe(settings, end, SnapshotsAt(a, grown, end))
    none = observe(settings, end, None)

    assert (same.verdict, same.source) == (Verdict.STABLE, "snapshots")
    assert "kube-state-metrics series absent" in same.findings[-1]
    assert changed.verdict is Verdict.UNSTABLE
    assert changed.findings[0] == "nodes added: n3"
    assert none.verdict is Verdict.UNKNOWN
    assert "no API snapshots" in none.reason


def test_load_query_answers_that_are_not_a_load_make_the_window_unknown(
    prometheus: PrometheusHarness, ns: str
) -> None:
    prometheus.exporter.set_cluster(**two_workloads(ns))
    prometheus.exporter.set_request_rate(ns, "web", 10.0)
    start = begin(prometheus)
    prometheus.wait_for_scrapes(2)
    end = time.time()
    stable = observe(settings_for(prometheus, end - start, query="vector(1)"), end)
    assert stable.actionable, stable
    cases = {
        f'sum(rate(tuner_missing_total{{namespace="{ns}"}}[$window]))': "returned no series",
        "vector(0) / 0": "returned NaN",
        "vector(1) / 0": "returned an infinite value",
        "vector(-5)": "returned a negative load for the value (-5)",
        f'http_requests_total{{namespace="{ns}"}}[$window]': "answered a range vector",
        '"text"': "answered a string",
        "sum(rate(http_requests_total[$window])": "refused the query: HTTP 400: bad_data",
    }
    for query, problem in cases.items():
        report = observe(settings_for(prometheus, end - start, query=query), end)
        assert report.verdict is Verdict.UNKNOWN, (query, report)
        assert report.load is None
        assert problem in report.reason, (query, report.reason)
        assert report.failed_query == report.load_query
        assert report.findings[0].endswith(f"(query: {report.load_query})")
        assert report.findings[1:3] == ("otherwise stable", stable.reason)


def test_a_slow_prometheus_times_out_into_unknown(prometheus: PrometheusHarness, ns: str) -> None:
    prometheus.exporter.set_cluster(**two_workloads(ns))
    prometheus.exporter.set_request_rate(ns, "web", 10.0)
    start = begin(prometheus)
    prometheus.wait_for_scrapes(2)
    end = time.time()
    settings = settings_for(prometheus, end - start, query=rate_query(ns), timeout_s=0.5)

    with prometheus.paused():
        began = time.monotonic()
        report = observe(settings, end)
        took = time.monotonic() - began
    prometheus.wait_for_scrapes(1)
    after = observe(settings, end)

    assert report.verdict is Verdict.UNKNOWN
    assert report.failed_query == Probe.PRESENCE.query("")
    assert report.reason.startswith(
        f"stability query failed: Prometheus at {prometheus.url} did not answer within 0.5 s "
        f"(query: {report.failed_query})"
    )
    assert any(f.startswith("load query failed: Prometheus at ") for f in report.findings)
    assert took < 5  # two queries, each given up after the timeout
    assert after.verdict is Verdict.STABLE  # the same window once Prometheus answers again


class StopsPrometheus:
    """A real client that stops the real server after ``after`` queries."""

    def __init__(self, client: PrometheusClient, harness: PrometheusHarness, after: int) -> None:
        self.client, self.harness, self.after = client, harness, after
        self.queries: list[str] = []

    def _tick(self, query: str) -> None:
        self.queries.append(query)
        if len(self.queries) == self.after + 1:
            self.harness.stop_prometheus(keep_data=True)

    def instant(self, query: str, at: float) -> InstantResult:
        self._tick(query)
        return self.client.instant(query, at)

    def range(self, query: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        self._tick(query)
        return self.client.range(query, start, end, step)


@pytest.fixture
def restarts_prometheus(prometheus: PrometheusHarness) -> Iterator[PrometheusHarness]:
    yield prometheus
    if not prometheus.is_running():
        prometheus.start_prometheus()


def test_prometheus_stopped_mid_observation(
    restarts_prometheus: PrometheusHarness, ns: str
) -> None:
    prometheus = restarts_prometheus
    prometheus.exporter.set_cluster(**two_workloads(ns))
    prometheus.exporter.set_request_rate(ns, "web", 10.0)
    start = begin(prometheus)
    prometheus.wait_for_scrapes(2)
    end = time.time()
    prometheus.wait_for_scrapes(1)
    settings = settings_for(
        prometheus,
        end - start,
        query=rate_query(ns),
        timeout_s=2.0,
    )
    with PrometheusClient(settings.prometheus) as client:
        flaky = StopsPrometheus(client, prometheus, after=3)
        began = time.monotonic()
        report = observe_window(settings, end, flaky)
        took = time.monotonic() - began

    assert report.verdict is Verdict.UNKNOWN
    assert report.load is None
    fourth = flaky.queries[3]
    assert fourth == Probe.NODE_PODS.query(
        "", Keys().placeholder_pod_prefix
    )  # the three before it were answered
    assert report.failed_query == fourth
    assert report.reason.startswith("stability query failed: Prometheus unreachable at ")
    assert fourth in report.reason
    assert any("load query failed" in f for f in report.findings)
    assert math.isfinite(took) and took < 20
