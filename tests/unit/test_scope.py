"""``windows.scope``: what changed over a window, what blocks the whole cluster, and how the
analysis keeps the changed nodes and workloads out of the plan.

Both stability judges are tested from hand-made values (kube-state-metrics series, snapshots);
the kube-state-metrics probes themselves run against a real Prometheus in
``tests/integration/test_monitor_window.py``.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from testkit.builders import cluster, node, pod
from tests.unit.test_cycle import Recorder
from tests.unit.test_monitor_stability import NS, RS, STEPS, TIMES, healthy, instant, ranged
from tuner.analyse.context import Context
from tuner.analyse.decision import analyse
from tuner.analyse.exploration import random_migration
from tuner.analyse.previous import find_previous
from tuner.analyse.removal import find_removal
from tuner.cycle import CycleReport, CycleState, Outcome, Ports, run_cycle
from tuner.daemon.cycle_log import log_cycle
from tuner.model.cluster import Cluster, Workload
from tuner.model.conventions import Keys
from tuner.model.execution import execution_of
from tuner.model.load import Load
from tuner.model.movability import Policy, assess
from tuner.model.window_report import Scope, Unsettled, Verdict, WindowReport
from tuner.monitor.command import render_text
from tuner.monitor.evidence import Probe, evidence_from_series
from tuner.monitor.stability import assess as judge
from tuner.monitor.stability import compare_snapshots, left_to_autoscaler
from tuner.settings import Analyse, Pricing, Settings, Windows
from tuner.sim.engine import Simulation
from tuner.sim.ports import SimObserver
from tuner.sim.scenarios import scenario as scenario_named

KEYS = Keys()

WEB = Workload(NS, "Deployment", "web")
API = Workload(NS, "Deployment", "api")
API_D = Workload("default", "Deployment", "api")
WEB_D = Workload("default", "Deployment", "web")
PRICING = Pricing(price_per_core=1.0, price_per_gb=0.0)


# ---------------------------------------------------------------- the kube-state-metrics judge


def web_pod_on(node_name: str, index: int) -> dict[str, str]:
    return {**RS, "pod": f"web-5f7d8-{index}", "node": node_name}


def test_ksm_a_pod_started_on_one_node_unsettles_that_node_and_its_workload_only() -> None:
    results = healthy(web=3)
    results[Probe.PODS] = [ranged(RS, [3.0, 3.0, 4.0, 4.0, 4.0])]
    results[Probe.PODS_SEEN] = [instant(web_pod_on("n1", i)) for i in range(3)]
    results[Probe.PODS_SEEN].append(instant(web_pod_on("n2", 3)))
    results[Probe.NODE_PODS] = [
        ranged({"node": "n1"}, [3.0] * 5),
        ranged({"node": "n2"}, [0.0, 0.0, 1.0, 1.0, 1.0]),
    ]
    assessment = judge(evidence_from_series(STEPS, results))
    assert assessment.verdict is Verdict.UNSTABLE
    assert assessment.unsettled.nodes == {"n2"}
    assert WEB in assessment.unsettled.workloads
    assert assessment.unsettled.blockers == ()


def test_ksm_a_pending_pod_anywhere_blocks() -> None:
    results = healthy()
    results[Probe.PENDING] = [instant({"namespace": NS, "pod": "web-5f7d8-0"})]
    results[Probe.PODS_SEEN] = [instant(web_pod_on("n1", i)) for i in range(3)]
    unsettled = judge(evidence_from_series(STEPS, results)).unsettled
    assert unsettled.blockers == ("pending pods: shop/web-5f7d8-0",)
    assert WEB in unsettled.workloads


def test_ksm_a_node_joining_blocks_but_one_left_to_the_autoscaler_does_not() -> None:
    results = healthy(nodes=("n1", "n2", "n3"))
    results[Probe.NODES][2] = ranged({"node": "n3"}, [1.0, 1.0, 1.0, None, None])
    evidence = evidence_from_series(STEPS, results)
    assert judge(evidence).unsettled.blockers == ("nodes joining or leaving: n3",)
    handed = judge(evidence, frozenset({"n3"})).unsettled
    assert handed.blockers == ()
    assert handed.nodes == {"n3"}


def test_ksm_a_cordon_and_a_rollout_unsettle_their_node_and_deployment() -> None:
    results = healthy()
    results[Probe.CORDONS] = [instant({"node": "n2"}, 1.0)]
    results[Probe.DEPLOYMENT_CHANGES] = [
        instant({"namespace": NS, "deployment": "web", "field": "generation"}, 1.0)
    ]
    unsettled = judge(evidence_from_series(STEPS, results)).unsettled
    assert unsettled.nodes == {"n2"}
    assert unsettled.workloads == {WEB}
    assert unsettled.blockers == ()


def test_ksm_a_stable_window_has_nothing_unsettled() -> None:
    assessment = judge(evidence_from_series(STEPS, healthy()))
    assert assessment.verdict is Verdict.STABLE
    assert assessment.unsettled == Unsettled()


# ---------------------------------------------------------------- the snapshot judge


def snapshots_with(**changes: Cluster) -> tuple[Cluster, Cluster]:
    start = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a"), pod("web-2", "a"), pod("api-1", "b")],
    )
    return start, changes.get("end", start)


def test_snapshots_a_change_elsewhere_does_not_block() -> None:
    start, _ = snapshots_with()
    end = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a"), pod("web-2", "a"), pod("api-1", "b"), pod("api-2", "b")],
    )
    assessment = compare_snapshots(start, end, TIMES[0], TIMES[-1], keys=KEYS)
    assert assessment.verdict is Verdict.UNSTABLE
    api = Workload("default", "Deployment", "api")
    assert assessment.unsettled == Unsettled(frozenset({"b"}), frozenset({api}), ())


def test_snapshots_pending_pods_and_nodes_leaving_block() -> None:
    start, _ = snapshots_with()
    pending = cluster(list(start.nodes), [*start.pods, pod("web-3", None)])
    assert compare_snapshots(start, pending, 0, 600, keys=KEYS).unsettled.blockers == (
        "pending pods: default/web-3",
    )
    gone = cluster([node("a")], [pod("web-1", "a"), pod("web-2", "a"), pod("api-1", "a")])
    assert compare_snapshots(start, gone, 0, 600, keys=KEYS).unsettled.blockers == (
        "nodes joining or leaving: b",
    )


def test_snapshots_a_node_annotated_left_for_removal_may_leave() -> None:
    left = node("b", annotations={KEYS.left_for_removal: "2026-01-01T00:00:00Z"})
    start = cluster([node("a"), left], [pod("web-1", "a"), pod("api-1", "a")])
    end = cluster([node("a")], [pod("web-1", "a"), pod("api-1", "a")])
    assessment = compare_snapshots(start, end, 0, 600, keys=KEYS)
    assert assessment.verdict is Verdict.UNSTABLE
    assert assessment.unsettled.blockers == ()


@pytest.mark.parametrize(
    ("annotation", "prefix"),
    [("other.io/left-for-removal", "tuner.dev"), ("tuner.dev/left-for-removal", "example.com")],
)
def test_snapshots_another_prefix_left_for_removal_is_not_the_tuners(
    annotation: str, prefix: str
) -> None:
    """Only the configured prefix's own annotation says the tuner left a node: another tool's
    key that ends the same way, or the default prefix under another configured one, does not."""
    left = node("b", annotations={annotation: "2026-01-01T00:00:00Z"})
    start = cluster([node("a"), left], [pod("web-1", "a"), pod("api-1", "a")])
    end = cluster([node("a")], [pod("web-1", "a"), pod("api-1", "a")])
    keys = Keys(prefix)
    assert left_to_autoscaler(start, keys) == frozenset()
    assessment = compare_snapshots(start, end, 0, 600, keys=keys)
    assert assessment.unsettled.blockers == ("nodes joining or leaving: b",)


# ---------------------------------------------------------------- the report


def report(scope: Scope, verdict: Verdict, unsettled: Unsettled) -> WindowReport:
    return WindowReport(
        verdict, "why", Load.scalar(1.0), 0, 600, 0, scope=scope, unsettled=unsettled
    )


def test_actionable_by_scope() -> None:
    changed = Unsettled(frozenset({"b"}), frozenset({WEB}), ())
    blocked = Unsettled(frozenset({"b"}), frozenset(), ("pending pods: x",))
    assert report(Scope.TOUCHED, Verdict.UNSTABLE, changed).actionable
    assert not report(Scope.TOUCHED, Verdict.UNSTABLE, blocked).actionable
    assert not report(Scope.CLUSTER, Verdict.UNSTABLE, changed).actionable
    assert not report(Scope.TOUCHED, Verdict.UNKNOWN, changed).actionable
    assert report(Scope.CLUSTER, Verdict.STABLE, Unsettled()).actionable
    unexplained = report(Scope.TOUCHED, Verdict.UNSTABLE, Unsettled())
    assert not unexplained.actionable  # unstable, but the judge named nothing: not scoped
    assert unexplained.judgement.startswith("touched scope: the judge named no node or workload")
    touched = report(Scope.TOUCHED, Verdict.UNSTABLE, changed)
    assert not touched.whole_stable
    assert touched.judgement == (
        "touched scope: 1 node and 1 workload changed (kept out of the plan); "
        "nothing pending, no node joining or leaving"
    )
    assert touched.to_json()["unsettled"] == {
        "nodes": ["b"],
        "workloads": ["shop/Deployment/web"],
        "blockers": [],
    }


# ---------------------------------------------------------------- the analysis


def three_nodes() -> Cluster:
    """c is nearly empty; a and b have room for its pod."""
    return cluster(
        [node("a"), node("b"), node("c")],
        [pod("web-1", "a", "1"), pod("api-1", "b", "1"), pod("job-1", "c", "500m")],
    )


def settings(**analyse: object) -> Settings:
    return Settings(
        pricing=PRICING,
        analyse=Analyse(**{"excluded_namespaces": frozenset(), "candidate_delay_s": 0, **analyse}),  # type: ignore[arg-type]
        windows=Windows(measure_s=600, retry_s=60, warmup_s=0),
    )


def test_removal_never_drains_nor_fills_an_unsettled_node() -> None:
    c, s = three_nodes(), settings()
    free = find_removal(c, s, assess(c, Policy(frozenset())))
    assert free.removal is not None and free.removal.nodes == ("c",)
    drained = find_removal(c, s, assess(c, Policy(frozenset(), unsettled_nodes=frozenset("c"))))
    assert drained.removal is None or "c" not in drained.removal.nodes
    filled = find_removal(c, s, assess(c, Policy(frozenset(), unsettled_nodes=frozenset("ab"))))
    assert filled.removal is None


def test_removal_never_moves_a_pod_of_an_unsettled_workload() -> None:
    c, s = three_nodes(), settings()
    job = Workload("default", "Deployment", "job")
    policy = Policy(frozenset(), unsettled_workloads=frozenset({job}))
    removal = find_removal(c, s, assess(c, policy)).removal
    assert removal is not None
    assert "c" not in removal.nodes
    assert all(m.pod.workload != job for m in removal.moves)


def test_exploration_never_targets_an_unsettled_node() -> None:
    c = cluster([*three_nodes().nodes, node("d")], list(three_nodes().pods))
    movability = assess(c, Policy(frozenset(), unsettled_nodes=frozenset("bc")))
    for seed in range(20):
        context = Context.of(c, settings(), movability)
        migration = random_migration(context, random.Random(seed))
        assert migration is not None
        assert (migration.pod.node, migration.node) == ("a", "d")


def test_previous_deployment_touching_an_unsettled_node_is_not_now_and_kept() -> None:
    then = cluster([node("a"), node("b")], [pod("web-1", "a", "1"), pod("api-1", "a", "1")])
    now = cluster(
        [node("a"), node("b"), node("c")], [pod("web-1", "b", "1"), pod("api-1", "c", "1")]
    )
    entry = execution_of(then, assess(then, Policy(frozenset())), PRICING, 100.0, 0, 600)
    free = find_previous(now, assess(now, Policy(frozenset())), PRICING, [entry], 12.0)
    assert free.execution is not None
    for policy in (
        Policy(frozenset(), unsettled_nodes=frozenset({"c"})),
        Policy(frozenset(), unsettled_workloads=frozenset({API_D, WEB_D})),
    ):
        held = find_previous(now, assess(now, policy), PRICING, [entry], 12.0)
        assert held.execution is None
        assert held.unattainable == ()
        assert held.not_now == 1
        assert "not now" in held.reason


def test_analyse_passes_the_unsettled_nodes_into_the_movability() -> None:
    c = three_nodes()
    analysis = analyse(c, settings(), [], random.Random(0), unsettled_nodes=frozenset({"c"}))
    assert analysis.movability.closed == {"c"}
    assert "c" not in analysis.change.remove_nodes


# ---------------------------------------------------------------- the cycle


class Observer:
    def __init__(self, seen: WindowReport) -> None:
        self.seen = seen

    def observe(self, start: float, end: float) -> WindowReport:
        return self.seen


@pytest.fixture
def kb(tmp_path: Path) -> EmbeddedKnowledgeBase:
    return EmbeddedKnowledgeBase(tmp_path / "kb.sqlite")


def test_the_cycle_acts_on_a_touched_window_but_records_only_a_whole_stable_one(
    kb: EmbeddedKnowledgeBase,
) -> None:
    c = three_nodes()
    changed = Unsettled(frozenset({"a"}), frozenset(), ())
    for verdict, recorded in ((Verdict.UNSTABLE, False), (Verdict.STABLE, True)):
        seen = report(
            Scope.TOUCHED, verdict, changed if verdict is Verdict.UNSTABLE else Unsettled()
        )
        actuator = Recorder(c)
        outcome, _ = run_cycle(
            1000, CycleState(), settings(), Ports(Observer(seen), actuator, kb), random.Random(0)
        )
        assert outcome.outcome is Outcome.ACTED
        assert (outcome.recorded is not None) is recorded
        assert outcome.plan is not None
        assert "a" not in outcome.plan.analysis.change.remove_nodes


def test_the_cycle_under_the_cluster_scope_does_not_act_on_a_changed_window(
    kb: EmbeddedKnowledgeBase,
) -> None:
    seen = report(Scope.CLUSTER, Verdict.UNSTABLE, Unsettled(frozenset({"a"}), frozenset(), ()))
    actuator = Recorder(three_nodes())
    outcome, _ = run_cycle(
        1000, CycleState(), settings(), Ports(Observer(seen), actuator, kb), random.Random(0)
    )
    assert outcome.outcome is Outcome.UNSTABLE
    assert actuator.calls == []


# ---------------------------------------------------------------- the simulator


def test_the_simulator_judges_the_same_way_and_the_cluster_scope_as_before() -> None:
    scenario = scenario_named("online-boutique", 2.0)
    touched, whole = 0, 0
    sim = Simulation(scenario, 1)
    sim.advance(3600)
    observers = (SimObserver(sim), SimObserver(sim, Windows(scope="cluster")))
    for _ in range(24):
        end = sim.now + 600
        first, second = (o.observe(end - 600, end) for o in observers)
        assert first.verdict is second.verdict
        assert second.actionable is second.whole_stable
        assert not first.whole_stable or first.unsettled == Unsettled()
        touched += first.actionable
        whole += second.actionable
    assert touched > whole  # changes elsewhere no longer hold the tuner back


def test_the_simulator_does_not_count_a_node_the_tuner_left_to_the_autoscaler() -> None:
    for handed_over, blocked in ((True, False), (False, True)):
        sim = Simulation(scenario_named("online-boutique", 1.0), 1)
        sim.advance(1800)
        name = max(sim.cluster_state.nodes)
        if handed_over:
            sim.controls.drain_node(name, "autoscaler")
        sim.cluster_state.delete_node(name)  # the autoscaler removes it
        sim.advance(10)  # (before a node it may start for the evicted pods is up)
        window = sim.window(10, warmup=10)
        assert ("a node joined or left" in window.blockers) is blocked
        assert name in window.nodes


# ---------------------------------------------------------------- what is printed


def test_monitor_text_and_json_say_the_scope_and_whether_to_act() -> None:
    changed = report(Scope.TOUCHED, Verdict.UNSTABLE, Unsettled(frozenset("b"), frozenset(), ()))
    text = render_text(changed)
    assert "scope:    touched scope: 1 node and 0 workloads changed (kept out of the plan)" in text
    assert "act:      yes, keeping what changed out of the plan; not recorded" in text
    doc = changed.to_json()
    assert (doc["scope"], doc["whole_stable"], doc["actionable"]) == ("touched", False, True)


def test_the_cycle_log_says_which_scope_was_judged(caplog: pytest.LogCaptureFixture) -> None:
    blocked = Unsettled(frozenset("b"), frozenset(), ("pending pods: shop/web-1",))
    seen = report(Scope.TOUCHED, Verdict.UNSTABLE, blocked)
    cycle = CycleReport(Outcome.UNSTABLE, 0, 600, seen.judgement, 60, seen)
    with caplog.at_level(logging.INFO):
        log_cycle(cycle, logging.getLogger("test"))
    assert (
        "window not actionable: touched scope: 1 node and 0 workloads changed (kept out of the "
        "plan); blocked: pending pods: shop/web-1"
    ) in caplog.messages
