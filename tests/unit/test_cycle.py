"""The daemon's cycle: windows, stability, recording, decisions, dry runs and failures."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from testkit.builders import cluster, node, pod
from tuner.cycle import (
    KEEP_S,
    CycleState,
    Outcome,
    Ports,
    TransitionResult,
    run_cycle,
)
from tuner.model.cluster import Cluster
from tuner.model.execution import execution_of
from tuner.model.load import Load
from tuner.model.movability import Policy, assess
from tuner.model.window_report import Verdict, WindowReport
from tuner.plan.actions import Action, RemoveNode
from tuner.recall import previous_candidates
from tuner.settings import Analyse, Execute, Knowledge, Pricing, Settings, Windows

WINDOW = 600.0


@dataclass(frozen=True)
class Seen:
    """What the monitor says about a window, before the window's times are known."""

    verdict: Verdict
    reason: str
    load: Load | None


@dataclass
class Script:
    """Monitor verdicts in order (the last one repeats), as the monitor's window reports."""

    verdicts: list[Seen]
    windows: list[tuple[float, float]] = field(default_factory=list)

    def observe(self, start: float, end: float) -> WindowReport:
        self.windows.append((start, end))
        seen = self.verdicts.pop(0) if len(self.verdicts) > 1 else self.verdicts[0]
        return WindowReport(seen.verdict, seen.reason, seen.load, start, end, start)


@dataclass
class Recorder:
    """Serves a fixed cluster and records what it was asked to do."""

    cluster: Cluster
    fail_at: int | None = None
    calls: list[tuple[tuple[Action, ...], bool]] = field(default_factory=list)
    unremoved: tuple[str, ...] = ()
    """Nodes ``reclaim_unremoved`` takes back."""
    reclaims: int = 0

    def read(self) -> Cluster:
        return self.cluster

    def check(self, actions: Sequence[Action]) -> TransitionResult:
        self.calls.append((tuple(actions), True))
        return TransitionResult((), True, "dry run")

    def carry_out(self, actions: Sequence[Action]) -> TransitionResult:
        self.calls.append((tuple(actions), False))
        if self.fail_at is not None:
            return TransitionResult(
                tuple(actions[: self.fail_at]), False, "pod landed on the wrong node"
            )
        return TransitionResult(tuple(actions), True)

    def reclaim_unremoved(self, now: float) -> tuple[str, ...]:
        self.reclaims += 1
        return self.unremoved

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        return ()


STABLE = Seen(Verdict.STABLE, "nothing changed", Load.scalar(100.0))


def two_half_empty_nodes() -> Cluster:
    return cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])


def settings(**analyse: object) -> Settings:
    return Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(**{"excluded_namespaces": frozenset(), "candidate_delay_s": 0, **analyse}),  # type: ignore[arg-type]
        windows=Windows(measure_s=WINDOW, retry_s=60, warmup_s=0),
    )


@pytest.fixture
def kb(tmp_path: Path) -> EmbeddedKnowledgeBase:
    return EmbeddedKnowledgeBase(tmp_path / "kb.sqlite")


def cycle(
    now: float,
    state: CycleState,
    s: Settings,
    observer: Script,
    actuator: Recorder,
    kb: EmbeddedKnowledgeBase,
    dry_run: bool = False,
):  # type: ignore[no-untyped-def]
    return run_cycle(
        now, state, s, Ports(observer, actuator, kb), random.Random(0), dry_run=dry_run
    )


def test_waits_for_a_full_window_after_a_change(kb: EmbeddedKnowledgeBase) -> None:
    observer, actuator = Script([STABLE]), Recorder(two_half_empty_nodes())
    report, _ = cycle(1000, CycleState(stable_since=700), settings(), observer, actuator, kb)
    assert report.outcome is Outcome.WAITING
    assert report.next_in == pytest.approx(300)
    assert observer.windows == []


