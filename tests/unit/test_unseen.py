"""What the cluster read after a window holds that the window did not see (it came after
Prometheus' last scrape, or after the window's end): a node the window did not observe was never
judged stable, so the cycle keeps out of it as out of a node that changed over the window,
records nothing, and says so; a pod pending in the read keeps the cycle from acting, as a pod
pending in the window does.

Pure tests from hand-made window reports and clusters; the monitor's and the simulator's
observers are checked to fill the set of nodes observed.
"""

from __future__ import annotations

import logging
import random
from dataclasses import replace
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from testkit.builders import cluster, node, pod
from tests.unit.test_cycle import Recorder
from tests.unit.test_monitor_observe import BEFORE, END, Served, Snapshots
from tests.unit.test_monitor_observe import settings as monitor_settings
from tests.unit.test_monitor_stability import STEPS, healthy, instant
from tests.unit.test_scope import Observer, settings, three_nodes
from tuner.cycle import CycleReport, CycleState, Outcome, Ports, run_cycle
from tuner.daemon.cycle_log import log_cycle
from tuner.model.cluster import Cluster
from tuner.model.conventions import Keys
from tuner.model.load import Load
from tuner.model.unseen import unseen
from tuner.model.window_report import Scope, Unsettled, Verdict, WindowReport
from tuner.monitor.evidence import Probe, evidence_from_series
from tuner.monitor.observe import observe_window
from tuner.plan.actions import Add, Migrate
from tuner.sim.engine import Simulation
from tuner.sim.ports import SimObserver
from tuner.sim.scenarios import scenario as scenario_named

KEYS = Keys()


def window(
    observed: frozenset[str] | None,
    verdict: Verdict = Verdict.STABLE,
    unsettled: Unsettled | None = None,
) -> WindowReport:
    return WindowReport(
        verdict,
        "why",
        Load.scalar(1.0),
        400,
        1000,
        400,
        scope=Scope.TOUCHED,
        unsettled=unsettled or Unsettled(),
        observed_nodes=observed,
    )


@pytest.fixture
def kb(tmp_path: Path) -> EmbeddedKnowledgeBase:
    return EmbeddedKnowledgeBase(tmp_path / "kb.sqlite")


def cycle_on(
    seen: WindowReport, kb: EmbeddedKnowledgeBase, read: Cluster | None = None
) -> CycleReport:
    actuator = Recorder(read or three_nodes())
    report, _ = run_cycle(
        1000, CycleState(), settings(), Ports(Observer(seen), actuator, kb), random.Random(0)
    )
    return report


def touched_nodes(report: CycleReport) -> set[str]:
    """The nodes the plan removes or places pods on."""
    assert report.plan is not None
    change = report.plan.analysis.change
    targets = {a.target for a in report.plan.actions if isinstance(a, Migrate | Add)}
    return set(change.remove_nodes) | targets


# ---------------------------------------------------------------- the report


def test_the_nodes_read_that_the_window_did_not_observe() -> None:
    c = three_nodes()
    assert unseen(window(frozenset({"a", "b"})), c, KEYS).nodes == {"c"}
    assert unseen(window(frozenset({"a", "b", "c", "gone"})), c, KEYS).nodes == frozenset()
    assert unseen(window(None), c, KEYS).nodes == frozenset()  # the source cannot say
    doc = window(frozenset({"b", "a"})).to_json()
    assert doc["observed_nodes"] == ["a", "b"]
    assert window(None).to_json()["observed_nodes"] is None


def test_the_pods_pending_in_the_read_but_the_placeholders_and_jobs() -> None:
    c = cluster(
        [node("a")],
        [
            pod("w-1", "a"),
            pod("w-2", None),
            replace(pod("w-3", "a"), phase="Pending"),  # bound, not started
            pod("ds-1", None, kind="DaemonSet"),
            pod("job-1", None, kind="Job"),
            pod("hold-1", None, labels={KEYS.placeholder: "hold-1"}),
        ],
    )
    late = unseen(window(frozenset({"a"})), c, KEYS)
    assert late.nodes == frozenset()  # a pending pod has no node to observe
    assert late.pending == ("default/ds-1", "default/w-2", "default/w-3")
    assert late.blocker == (
        "pods pending in the cluster read after the window (not seen by it): "
        "default/ds-1, default/w-2, default/w-3"
    )
    assert unseen(window(frozenset({"a"})), three_nodes(), KEYS).blocker is None


# ---------------------------------------------------------------- the cycle


