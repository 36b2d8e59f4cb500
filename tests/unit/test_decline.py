"""Release fast during a monotone decline (windows.release_on_decline): when the load fell, nothing
is pending, no node joined, every changed workload only lost pods by its HPA and the forecast
agrees, the shrinking workloads and the nodes that only lost pods count as settled; each
condition refuses on its own; the monitor's judges tell what only fell; the cycle acts on it and
looks again after a settle time."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from knowledge.memory import MemoryKnowledge
from testkit.builders import cluster, node, pod
from tests.unit.test_cycle import Recorder
from tests.unit.test_monitor_stability import NS, RS, STEPS, TIMES, healthy, instant, ranged
from tuner.analyse.options import Refusal
from tuner.cycle import CycleState, Outcome, Ports, run_cycle
from tuner.model.acting import (
    DECLINE_REPLACE_STANDS_S,
    Acting,
    decline_candidate_delay_s,
    freed_in_s,
    window_start,
)
from tuner.model.cluster import Cluster, Hpa, Workload
from tuner.model.conventions import Keys
from tuner.model.forecast import DAY_S, Band, Basis, Forecast, LoadSeries
from tuner.model.load import SCALAR, Load
from tuner.model.window_report import (
    Scope,
    Unsettled,
    Verdict,
    WindowReport,
    decline_release,
    falling,
)
from tuner.monitor.evidence import Probe, evidence_from_series
from tuner.monitor.stability import assess as judge
from tuner.monitor.stability import compare_snapshots
from tuner.settings import Analyse, ForecastSettings, Pricing, Settings, Windows
from tuner.sim.engine import Simulation
from tuner.sim.scenarios import scenario as scenario_named

WEB = Workload("default", "Deployment", "web")
SHOP_WEB = Workload(NS, "Deployment", "web")
FALLING = (200.0, 190.0, 195.0, 170.0, 150.0)
SHRUNK = Unsettled(frozenset({"a"}), frozenset({WEB}), (), frozenset({WEB}), frozenset({"a"}))


def forecast(recent: tuple[float, ...] = FALLING, expected: float = 126.0) -> Forecast:
    """The upper edge of the band (1.3 x the expected peak) may be above the load now."""
    band = Band(expected, expected * 0.9, expected * 1.3)
    return Forecast(
        0.0, 720.0, 60.0, 0.95, band, Basis.DAY, 100, 1e6, (), recent[-1], recent=recent
    )


def window(unsettled: Unsettled = SHRUNK, scope: Scope = Scope.TOUCHED) -> WindowReport:
    load = Load.scalar(180.0)
    return WindowReport(
        Verdict.UNSTABLE, "changed", load, 0, 600, 0, scope=scope, unsettled=unsettled
    )


def test_a_load_falls_when_it_ends_lower_and_never_rises_past_the_tolerance() -> None:
    assert falling(FALLING)
    assert not falling((200.0, 190.0, 215.0, 225.0, 150.0, 170.0))  # 170 > 150 x 1.05
    assert not falling((150.0, 150.0))
    assert not falling((150.0,))


def test_a_decline_settles_the_shrinking_workloads_and_emptied_nodes() -> None:
    release = decline_release(window(), forecast()).scaled_by({WEB})
    assert release.holds and release.kind == "released"
    assert release.workloads == {WEB} and release.nodes == {"a"}
    assert "the load fell 200 → 150" in release.reason
    acting = Acting(window(), True, release)
    assert acting.actionable and acting.unsettled_workloads == set()
    assert acting.unsettled_nodes == set()
    assert not acting.records  # a deployment is recorded only after a whole-stable window


def test_the_release_names_the_fall_from_the_peak_not_from_the_first_load() -> None:
    rose_then_fell = (150.0, 180.0, 215.0, 190.0, 160.0)
    release = decline_release(window(), forecast(rose_then_fell)).scaled_by({WEB})
    assert release.holds and "the load fell 215 → 160" in release.reason


def test_a_window_stable_as_a_whole_is_released_for_its_settle_time_only() -> None:
    stable = window(Unsettled(frozenset(), frozenset(), (), frozenset(), frozenset()))
    release = decline_release(stable, forecast())
    assert release.holds and "waits only the settle time" in release.reason
    assert "0 workloads" not in release.reason


def test_a_rise_pending_joining_grown_no_hpa_and_a_disagreeing_forecast_each_refuse() -> None:
    pending = replace(SHRUNK, blockers=("pending pods: default/web-9",))
    joining = replace(SHRUNK, blockers=("nodes joining or leaving: c",))
    grown = replace(SHRUNK, shrinking=frozenset())
    refusals = {
        "not-falling": decline_release(window(), forecast((200.0, 150.0, 190.0))),
        "blocked": decline_release(window(pending), forecast()),
        "blocked ": decline_release(window(joining), forecast()),
        "grown": decline_release(window(grown), forecast()),
        "no-hpa": decline_release(window(), forecast()).scaled_by(set()),
        "disagrees": decline_release(window(), forecast(expected=155.0)),
        "scope": decline_release(window(scope=Scope.CLUSTER), forecast()),
        "no-forecast": decline_release(window(), None),
    }
    for kind, release in refusals.items():
        assert not release.holds
        assert release.kind == kind.strip()
    assert "above the load now 150" in refusals["disagrees"].reason
    assert "no HPA scales default/Deployment/web" in refusals["no-hpa"].reason
    leaving = replace(SHRUNK, blockers=("nodes joining or leaving: c",), only_leaving=True)
    assert decline_release(window(leaving), forecast()).holds
    acting = Acting(window(), True, refusals["grown"])
    assert acting.unsettled_workloads == {WEB} and acting.unsettled_nodes == {"a"}


def test_a_workload_that_grew_during_a_decline_stays_out_of_the_plan_the_others_settle() -> None:
    api = Workload("default", "Deployment", "api")
    mixed = replace(SHRUNK, workloads=frozenset({WEB, api}), nodes=frozenset({"a", "b"}))
    release = decline_release(window(mixed), forecast()).scaled_by({WEB})
    assert release.holds and "(1 workload that grew kept out)" in release.reason
    acting = Acting(window(mixed), True, release)
    assert acting.unsettled_workloads == {api} and acting.unsettled_nodes == {"b"}


def test_during_a_decline_a_settle_time_replaces_the_whole_window_after_a_change() -> None:
    s = Settings(windows=Windows(measure_s=600.0), forecast=ForecastSettings(node_startup_s=90.0))
    assert window_start(s, forecast(), 1000.0, 300.0) == (400.0, True)
    assert window_start(s, forecast(), 1000.0, 800.0) == (910.0, False)
    assert window_start(s, forecast(), 1000.0, 950.0) is None  # not settled yet
    assert window_start(s, forecast(expected=155.0), 1000.0, 800.0) is None
    off = replace(s, windows=replace(s.windows, release_on_decline=False))
    assert window_start(off, forecast(), 1000.0, 800.0) is None
    longer = replace(s, windows=replace(s.windows, decline_settle_s=150.0))
    assert window_start(longer, forecast(), 1000.0, 800.0) == (850.0, False)


# ---------------------------------------------------------------- the monitor's judges


def test_ksm_a_workload_that_only_lost_pods_shrinks_and_its_node_is_emptied() -> None:
    results = healthy(web=3)
    results[Probe.PODS] = [ranged(RS, [3.0, 3.0, 2.0, 2.0, 2.0])]
    results[Probe.PODS_SEEN] = [
        instant({**RS, "pod": f"web-5f7d8-{i}", "node": "n1"}) for i in range(3)
    ]
    results[Probe.NODE_PODS] = [ranged({"node": "n1"}, [3.0, 3.0, 2.0, 2.0, 2.0])]
    unsettled = judge(evidence_from_series(STEPS, results)).unsettled
    assert unsettled.shrinking == {SHOP_WEB} and unsettled.emptied == {"n1"}
    # one pod more seen than at the start: a pod started (and another stopped)
    results[Probe.PODS_SEEN].append(instant({**RS, "pod": "web-5f7d8-9", "node": "n1"}))
    results[Probe.NODE_PODS] = [ranged({"node": "n1"}, [3.0, 3.0, 3.0, 2.0, 2.0])]
    results[Probe.PODS] = [ranged(RS, [3.0, 2.0, 3.0, 2.0, 2.0])]
    unsettled = judge(evidence_from_series(STEPS, results)).unsettled
    assert unsettled.shrinking == set() and SHOP_WEB in unsettled.workloads


def test_ksm_a_node_leaving_is_only_leaving_a_node_joining_is_not() -> None:
    results = healthy(nodes=("n1", "n2", "n3"))
    results[Probe.NODES][2] = ranged({"node": "n3"}, [1.0, 1.0, 1.0, None, None])
    assert judge(evidence_from_series(STEPS, results)).unsettled.only_leaving
    results[Probe.NODES][2] = ranged({"node": "n3"}, [None, None, 1.0, 1.0, 1.0])
    assert not judge(evidence_from_series(STEPS, results)).unsettled.only_leaving


def test_snapshots_a_workload_that_only_lost_pods_shrinks() -> None:
    start = cluster(
        [node("a"), node("b")], [pod("web-1", "a"), pod("web-2", "a"), pod("api-1", "b")]
    )
    end = cluster([node("a")], [pod("web-1", "a"), pod("api-1", "a")])
    unsettled = compare_snapshots(start, end, TIMES[0], TIMES[-1], keys=Keys()).unsettled
    assert unsettled.shrinking == {WEB}  # api-1 is the same pod: its count did not change
    assert unsettled.emptied == set()  # a gained api-1
    assert unsettled.only_leaving  # b left, nothing joined or pending
    end = cluster([node("a"), node("b")], [pod("web-1", "a"), pod("api-1", "b")])
    unsettled = compare_snapshots(start, end, TIMES[0], TIMES[-1], keys=Keys()).unsettled
    assert unsettled.shrinking == {WEB} and unsettled.emptied == {"a"}


# ---------------------------------------------------------------- the cycle


STEP = 60.0


class Diurnal:
    """A day-periodic load history (two days up to the time asked)."""

    def series(self, end: float) -> LoadSeries:
        t = np.arange(end - 2 * DAY_S + STEP, end + 1, STEP)
        return LoadSeries.of(t[0], STEP, {SCALAR: 200 - 100 * np.cos(2 * np.pi * t / DAY_S)})


class Shrinking:
    """The HPA scaled web down on both nodes during the window."""

    def observe(self, start: float, end: float) -> WindowReport:
        unsettled = Unsettled(
            frozenset({"a", "b"}), frozenset({WEB}), (), frozenset({WEB}), frozenset({"a", "b"})
        )
        load = Load.scalar(200.0)
        return WindowReport(
            Verdict.UNSTABLE,
            "web scaled down",
            load,
            start,
            end,
            start,
            scope=Scope.TOUCHED,
            unsettled=unsettled,
        )


def two_nodes_one_web_pod_each() -> Cluster:
    c = cluster([node("a"), node("b")], [pod("web-1", "a", "1"), pod("web-2", "b", "1")])
    return replace(c, hpas=(Hpa("default", "web", WEB, 1, 10),))


def decline_cycle(  # type: ignore[no-untyped-def]
    now: float, state: CycleState | None = None, delay: float = 0.0, **windows: object
):
    s = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=delay),
        windows=Windows(measure_s=600.0, **windows),  # type: ignore[arg-type]
    )
    actuator = Recorder(two_nodes_one_web_pod_each())
    ports = Ports(Shrinking(), actuator, MemoryKnowledge(), history=Diurnal())
    report, state = run_cycle(now, state or CycleState(), s, ports, random.Random(0))
    return report, state, actuator


def test_the_cycle_removes_a_node_during_a_decline_and_looks_again_after_the_settle_time() -> None:
    falling_at = 10 * DAY_S + 0.75 * DAY_S
    report, state, actuator = decline_cycle(falling_at)
    assert report.decline is not None and report.decline.holds
    assert report.outcome is Outcome.ACTED and len(actuator.calls) == 1
    assert report.next_in == 120.0  # forecast.node_startup_s
    assert state.stable_since == falling_at


def test_during_a_decline_a_candidate_waits_one_look_not_the_candidate_delay() -> None:
    falling_at = 10 * DAY_S + 0.75 * DAY_S
    report, state, _ = decline_cycle(falling_at, delay=600.0)
    assert report.outcome is Outcome.STAYED and report.plan is not None
    assert report.plan.analysis.proposals[0].refusal is Refusal.CANDIDATE_DELAY
    assert report.next_in == 30.0  # windows.decline_retry_s: the candidate's second look
    report, _, actuator = decline_cycle(falling_at + 15, state, delay=600.0)
    assert report.outcome is Outcome.STAYED and actuator.calls == []
    report, _, actuator = decline_cycle(falling_at + 30, state, delay=600.0)
    assert report.outcome is Outcome.ACTED and len(actuator.calls) == 1
    report, _, actuator = decline_cycle(falling_at + 30, state, delay=600.0, decline_retry_s=60.0)
    assert report.outcome is Outcome.STAYED and actuator.calls == []  # slower looks: longer
    report, state, _ = decline_cycle(falling_at, delay=600.0, retry_s=20.0)
    assert report.next_in == 20.0  # never slower than the retry outside a decline


def test_the_decline_candidate_delay_is_its_looks_pace_never_above_the_retry_or_delay() -> None:
    def delay(candidate: float, retry: float, decline: float = 30.0) -> float:
        windows = Windows(retry_s=retry, decline_retry_s=decline)
        return decline_candidate_delay_s(
            Settings(analyse=Analyse(candidate_delay_s=candidate), windows=windows)
        )

    assert delay(600.0, 60.0) == 30.0
    assert delay(20.0, 60.0) == 20.0
    assert delay(600.0, 20.0) == 20.0
    assert delay(600.0, 120.0, 90.0) == 90.0


def test_no_node_is_replaced_during_a_decline_that_frees_a_nodes_room_before_it_would_stand() -> (
    None
):
    # a 2-core node is half the 4 cores requested: the load must lose half of itself
    pods = [pod(f"web-{i}", "a", cpu="500m", workload="web") for i in range(8)]
    nodes = cluster([node("a", "4"), node("b", "2")], pods)
    nodes = replace(nodes, hpas=(Hpa("default", "web", WEB, 1, 10),))
    fast = (200.0, 190.0, 180.0, 170.0, 150.0)  # 50 in 240 s: 75 more in 360 s
    slow = (200.0, 199.0, 198.0, 197.0, 196.0)  # 4 in 240 s: 98 more in 5,880 s
    assert freed_in_s(forecast(fast), nodes) == pytest.approx(360.0)
    assert freed_in_s(forecast(slow), nodes) == pytest.approx(5880.0)
    assert freed_in_s(forecast((150.0, 150.0)), nodes) == float("inf")
    assert 360.0 < DECLINE_REPLACE_STANDS_S < 5880.0

    def replaces(recent: tuple[float, ...], unsettled: Unsettled = SHRUNK) -> bool:
        load = forecast(recent, expected=recent[-1])
        release = decline_release(window(unsettled), load)
        acting = Acting(window(unsettled), True, release, load).read(nodes)
        return acting.settled(Settings()).analyse.replace_nodes

    assert not replaces(fast)
    assert replaces(slow)
    grown = replace(SHRUNK, shrinking=frozenset())
    assert replaces(fast, grown)  # not released: a replacement as on any window


def test_without_the_rule_or_on_a_rise_the_shrinking_workload_stays_out_of_the_plan() -> None:
    falling_at = 10 * DAY_S + 0.75 * DAY_S
    report, _, actuator = decline_cycle(falling_at, release_on_decline=False)
    assert report.outcome is Outcome.STAYED and actuator.calls == []
    assert report.decline is None
    rising_at = 10 * DAY_S + 0.25 * DAY_S
    report, _, actuator = decline_cycle(rising_at)
    assert report.outcome is Outcome.STAYED and actuator.calls == []
    assert report.decline is not None and report.decline.kind == "not-falling"


class RiseAtMidnight:
    """A load falling all day from 300 to 100, back at 300 at midnight (a week up to the time
    asked: the forecast has seen its rises come, so a reserve would act on it)."""

    def series(self, end: float) -> LoadSeries:
        t = np.arange(end - 7 * DAY_S + STEP, end + 1, STEP)
        return LoadSeries.of(t[0], STEP, {SCALAR: 300 - 200 * ((t % DAY_S) / DAY_S)})


def test_with_provisioning_ahead_a_decline_is_released_up_to_a_rise_a_start_up_away() -> None:
    """Eight minutes before the rise, within the forecast's horizon (12 min) but after a node's
    start-up plus a retry (3 min): without a reserve the forecast disagrees with the decline;
    with provisioning ahead on, the rise is the reserve's to provision later, and the node goes."""
    before_the_rise = 10 * DAY_S - 480.0
    off = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0.0),
        windows=Windows(measure_s=600.0),
    )
    on = replace(off, forecast=ForecastSettings(reserve_max_nodes=3))
    for settings, acts in ((off, False), (on, True)):
        actuator = Recorder(two_nodes_one_web_pod_each())
        ports = Ports(Shrinking(), actuator, MemoryKnowledge(), history=RiseAtMidnight())
        report, _ = run_cycle(before_the_rise, CycleState(), settings, ports, random.Random(0))
        assert report.decline is not None and report.forecast is not None
        assert report.forecast.foresees and report.forecast.peak.expected > 250
        assert report.decline.holds is acts, report.decline.reason
        assert (len(actuator.calls) == 1) is acts, report.reason