def test_unstable_and_unknown_windows_retry_without_acting(kb: EmbeddedKnowledgeBase) -> None:
    for verdict, outcome in (
        (Verdict.UNSTABLE, Outcome.UNSTABLE),
        (Verdict.UNKNOWN, Outcome.UNKNOWN),
    ):
        observer = Script([Seen(verdict, "pods changed", None)])
        actuator = Recorder(two_half_empty_nodes())
        report, _ = cycle(1000, CycleState(stable_since=0), settings(), observer, actuator, kb)
        assert report.outcome is outcome
        assert report.next_in == 60
        assert observer.windows == [(400, 1000)]
        assert actuator.calls == []
        assert kb.list() == []


def test_stable_window_is_recorded_and_the_cheapest_option_carried_out(
    kb: EmbeddedKnowledgeBase,
) -> None:
    actuator = Recorder(two_half_empty_nodes())
    report, state = cycle(
        1000, CycleState(stable_since=0), settings(), Script([STABLE]), actuator, kb
    )
    assert report.outcome is Outcome.ACTED
    assert [e.load for e in kb.list()] == [100.0]
    assert report.recorded == kb.list()[0].id
    ((actions, dry_run),) = actuator.calls
    assert not dry_run and isinstance(actions[-1], RemoveNode)
    assert state.stable_since == 1000  # the next window starts after the change
    assert report.next_in == WINDOW


def test_dry_run_plans_but_changes_nothing(kb: EmbeddedKnowledgeBase) -> None:
    actuator = Recorder(two_half_empty_nodes())
    report, state = cycle(
        1000, CycleState(stable_since=0), settings(), Script([STABLE]), actuator, kb, dry_run=True
    )
    assert report.outcome is Outcome.PLANNED
    assert actuator.calls[0][1] is True
    assert state.stable_since == 0
    assert report.recorded is None and kb.list() == []  # a dry run writes nothing


def test_a_load_vector_is_recorded_under_its_total(kb: EmbeddedKnowledgeBase) -> None:
    vector = Seen(Verdict.STABLE, "stable", Load.vector({'{service="a"}': 60, '{service="b"}': 40}))
    report, _ = cycle(
        1000,
        CycleState(stable_since=0),
        settings(),
        Script([vector]),
        Recorder(two_half_empty_nodes()),
        kb,
    )
    assert report.load is not None and report.load.total == 100.0
    assert [e.load for e in kb.list()] == [100.0]
    assert [e.load_vector for e in kb.list()] == [
        (('{service="a"}', 60.0), ('{service="b"}', 40.0))
    ]


@pytest.mark.parametrize(
    ("then_served", "chosen"),
    [
        ({'{service="a"}': 62, '{service="b"}': 38}, True),  # every dimension within 10 %
        ({'{service="a"}': 40, '{service="b"}': 60}, False),  # the same total, another mix
        ({"": 100}, False),  # a scalar load of the same total
    ],
)
def test_the_previous_deployment_is_looked_up_by_the_load_vector(
    kb: EmbeddedKnowledgeBase, then_served: dict[str, float], chosen: bool
) -> None:
    then = cluster([node("x")], [pod("w-1", "x"), pod("w-2", "x")])
    s = settings(remove_nodes=False)
    entry = execution_of(
        then, assess(then, Policy(frozenset())), s.pricing, Load.vector(then_served), 0, 600
    )
    kb.record(entry)
    now = Seen(Verdict.STABLE, "stable", Load.vector({'{service="a"}': 60, '{service="b"}': 40}))
    actuator = Recorder(cluster([node("x"), node("y")], [pod("w-1", "x"), pod("w-2", "y")]))
    report, state = cycle(1000, CycleState(stable_since=0), s, Script([now]), actuator, kb)
    assert (report.outcome is Outcome.ACTED) is chosen
    assert (state.awaiting == entry.id) is chosen
    assert (kb.get(entry.id) is None) is chosen  # a chosen entry leaves until proven stable


