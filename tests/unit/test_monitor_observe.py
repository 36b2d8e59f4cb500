"""observe_window's wiring: which queries it asks, what a failure at any of them gives, the load
answers it refuses, and the fallback to API snapshots when kube-state-metrics is absent.

Prometheus is replaced by :class:`Served`, an in-memory answer to the monitor's own probe
queries for an unchanging cluster; what the real server answers is covered by
``tests/integration/test_monitor_window.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testkit.builders import cluster, node, pod
from tuner.errors import InputError, ServiceError
from tuner.model.cluster import Cluster
from tuner.model.conventions import Keys
from tuner.model.window_report import Verdict
from tuner.monitor.evidence import REQUIRED_METRICS, Probe
from tuner.monitor.observe import observe_window
from tuner.monitor.prometheus import InstantResult, QueryError
from tuner.monitor.series import Series, series
from tuner.monitor.snapshots import SnapshotHistory
from tuner.monitor.window import clock_time
from tuner.settings import LoadSettings, Settings, Windows

END = 1_700_000_600.0
LOAD_QUERY = "sum(rate(http_requests_total[$window]))"
SLOW = "Prometheus at http://prom:9090 did not answer within 1 s"
RS = {"namespace": "shop", "created_by_kind": "ReplicaSet", "created_by_name": "web-5f7d8"}
DEPLOYMENT = {"namespace": "shop", "deployment": "web"}

# Each probe's answer for two nodes and a deployment of three ready pods, as (labels, value).
HEALTHY: Mapping[Probe, Sequence[tuple[Mapping[str, str], float]]] = {
    Probe.PRESENCE: [({"__name__": m}, 1.0) for m in REQUIRED_METRICS],
    Probe.NODES: [({"node": n}, 1.0) for n in ("n1", "n2")],
    Probe.NODES_SEEN: [({"node": n}, 1.0) for n in ("n1", "n2")],
    Probe.PODS: [(RS, 3.0)],
    Probe.PODS_SEEN: [({**RS, "pod": f"web-5f7d8-{i}"}, 1.0) for i in range(3)],
    Probe.REPLICASET_OWNERS: [
        (
            {
                "namespace": "shop",
                "replicaset": "web-5f7d8",
                "owner_kind": "Deployment",
                "owner_name": "web",
            },
            1.0,
        )
    ],
    Probe.DEPLOYMENTS: [
        ({"__name__": f"kube_deployment_{field}", **DEPLOYMENT}, value)
        for field, value in (
            ("spec_replicas", 3.0),
            ("status_replicas", 3.0),
            ("status_replicas_updated", 3.0),
            ("metadata_generation", 4.0),
            ("status_observed_generation", 4.0),
        )
    ],
}
PLACEHOLDERS = Keys().placeholder_pod_prefix
_TEMPLATES = {probe.query("{span}", PLACEHOLDERS): probe for probe in Probe}


class Served:
    """Answers the probes for :data:`HEALTHY` (nothing when ``present`` leaves the required
    metrics out) and the load query with ``load``; the query number ``fail_at`` times out."""

    def __init__(
        self,
        load: InstantResult = 42.0,
        *,
        present: Sequence[str] = REQUIRED_METRICS,
        fail_at: int | None = None,
        first_load_sample: float | None = END - 700,
    ) -> None:
        self.load = load
        self.present = present
        self.fail_at = fail_at
        self.first_load_sample = first_load_sample
        self.queries: list[str] = []

    def _answer(self, query: str, times: Sequence[float]) -> tuple[Series, ...]:
        self.queries.append(query)
        if len(self.queries) - 1 == self.fail_at:
            raise QueryError(query, SLOW)
        probe = _TEMPLATES.get(re.sub(r"\[\d+m?s\]", "[{span}]", query))
        assert probe is not None, f"not a probe: {query}"
        answer = HEALTHY.get(probe, ())
        if probe is Probe.PRESENCE:
            answer = [(labels, v) for labels, v in answer if labels["__name__"] in self.present]
        elif set(self.present) != set(REQUIRED_METRICS):
            answer = []
        return tuple(series(labels, *((t, v) for t in times)) for labels, v in answer)

    def range(self, query: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        count = round((end - start) / step) + 1
        return self._answer(query, [start + k * step for k in range(count)])

    def instant(self, query: str, at: float) -> InstantResult:
        if "http_requests_total" not in query:
            return self._answer(query, [at])
        self.queries.append(query)
        if query.startswith("min(min_over_time(timestamp("):  # the load series' coverage
            first = self.first_load_sample
            # A series younger than the coarse query's last aligned step shows only in the
            # second look, at 1 s steps over the last step.
            fine = query.endswith(":1s]))")
            if first is None or (first > at - 5 and not fine):
                return ()
            return (series({}, (at, first)),)
        if len(self.queries) - 1 == self.fail_at:
            raise QueryError(query, SLOW)
        return self.load


def settings(measure_s: float = 600.0, warmup_s: float = 0.0) -> Settings:
    return Settings(
        load=LoadSettings(query=LOAD_QUERY),
        windows=Windows(measure_s=measure_s, retry_s=measure_s / 10, warmup_s=warmup_s),
    )


def test_a_healthy_cluster_is_stable_and_its_load_measured() -> None:
    served = Served()
    report = observe_window(settings(warmup_s=60), END, served)

    assert (report.verdict, report.source, report.failed_query) == (
        Verdict.STABLE,
        "kube-state-metrics",
        None,
    )
    assert report.reason.startswith(f"stable from {clock_time(END - 660)} to {clock_time(END)}")
    assert "2 nodes, 3 pods in 1 workload" in report.reason
    assert report.load is not None and report.load.values == {"": 42.0}
    assert report.actionable
    assert report.load_query == "sum(rate(http_requests_total[600s]))"
    assert len(served.queries) == len(Probe) + 2
    assert served.queries[-2] == report.load_query
    assert served.queries[-1] == ("min(min_over_time(timestamp(http_requests_total)[600s:5500ms]))")
    assert Probe.PODS_SEEN.query("660s", PLACEHOLDERS) in served.queries  # over warm-up and window
    assert report.load_warning is None


def test_a_load_series_that_covers_part_of_the_window_is_warned_about() -> None:
    """A fresh Prometheus holds the last 100 s of a 600 s window: the load is extrapolated."""
    report = observe_window(settings(), END, Served(first_load_sample=END - 100))
    assert report.load_covered_from == END - 100
    assert report.load_warning == (
        "the load query's series cover only the last 100 s of the 600 s window "
        f"(from {clock_time(END - 100)}): the load is extrapolated from that part; "
        "wait until Prometheus holds a whole window"
    )
    assert report.to_json()["load_warning"] == report.load_warning
    covered = observe_window(settings(), END, Served(first_load_sample=END - 598))
    assert covered.load_warning is None


def test_a_series_younger_than_one_step_is_warned_about() -> None:
    """Subquery steps are aligned: a series 3 s old shows at none of the 5 s steps, and the
    second look, at 1 s over the last step, finds where it begins."""
    served = Served(first_load_sample=END - 3)
    report = observe_window(settings(), END, served)
    assert report.load_covered_from == END - 3
    assert served.queries[-1] == "min(min_over_time(timestamp(http_requests_total)[5s:1s]))"
    assert report.load_warning is not None
    assert report.load_warning.startswith("the load query's series cover only the last 3 s")
    assert observe_window(settings(), END, Served(first_load_sample=None)).load_warning is None


@given(
    fail_at=st.integers(0, len(Probe)),
    measure_s=st.floats(1.0, 7_200.0),
    warmup_s=st.floats(0.0, 900.0),
)
def test_a_failure_at_any_query_makes_the_window_unknown_and_names_that_query(
    fail_at: int, measure_s: float, warmup_s: float
) -> None:
    served = Served(fail_at=fail_at)
    report = observe_window(settings(measure_s, warmup_s), END, served)

    failed = served.queries[fail_at]
    assert report.verdict is Verdict.UNKNOWN
    assert not report.actionable
    assert report.failed_query == failed
    assert SLOW in report.reason and failed in report.reason
    if failed == report.load_query:  # stability was judged; only the load is missing
        assert report.load is None
        assert report.findings[:2] == (
            f"load query failed: {SLOW} (query: {failed})",
            "otherwise stable",
        )
    else:  # the load is still measured, to help tune the query
        assert report.load is not None
        assert report.reason.startswith("stability query failed")


@pytest.mark.parametrize(
    ("load", "problem"),
    [
        (float("nan"), "returned NaN for the scalar"),
        (
            (),
            "returned no series (nothing matched; if zero load is possible, append `or vector(0)`)",
        ),
        ((series({}, (END, math.nan)),), "returned NaN for the value"),
        (
            (series({"service": "web"}, (END, math.inf)),),
            'returned an infinite value for {service="web"}',
        ),
        (-3.0, "returned a negative load for the scalar (-3)"),
    ],
)
def test_a_load_that_is_not_a_number_makes_the_window_unknown(
    load: InstantResult, problem: str
) -> None:
    report = observe_window(settings(), END, Served(load))

    assert report.verdict is Verdict.UNKNOWN
    assert report.load is None
    assert report.failed_query == report.load_query
    assert report.findings[0] == f"load query {problem} (query: {report.load_query})"
    assert report.findings[1] == "otherwise stable"


def test_a_load_vector_has_one_dimension_per_series() -> None:
    load = (series({"service": "web"}, (END, 120.0)), series({"service": "api"}, (END, 30.0)))
    report = observe_window(settings(), END, Served(load))
    assert report.actionable
    assert report.load is not None
    assert dict(report.load.values) == {'{service="api"}': 30.0, '{service="web"}': 120.0}


# ---------------------------------------------------------------- without kube-state-metrics

BEFORE = cluster([node("n1"), node("n2")], [pod("web-1", "n1"), pod("web-2", "n2")])


class Snapshots:
    """The cluster at given times (the newest at or before the asked time); records the asks."""

    def __init__(self, *taken: tuple[float, Cluster], error: Exception | None = None) -> None:
        self.taken = sorted(taken, key=lambda item: item[0])
        self.error = error
        self.asked: list[float] = []

    def snapshot(self, at: float) -> Cluster | None:
        self.asked.append(at)
        if self.error is not None:
            raise self.error
        kept = [c for t, c in self.taken if t <= at]
        return kept[-1] if kept else None


def test_without_kube_state_metrics_snapshots_at_the_checked_start_and_end_decide() -> None:
    same = Snapshots((0.0, BEFORE))
    report = observe_window(settings(warmup_s=120), END, Served(present=()), same)

    assert (report.verdict, report.source) == (Verdict.STABLE, "snapshots")
    assert same.asked == [END - 720, END]
    assert report.reason.startswith(f"same at {clock_time(END - 720)} and {clock_time(END)}")
    assert report.findings[-1] == (
        "judged by API snapshots: kube-state-metrics series absent ("
        + ", ".join(REQUIRED_METRICS)
        + ")"
    )
    assert report.actionable


def test_a_node_added_between_the_snapshots_is_unstable() -> None:
    grown = replace(BEFORE, nodes=(*BEFORE.nodes, node("n3")))
    report = observe_window(
        settings(), END, Served(present=()), Snapshots((0.0, BEFORE), (END - 10, grown))
    )
    assert (report.verdict, report.findings[0]) == (Verdict.UNSTABLE, "nodes added: n3")
    assert report.source == "snapshots"


def test_the_snapshot_judge_tells_the_touched_scope_what_changed() -> None:
    grown = replace(BEFORE, nodes=(*BEFORE.nodes, node("n3")))
    joined = observe_window(
        settings(), END, Served(present=()), Snapshots((0.0, BEFORE), (END - 10, grown))
    )
    assert joined.unsettled.blockers == ("nodes joining or leaving: n3",)
    assert not joined.actionable
    scaled = replace(BEFORE, pods=(*BEFORE.pods, pod("web-3", "n2")))
    report = observe_window(
        settings(), END, Served(present=()), Snapshots((0.0, BEFORE), (END - 10, scaled))
    )
    assert report.verdict is Verdict.UNSTABLE
    assert {str(w) for w in report.unsettled_workloads} == {"default/Deployment/web"}
    assert report.unsettled_nodes == {"n2"}
    assert report.actionable


def test_the_daemon_snapshot_history_feeds_the_fallback() -> None:
    now = [END - 600]
    reads = iter([BEFORE, replace(BEFORE, pods=BEFORE.pods[:1])])
    history = SnapshotHistory(lambda: next(reads), max_age_s=60, keep_s=700, clock=lambda: now[0])
    history.take()  # the daemon's cycle at the window's start
    now[0] = END

    report = observe_window(settings(), END, Served(present=()), history)

    assert report.verdict is Verdict.UNSTABLE
    assert report.findings[0] == "default/Deployment/web: pod count 2 → 1"


@pytest.mark.parametrize(
    ("snapshots", "reason"),
    [
        (None, "and no API snapshots to compare (the daemon keeps them, not a one-off run)"),
        (Snapshots((END, BEFORE)), f"no API snapshot from {clock_time(END - 600)} to compare"),
        (
            Snapshots(error=ServiceError("kubernetes API unreachable at https://k:6443")),
            "the API snapshot failed: kubernetes API unreachable at https://k:6443",
        ),
        (
            Snapshots(error=InputError("pod default/web-1 is on unknown node 'n9'")),
            "the API snapshot failed: pod default/web-1 is on unknown node 'n9'",
        ),
    ],
)
def test_without_kube_state_metrics_or_snapshots_the_window_is_unknown(
    snapshots: Snapshots | None, reason: str
) -> None:
    report = observe_window(settings(), END, Served(present=()), snapshots)
    assert report.verdict is Verdict.UNKNOWN
    assert report.reason.startswith("kube-state-metrics series absent (")
    assert reason in report.reason
    assert report.load is not None  # the load is measured all the same
    assert report.failed_query is None


def test_some_kube_state_metrics_series_but_not_all_is_named() -> None:
    report = observe_window(
        settings(), END, Served(present=REQUIRED_METRICS[:1]), Snapshots((0.0, BEFORE))
    )
    assert report.verdict is Verdict.STABLE
    assert report.findings[-1] == (
        "judged by API snapshots: kube-state-metrics series absent ("
        + ", ".join(REQUIRED_METRICS[1:])
        + "); is kube-state-metrics scraped with all its pod and node metrics?"
    )


def test_the_snapshot_judge_leaves_the_tuners_placeholders_out() -> None:
    """A reserve's placeholder pending at the start and bound at the end is no change."""
    keys = Keys()
    name = f"{keys.placeholder_pod_prefix}general-1-0a1b2c"
    waiting = pod(name, None, workload="placeholder")
    waiting = replace(waiting, labels={keys.placeholder: name}, owner_kind="", phase="Pending")
    bound = replace(waiting, node="n2", phase="Running")
    report = observe_window(
        settings(),
        END,
        Served(present=()),
        Snapshots(
            (0.0, replace(BEFORE, pods=(*BEFORE.pods, waiting))),
            (END - 10, replace(BEFORE, pods=(*BEFORE.pods, bound))),
        ),
    )
    assert (report.verdict, report.source) == (Verdict.STABLE, "snapshots"), report.findings