class Asked(MemoryKnowledge):
    """The in-memory knowledge base, remembering the loads it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[float] = []

    def find_by_load(self, load: float, *args: object, **kwargs: object):  # type: ignore[no-untyped-def,override]
        self.loads.append(load)
        return super().find_by_load(load, *args, **kwargs)  # type: ignore[arg-type]


def test_the_cycle_looks_the_previous_deployment_up_for_the_load_expected_next() -> None:
    falling_at = 10 * DAY_S + 0.75 * DAY_S
    kb = Asked()
    ports = Ports(Shrinking(), Recorder(two_nodes_one_web_pod_each()), kb, history=Diurnal())
    report, _ = run_cycle(falling_at, CycleState(), Settings(), ports, random.Random(0))
    assert report.forecast is not None and report.load == Load.scalar(200.0)
    expected = 200.0 * report.forecast.peak.expected / report.forecast.last
    assert kb.loads == [expected] and expected < 200.0


# ---------------------------------------------------------------- the simulator's judge


def test_the_simulator_tells_a_workload_that_only_lost_pods_from_one_that_started_one() -> None:
    sim = Simulation(scenario_named("online-boutique", 1.0), 1)
    sim.advance(1800)
    controllers = sim.controllers
    service = next(
        s for s, n in controllers.replicas.items() if n >= 2 and s not in controllers.hpas
    )
    controllers.replicas[service] -= 1  # scaled down: the ReplicaSet deletes a pod
    controllers.reconcile()
    sim.advance(5)
    window = sim.window(5, warmup=5)
    assert service.workload in window.workloads and service.workload in window.shrinking
    assert window.emptied and window.emptied <= window.nodes
    controllers.replicas[service] += 1  # and up again: a pod starts
    controllers.reconcile()
    sim.advance(5)
    window = sim.window(10)
    assert service.workload in window.workloads and service.workload not in window.shrinking
    started = {p.node for p in sim.cluster_state.pods_of(service) if p.bound_at >= sim.now - 5}
    assert started and started <= window.nodes and not started & window.emptied


def test_the_simulator_tells_a_node_leaving_from_one_joining() -> None:
    sim = Simulation(scenario_named("online-boutique", 1.0), 1)
    sim.advance(1800)
    pool = sim.scenario.pools[0]
    node = sim.cluster_state.add_node(pool.node_type, sim.now, 0.0, pool.name)  # one joins
    sim.advance(5)
    window = sim.window(5, warmup=5)
    assert "a node joined or left" in window.blockers and not window.only_leaving
    sim.advance(60)
    for landed in sim.cluster_state.pods_on(node):  # the daemons included
        sim.cluster_state.delete_pod(landed)
    sim.cluster_state.delete_node(node.name)  # and it leaves, empty
    sim.advance(5)
    window = sim.window(5, warmup=5)
    assert window.blockers == ("a node joined or left",) and window.only_leaving