def test_a_chosen_previous_deployment_leaves_the_kb_until_it_proves_stable(
    kb: EmbeddedKnowledgeBase,
) -> None:
    then = cluster([node("x")], [pod("w-1", "x"), pod("w-2", "x")])
    s = settings(remove_nodes=False)
    chosen = execution_of(then, assess(then, Policy(frozenset())), s.pricing, 100.0, 0, 600)
    kb.record(chosen)
    actuator = Recorder(cluster([node("x"), node("y")], [pod("w-1", "x"), pod("w-2", "y")]))
    report, state = cycle(1000, CycleState(stable_since=0), s, Script([STABLE]), actuator, kb)
    assert report.outcome is Outcome.ACTED
    assert kb.get(chosen.id) is None
    assert state.awaiting == chosen.id
    actuator.cluster = then  # the transition reached the earlier deployment
    report, state = cycle(1700, state, s, Script([STABLE]), actuator, kb)
    assert state.awaiting is None
    assert report.recorded is not None and kb.get(report.recorded) is not None


def test_unattainable_entries_are_deleted(kb: EmbeddedKnowledgeBase) -> None:
    then = cluster([node("x", "4", "8Gi", instance_type="m5.xlarge")], [pod("w-1", "x")])
    s = settings(remove_nodes=False)
    alien = execution_of(then, assess(then, Policy(frozenset())), s.pricing, 100.0, 0, 600)
    kb.record(replace(alien, cost=0.5))
    cycle(
        1000, CycleState(stable_since=0), s, Script([STABLE]), Recorder(two_half_empty_nodes()), kb
    )
    assert kb.get(alien.id) is None


def test_the_lookup_reads_only_the_cheapest_entries_cheaper_than_now(
    kb: EmbeddedKnowledgeBase,
) -> None:
    now = two_half_empty_nodes()
    s = replace(settings(), knowledge=Knowledge(lookup_limit=2))
    recorded = execution_of(now, assess(now, Policy(frozenset())), s.pricing, 100.0, 0, 600)
    current = recorded.cost
    for i, cost in enumerate([0.25, 0.5, 0.75, 1.0, 1.0, 2.0]):
        kb.record(replace(recorded, id=f"e{i}", cost=current * cost))
    found = previous_candidates(kb, now, s, Load.scalar(100.0))
    assert [e.id for e in found] == ["e0", "e1"]
    s = replace(s, knowledge=Knowledge(lookup_limit=10))
    assert [e.id for e in previous_candidates(kb, now, s, Load.scalar(100.0))] == ["e0", "e1", "e2"]


def test_when_every_entry_read_is_unattainable_the_next_window_reads_the_next(
    kb: EmbeddedKnowledgeBase,
) -> None:
    then = cluster([node("x")], [pod("w-1", "x"), pod("w-2", "x")])
    s = replace(settings(remove_nodes=False), knowledge=Knowledge(lookup_limit=2))
    reachable = execution_of(then, assess(then, Policy(frozenset())), s.pricing, 100.0, 0, 600)
    alien = cluster([node("z", "4", "8Gi", instance_type="m5.xlarge")], [pod("w-1", "z")])
    alien_entry = execution_of(alien, assess(alien, Policy(frozenset())), s.pricing, 100.0, 0, 60)
    aliens = [replace(alien_entry, id=f"alien-{i}", cost=reachable.cost * i / 4) for i in (1, 2)]
    for entry in [reachable, *aliens]:
        kb.record(entry)
    actuator = Recorder(cluster([node("x"), node("y")], [pod("w-1", "x"), pod("w-2", "y")]))
    first, state = cycle(1000, CycleState(stable_since=0), s, Script([STABLE]), actuator, kb)
    assert first.outcome is Outcome.STAYED
    assert "2 cheaper deployment(s) for this load are unattainable" in first.reason
    assert [kb.get(e.id) for e in aliens] == [None, None]
    second, state = cycle(1600, state, s, Script([STABLE]), actuator, kb)
    assert second.outcome is Outcome.ACTED
    assert state.awaiting == reachable.id