def test_a_stable_window_that_did_not_see_a_node_leaves_it_out_of_the_plan(
    kb: EmbeddedKnowledgeBase,
) -> None:
    seen = cycle_on(window(frozenset({"a", "b", "c"})), kb)
    assert seen.outcome is Outcome.ACTED and "c" in touched_nodes(seen)  # c is the one to go
    assert seen.recorded is not None and seen.unobserved == frozenset()

    joined = cycle_on(window(frozenset({"a", "b"})), kb)
    assert joined.unobserved == {"c"}
    assert "c" not in touched_nodes(joined)
    assert joined.recorded is None  # the deployment read is not the one judged stable
    assert joined.plan is not None
    assert joined.plan.analysis.movability.node_reasons["c"] == "changed during the window"


def test_under_the_touched_scope_the_unobserved_node_joins_those_that_changed(
    kb: EmbeddedKnowledgeBase,
) -> None:
    changed = Unsettled(frozenset({"a"}), frozenset(), ())
    report = cycle_on(window(frozenset({"a", "b"}), Verdict.UNSTABLE, changed), kb)
    assert report.unobserved == {"c"}
    assert report.plan is not None
    assert report.plan.analysis.movability.closed == {"a", "c"}
    assert not {"a", "c"} & touched_nodes(report)


def test_a_pod_pending_in_the_read_keeps_the_cycle_from_acting(
    kb: EmbeddedKnowledgeBase,
) -> None:
    base = three_nodes()
    read = replace(base, pods=(*base.pods, pod("web-2", None, "1")))
    report = cycle_on(window(frozenset({"a", "b", "c"})), kb, read)
    assert report.outcome is Outcome.UNSTABLE
    assert report.reason == (
        "pods pending in the cluster read after the window (not seen by it): default/web-2"
    )
    assert report.plan is None and report.recorded is None and kb.list() == []
    assert report.next_in == 60  # retried as after an unstable window


def test_the_cycle_log_names_the_unobserved_nodes(caplog: pytest.LogCaptureFixture) -> None:
    seen = window(frozenset({"a"}))
    cycle = CycleReport(Outcome.STAYED, 400, 1000, "stay", 600, seen, unobserved=frozenset("cb"))
    with caplog.at_level(logging.INFO):
        log_cycle(cycle, logging.getLogger("test"))
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage() == (
        "nodes the window did not observe (joined after it), kept out of the plan and the "
        "deployment not recorded: b, c"
    )
    assert record.__dict__["unobserved"] == ["b", "c"]


# ---------------------------------------------------------------- the monitor


def test_kube_state_metrics_evidence_observes_every_node_it_saw() -> None:
    results = healthy()
    results[Probe.NODES_SEEN].append(instant({"node": "n9"}))  # seen between two steps only
    evidence = evidence_from_series(STEPS, results)
    assert evidence.observed_nodes == {*evidence.nodes, "n9"}
    assert "n9" not in evidence.nodes


def test_the_monitor_reports_the_nodes_its_source_observed() -> None:
    assert observe_window(monitor_settings(), END, Served()).observed_nodes == {"n1", "n2"}
    failed = observe_window(monitor_settings(), END, Served(fail_at=0))
    assert failed.verdict is Verdict.UNKNOWN and failed.observed_nodes is None
    grown = replace(BEFORE, nodes=(*BEFORE.nodes, node("n3")))
    snapshots = Snapshots((0.0, BEFORE), (END - 10, grown))
    by_api = observe_window(monitor_settings(), END, Served(present=()), snapshots)
    assert by_api.observed_nodes == {"n1", "n2", "n3"}
    blind = observe_window(monitor_settings(), END, Served(present=()))
    assert blind.verdict is Verdict.UNKNOWN and blind.observed_nodes is None


# ---------------------------------------------------------------- the simulator


def test_the_simulator_observes_only_the_nodes_ready_by_its_last_tick() -> None:
    sim = Simulation(scenario_named("online-boutique", 1.0), 1)
    sim.advance(1800)
    some = next(iter(sim.cluster_state.nodes.values()))
    late = sim.cluster_state.add_node(some.type, sim.now, 0.0, some.pool)  # ready now
    seen = SimObserver(sim).observe(sim.now - 600, sim.now)
    assert seen.observed_nodes is not None and late.name not in seen.observed_nodes
    assert unseen(seen, sim.cluster(), KEYS).nodes == {late.name}
    sim.advance(sim.clock.tick)
    later = SimObserver(sim).observe(sim.now - 600, sim.now)
    assert unseen(later, sim.cluster(), KEYS).nodes == frozenset()
