"""On the real control plane: what the cluster read after a window holds that the window did not
see. A node that joined after the window was judged is kept out of the plan the cycle carries
out; a pod pending in the read keeps the cycle from acting.

Real: kube-apiserver, kube-scheduler, kube-controller-manager and KWOK nodes; the deployments and
where the scheduler put their pods; the window judged by the monitor's own ``observe_window``
from API snapshots read off the cluster (``read_cluster``); the daemon's cycle (``run_cycle``)
reading the cluster and carrying its plan out through the real ``KubeActuator``. Doubles: the
observer's inputs: Prometheus (kube-state-metrics absent, so the snapshot judge decides, and a
constant load) and the snapshots' times (both are the cluster read before the node joined or the
pod was created, as when the window's source last looked before that).
"""

from __future__ import annotations

import random
import time
from typing import Any

from knowledge.memory import MemoryKnowledge
from testkit.cluster_fixture import ClusterHarness, eventually
from tests.cluster.conftest import make_actuator
from tuner.cycle import CycleReport, CycleState, Outcome, Ports, run_cycle
from tuner.model.cluster import Cluster
from tuner.model.window_report import WindowReport
from tuner.monitor.kube import read_cluster
from tuner.monitor.observe import observe_window
from tuner.monitor.prometheus import InstantResult
from tuner.monitor.series import Series
from tuner.plan.actions import Migrate, RemoveNode
from tuner.settings import Settings, settings_from_dict

LOAD_QUERY = "sum(rate(http_requests_total[$window]))"


class WithoutKsm:
    """Prometheus without kube-state-metrics: no series for any probe; the load query's
    answer is a constant."""

    def instant(self, query: str, at: float) -> InstantResult:
        return 10.0 if query.startswith("sum(rate(http_requests_total[") else ()

    def range(self, query: str, start: float, end: float, step: float) -> tuple[Series, ...]:
        return ()


class JudgedBefore:
    """The window's observer: the monitor judging by API snapshots that were both read before
    the change the test makes next (the window's source looked last before it)."""

    def __init__(self, settings: Settings, before: Cluster) -> None:
        self.settings = settings
        self.before = before
        self.windows: list[WindowReport] = []

    def snapshot(self, at: float) -> Cluster:
        return self.before

    def observe(self, start: float, end: float) -> WindowReport:
        window = observe_window(self.settings, end, WithoutKsm(), self, start=start)
        self.windows.append(window)
        return window


def _settings(kube: ClusterHarness) -> Settings:
    doc: dict[str, Any] = kube.settings_doc()
    doc["analyse"] = {"candidate_delay_s": 0, "excluded_namespaces": ["kube-system"]}
    doc["windows"] = {"measure_s": 600, "retry_s": 60, "warmup_s": 0}
    doc["load"] = {"query": LOAD_QUERY}
    return settings_from_dict(doc)


def _cycle(kube: ClusterHarness, observer: JudgedBefore, *, dry_run: bool) -> CycleReport:
    ports = Ports(observer, make_actuator(kube), MemoryKnowledge())
    settings = observer.settings
    report, _ = run_cycle(
        time.time(), CycleState(), settings, ports, random.Random(0), dry_run=dry_run
    )
    return report


def test_a_node_that_joined_after_the_window_is_not_the_plans(kube: ClusterHarness) -> None:
    first, second = (kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2))
    kube.deployment("web", 2)
    assert sorted(kube.placement("app=web").values()) == [first, second]
    observer = JudgedBefore(_settings(kube), read_cluster(kube.api))
    joined = kube.add_node(f"{kube.namespace}-joined")  # after the window's last look

    report = _cycle(kube, observer, dry_run=False)

    (window,) = observer.windows
    assert (window.source, window.whole_stable) == ("snapshots", True)
    assert window.observed_nodes == {first, second}
    assert report.outcome is Outcome.ACTED, report.reason
    assert report.plan is not None
    actions = report.plan.actions
    assert joined not in {a.node for a in actions if isinstance(a, RemoveNode)}
    assert joined not in {a.target for a in actions if isinstance(a, Migrate)}
    live = {n.metadata.name for n in kube.core.list_node().items}
    assert joined in live and len(live & {first, second}) == 1
    kube.wait_available("web", 2)
    assert joined not in kube.placement("app=web").values()
    assert report.unobserved == {joined}
    assert report.recorded is None


def test_a_pod_pending_in_the_read_keeps_the_cycle_from_acting(kube: ClusterHarness) -> None:
    for i in (1, 2):
        kube.add_node(f"{kube.namespace}-n{i}")
    kube.deployment("web", 2)
    observer = JudgedBefore(_settings(kube), read_cluster(kube.api))
    app = {"name": "app", "image": "fake", "resources": {"requests": {"cpu": "64"}}}
    template = {"metadata": {"labels": {"app": "huge"}}, "spec": {"containers": [app]}}
    kube.apps.create_namespaced_deployment(  # after the window's last look; fits no node
        kube.namespace,
        {
            "metadata": {"name": "huge"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "huge"}},
                "template": template,
            },
        },
    )
    (pending,) = eventually(lambda: kube.pods("app=huge"), what="the huge pod created")

    report = _cycle(kube, observer, dry_run=True)

    assert observer.windows[0].actionable
    assert report.outcome is Outcome.UNSTABLE
    assert report.reason == (
        "pods pending in the cluster read after the window (not seen by it): "
        f"{kube.namespace}/{pending.metadata.name}"
    )
    assert report.plan is None and report.result is None