def test_an_unreachable_kb_skips_only_the_previous_option(kb: EmbeddedKnowledgeBase) -> None:
    kb.close()  # every call now fails with KnowledgeError
    actuator = Recorder(two_half_empty_nodes())
    report, _ = cycle(1000, CycleState(stable_since=0), settings(), Script([STABLE]), actuator, kb)
    assert report.outcome is Outcome.ACTED
    assert report.recorded is None


def test_too_large_a_plan_is_not_started(kb: EmbeddedKnowledgeBase) -> None:
    s = replace(settings(), execute=Execute(max_actions_per_cycle=1))
    actuator = Recorder(two_half_empty_nodes())
    report, _ = cycle(1000, CycleState(stable_since=0), s, Script([STABLE]), actuator, kb)
    assert report.outcome is Outcome.SKIPPED
    assert actuator.calls == []


def test_a_failed_transition_is_reported(kb: EmbeddedKnowledgeBase) -> None:
    actuator = Recorder(two_half_empty_nodes(), fail_at=0)
    report, state = cycle(
        1000, CycleState(stable_since=0), settings(), Script([STABLE]), actuator, kb
    )
    assert report.outcome is Outcome.FAILED
    assert "pod landed on the wrong node" in report.reason
    assert state.stable_since == 1000


def test_candidate_delay_spans_cycles(kb: EmbeddedKnowledgeBase) -> None:
    s = settings(candidate_delay_s=900)
    actuator = Recorder(two_half_empty_nodes())
    first, state = cycle(1000, CycleState(stable_since=0), s, Script([STABLE]), actuator, kb)
    assert first.outcome is Outcome.STAYED  # candidates only just appeared
    second, state = cycle(1600, state, s, Script([STABLE]), actuator, kb)
    assert second.outcome is Outcome.STAYED  # 600 s < 900 s
    third, _ = cycle(2000, state, s, Script([STABLE]), actuator, kb)
    assert third.outcome is Outcome.ACTED


def test_after_a_change_the_next_window_starts_a_warm_up_later(kb: EmbeddedKnowledgeBase) -> None:
    s = replace(settings(), windows=Windows(measure_s=WINDOW, retry_s=60, warmup_s=120))
    actuator = Recorder(two_half_empty_nodes())
    report, state = cycle(1000, CycleState(), s, Script([STABLE]), actuator, kb)
    assert report.outcome is Outcome.ACTED
    assert report.next_in == 120 + WINDOW
    observer = Script([STABLE])
    waiting, _ = cycle(1600, state, s, observer, actuator, kb)
    assert waiting.outcome is Outcome.WAITING
    assert waiting.next_in == pytest.approx(120)
    assert observer.windows == []  # the window would have held the change's warm-up


def test_nodes_taken_back_from_the_autoscaler_are_not_removed_for_a_day(
    kb: EmbeddedKnowledgeBase,
) -> None:
    actuator = Recorder(two_half_empty_nodes(), unremoved=("a", "b"))
    report, state = cycle(
        1000, CycleState(stable_since=0), settings(), Script([STABLE]), actuator, kb
    )
    assert report.outcome is Outcome.STAYED, report.reason
    assert actuator.calls == []
    assert dict(state.kept) == {"a": 1000, "b": 1000}
    actuator.unremoved = ()
    later, state = cycle(1000 + KEEP_S - 1, state, settings(), Script([STABLE]), actuator, kb)
    assert later.outcome is Outcome.STAYED
    day, state = cycle(1000 + KEEP_S, state, settings(), Script([STABLE]), actuator, kb)
    assert day.outcome is Outcome.ACTED
    assert state.kept == ()


def test_a_dry_run_takes_no_node_back(kb: EmbeddedKnowledgeBase) -> None:
    actuator = Recorder(two_half_empty_nodes(), unremoved=("a",))
    cycle(
        1000, CycleState(stable_since=0), settings(), Script([STABLE]), actuator, kb, dry_run=True
    )
    assert actuator.reclaims == 0
