"""Stability verdicts from hand-made kube-state-metrics series and from API snapshots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from testkit.builders import cluster, node, pod
from tuner.model.cluster import Workload
from tuner.model.conventions import Keys
from tuner.model.window_report import Verdict
from tuner.monitor.evidence import REQUIRED_METRICS, Probe, evidence_from_series
from tuner.monitor.series import Series, series
from tuner.monitor.stability import assess, compare_snapshots
from tuner.monitor.window import Steps, clock_time

KEYS = Keys()

STEPS = Steps(first_ms=1_700_000_000_000, step_ms=10_000, count=5)
TIMES = STEPS.times
END = TIMES[-1]
NS = "shop"
RS = {"namespace": NS, "created_by_kind": "ReplicaSet", "created_by_name": "web-5f7d8"}

Results = dict[Probe, list[Series]]


def ranged(labels: Mapping[str, str], values: Sequence[float | None]) -> Series:
    """A range-query series with a point at each step whose value is not None."""
    return series(labels, *((t, v) for t, v in zip(TIMES, values, strict=True) if v is not None))


def instant(labels: Mapping[str, str], value: float = 1.0) -> Series:
    return series(labels, (END, value))


def healthy(nodes: Sequence[str] = ("n1", "n2"), web: int = 3) -> Results:
    """Two nodes and a deployment of ``web`` pods, unchanged at every step."""
    deployment = {"namespace": NS, "deployment": "web"}
    return {
        Probe.PRESENCE: [ranged({"__name__": m}, [1.0] * 5) for m in REQUIRED_METRICS],
        Probe.NODES: [ranged({"node": n}, [1.0] * 5) for n in nodes],
        Probe.NODES_SEEN: [instant({"node": n}) for n in nodes],
        Probe.PODS: [ranged(RS, [float(web)] * 5)],
        Probe.PODS_SEEN: [instant({**RS, "pod": f"web-5f7d8-{i}"}) for i in range(web)],
        Probe.REPLICASET_OWNERS: [
            instant(
                {
                    "namespace": NS,
                    "replicaset": "web-5f7d8",
                    "owner_kind": "Deployment",
                    "owner_name": "web",
                }
            )
        ],
        Probe.DEPLOYMENTS: [
            ranged({"__name__": f"kube_deployment_{m}", **deployment}, [v] * 5)
            for m, v in (
                ("spec_replicas", float(web)),
                ("status_replicas", float(web)),
                ("status_replicas_updated", float(web)),
                ("metadata_generation", 4.0),
                ("status_observed_generation", 4.0),
            )
        ],
    }


def judge(results: Results) -> tuple[Verdict, tuple[str, ...]]:
    assessment = assess(evidence_from_series(STEPS, results))
    return assessment.verdict, assessment.reasons


def test_an_unchanged_window_is_stable() -> None:
    evidence = evidence_from_series(STEPS, healthy())
    verdict, reasons = judge(healthy())
    assert verdict is Verdict.STABLE
    assert reasons == (
        f"stable from {clock_time(TIMES[0])} to {clock_time(END)}: 2 nodes, 3 pods in "
        "1 workload, no pod pending or unready, no rollout",
    )
    assert evidence.pod_counts == {Workload(NS, "Deployment", "web"): (3, 3, 3, 3, 3)}


def test_a_node_that_appeared_is_named_with_the_time() -> None:
    results = healthy()
    results[Probe.NODES].append(ranged({"node": "n3"}, [None, None, 1.0, 1.0, 1.0]))
    results[Probe.NODES_SEEN].append(instant({"node": "n3"}))
    assert judge(results) == (Verdict.UNSTABLE, (f"node n3 appeared at {clock_time(TIMES[2])}",))


def test_a_node_that_disappeared_or_went_missing_for_a_while() -> None:
    results = healthy()
    results[Probe.NODES][0] = ranged({"node": "n1"}, [1.0, 1.0, 1.0, None, None])
    results[Probe.NODES][1] = ranged({"node": "n2"}, [1.0, None, None, 1.0, 1.0])
    verdict, reasons = judge(results)
    assert verdict is Verdict.UNSTABLE
    assert reasons == (
        f"node n1 disappeared at {clock_time(TIMES[3])}",
        f"node n2 was missing {clock_time(TIMES[1])} to {clock_time(TIMES[2])}",
    )


def test_a_node_that_came_and_went_between_two_steps_is_still_seen() -> None:
    results = healthy()
    results[Probe.NODES_SEEN].append(instant({"node": "n9"}))
    assert judge(results) == (
        Verdict.UNSTABLE,
        ("nodes that came and went between two steps: n9",),
    )


def test_a_scale_up_and_back_down_is_unstable_even_though_start_and_end_agree() -> None:
    results = healthy()
    results[Probe.PODS] = [ranged(RS, [3.0, 3.0, 5.0, 5.0, 3.0])]
    verdict, reasons = judge(results)
    assert verdict is Verdict.UNSTABLE
    assert reasons == (
        f"shop/Deployment/web: pod count changed 3 → 5 → 3 (first at {clock_time(TIMES[2])})",
    )


def test_pods_that_came_and_went_between_steps_are_caught_by_the_window_probe() -> None:
    results = healthy()
    results[Probe.PODS_SEEN].append(instant({**RS, "pod": "web-5f7d8-replaced"}))
    assert judge(results) == (
        Verdict.UNSTABLE,
        (
            "shop/Deployment/web: 4 different pods in the window but 3 at a time "
            "(pods were replaced, or came and went between two steps)",
        ),
    )


def test_pending_and_unready_pods_are_named() -> None:
    results = healthy()
    results[Probe.PENDING] = [instant({"namespace": NS, "pod": "web-5f7d8-0"})]
    results[Probe.UNREADY] = [
        instant({"namespace": NS, "pod": "web-5f7d8-0"}, 0.0),
        instant({"namespace": NS, "pod": "web-5f7d8-1"}, 0.0),
    ]
    assert judge(results) == (
        Verdict.UNSTABLE,
        ("pending pods: shop/web-5f7d8-0", "pods not ready: shop/web-5f7d8-1"),
    )


def test_job_pods_come_and_go_without_making_the_window_unstable() -> None:
    results = healthy()
    job = {"namespace": NS, "created_by_kind": "Job", "created_by_name": "report-2891"}
    results[Probe.PODS].append(ranged(job, [None, 1.0, 1.0, None, None]))
    results[Probe.PODS_SEEN].append(instant({**job, "pod": "report-2891-abcde"}))
    results[Probe.PENDING] = [instant({"namespace": NS, "pod": "report-2891-abcde"})]
    results[Probe.UNREADY] = [instant({"namespace": NS, "pod": "report-2891-abcde"}, 0.0)]
    assert judge(results)[0] is Verdict.STABLE


def test_a_rollout_in_progress_is_unstable() -> None:
    results = healthy()
    deployment = {"namespace": NS, "deployment": "web"}
    results[Probe.DEPLOYMENTS][2] = ranged(
        {"__name__": "kube_deployment_status_replicas_updated", **deployment},
        [3.0, 3.0, 1.0, 3.0, 3.0],
    )
    results[Probe.DEPLOYMENTS][3] = ranged(
        {"__name__": "kube_deployment_metadata_generation", **deployment},
        [4.0, 5.0, 5.0, 5.0, 5.0],
    )
    results[Probe.DEPLOYMENTS][4] = ranged(
        {"__name__": "kube_deployment_status_observed_generation", **deployment},
        [4.0, 4.0, 5.0, 5.0, 5.0],
    )
    verdict, reasons = judge(results)
    assert verdict is Verdict.UNSTABLE
    assert reasons == (
        f"deployment shop/web: generation 5 not yet observed (rollout) at {clock_time(TIMES[1])}"
        f"; rollout in progress (1 of 3 replicas updated) at {clock_time(TIMES[2])}",
    )


def test_a_replica_change_between_steps_is_caught_by_changes() -> None:
    results = healthy()
    results[Probe.DEPLOYMENT_CHANGES] = [
        instant({"namespace": NS, "deployment": "web", "field": "spec"}, 2.0)
    ]
    assert judge(results) == (
        Verdict.UNSTABLE,
        ("deployment shop/web: replicas or generation changed inside the window (spec 2×)",),
    )


def test_missing_kube_state_metrics_data_for_part_of_the_window_is_unknown() -> None:
    results = healthy()
    results[Probe.PRESENCE][1] = ranged({"__name__": "kube_pod_info"}, [1.0, 1.0, 1.0, None, None])
    verdict, reasons = judge(results)
    assert verdict is Verdict.UNKNOWN
    assert reasons[0] == f"no kube_pod_info data from {clock_time(TIMES[3])} to {clock_time(END)}"


def test_a_failed_scrape_is_no_change_of_the_cluster() -> None:
    results = healthy()
    for probe in (Probe.PRESENCE, Probe.NODES, Probe.PODS, Probe.DEPLOYMENTS):
        results[probe] = [
            ranged(s.labels, [None if k == 2 else v for k, (_, v) in enumerate(s.points)])
            for s in results[probe]
        ]
    verdict, [reason] = judge(results)
    assert verdict is Verdict.STABLE
    assert reason.endswith("no rollout; no data at 1 of 5 steps (a failed scrape)")


def test_too_many_failed_scrapes_make_the_window_unknown() -> None:
    results = healthy()
    gaps = [1.0, None, 1.0, None, 1.0]
    results[Probe.PRESENCE] = [ranged(s.labels, gaps) for s in results[Probe.PRESENCE]]
    assert judge(results) == (
        Verdict.UNKNOWN,
        (
            f"no kube-state-metrics data at 2 of 5 steps ({clock_time(TIMES[1])} to "
            f"{clock_time(TIMES[3])}): not scraped for part of the window",
        ),
    )


def test_absent_kube_state_metrics_is_unknown_and_named() -> None:
    evidence = evidence_from_series(STEPS, {})
    assert evidence.absent == REQUIRED_METRICS
    results = healthy()
    del results[Probe.PRESENCE][3]
    evidence = evidence_from_series(STEPS, results)
    assert evidence.absent == ("kube_pod_status_ready",)
    assert assess(evidence).verdict is Verdict.UNKNOWN


def test_timestamps_a_millisecond_off_still_land_on_their_step() -> None:
    results = healthy()
    results[Probe.NODES] = [
        series({"node": n}, *((t + 0.001, 1.0) for t in TIMES)) for n in ("n1", "n2")
    ]
    assert judge(results)[0] is Verdict.STABLE


# ---------------------------------------------------------------- snapshots (the thesis' method)

BEFORE = cluster(
    [node("n1"), node("n2")],
    [pod("web-1", "n1"), pod("web-2", "n2"), pod("db-0", "n2", kind="StatefulSet")],
)


def test_identical_snapshots_are_stable_with_a_caveat() -> None:
    assessment = compare_snapshots(BEFORE, BEFORE, TIMES[0], END, keys=KEYS)
    assert assessment.verdict is Verdict.STABLE
    assert "changes inside the window are not visible" in assessment.reason
    assert "2 nodes, 3 pods in 2 workloads" in assessment.reason


def test_snapshots_differing_in_nodes_and_pod_counts() -> None:
    after = cluster(
        [node("n1"), node("n3")],
        [pod("web-1", "n1"), pod("db-0", "n3", kind="StatefulSet")],
    )
    assessment = compare_snapshots(BEFORE, after, TIMES[0], END, keys=KEYS)
    assert assessment.verdict is Verdict.UNSTABLE
    assert assessment.reasons == (
        "nodes added: n3",
        "nodes removed: n2",
        "default/Deployment/web: pod count 2 → 1",
    )


def test_pending_or_unready_pods_in_a_snapshot_are_unstable() -> None:
    pending = replace(BEFORE, pods=(*BEFORE.pods, pod("web-3", None)))
    unready = replace(BEFORE, pods=(replace(BEFORE.pods[0], ready=False), *BEFORE.pods[1:]))
    assessment = compare_snapshots(unready, pending, TIMES[0], END, keys=KEYS)
    assert assessment.verdict is Verdict.UNSTABLE
    assert assessment.reasons == (
        "default/Deployment/web: pod count 2 → 3",
        f"not ready at {clock_time(TIMES[0])}: default/web-1",
        f"pending at {clock_time(END)}: default/web-3",
    )


def test_job_pods_do_not_count_in_snapshots() -> None:
    after = replace(BEFORE, pods=(*BEFORE.pods, pod("report-1", None, kind="Job")))
    assert compare_snapshots(BEFORE, after, TIMES[0], END, keys=KEYS).verdict is Verdict.STABLE


def test_nan_samples_count_as_missing_not_as_a_crash() -> None:
    results = healthy()
    results[Probe.PODS] = [ranged(RS, [3.0, 3.0, float("nan"), 3.0, 3.0])]
    results[Probe.DEPLOYMENT_CHANGES] = [
        instant({"namespace": NS, "deployment": "web", "field": "spec"}, float("nan"))
    ]
    verdict, reasons = judge(results)
    assert verdict is Verdict.UNSTABLE
    assert reasons[0].startswith("shop/Deployment/web: pod count changed 3 → 0 → 3")
