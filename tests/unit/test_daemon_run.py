"""The daemon's pieces that need no cluster: exit statuses, the on-demand knowledge base, the
moderator's error handling and what a cycle logs."""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from apscheduler.jobstores.base import JobLookupError

from knowledge.base import KnowledgeError
from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.lazy import LazyKnowledge
from knowledge.memory import MemoryKnowledge
from testkit.builders import cluster, node, pod
from tuner.analyse.decision import analyse
from tuner.cli import main
from tuner.cycle import CycleReport, Outcome, Ports, TransitionResult
from tuner.daemon.cycle_log import log_cycle
from tuner.daemon.run import ONCE_EXIT
from tuner.errors import ServiceError
from tuner.model.execution import Execution, execution_of
from tuner.model.load import Load
from tuner.model.movability import Policy, assess
from tuner.model.onboarding import Placement
from tuner.model.window_report import Verdict, WindowReport
from tuner.moderator import JOB, Moderator
from tuner.plan.actions import Migrate
from tuner.report.build import PlanReport, build_report
from tuner.settings import Analyse, Pricing, Settings, Windows


def test_every_outcome_has_its_own_exit_status() -> None:
    assert set(ONCE_EXIT) == set(Outcome)
    codes = [code for outcome, code in ONCE_EXIT.items() if outcome is not Outcome.PLANNED]
    assert len(set(codes)) == len(codes)
    assert ONCE_EXIT[Outcome.ACTED] == ONCE_EXIT[Outcome.PLANNED] == 0


def test_bad_settings_are_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "settings.json"
    bad.write_text('{"daemon": {"leader_election": {"lease_duration_s": 1}}}')
    assert main(["run", "--settings", str(bad), "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "daemon.leader_election.lease_duration_s" in err[0]


def test_an_unreachable_knowledge_base_is_retried_on_the_next_call(tmp_path: Path) -> None:
    store = tmp_path / "not-yet" / "kb.sqlite"
    kb = LazyKnowledge(lambda: EmbeddedKnowledgeBase(store))
    with pytest.raises(KnowledgeError):
        kb.find_by_load(100.0, 0.1)
    assert kb.size() is None
    store.parent.mkdir()  # the store becomes reachable
    assert kb.find_by_load(100.0, 0.1) == []
    assert kb.size() == 0
    c = cluster([node("a")], [pod("w-1", "a")])
    execution = execution_of(c, assess(c, Policy(frozenset())), Pricing(), 100.0, 0, 600)
    kb.record(execution)
    assert kb.size() == 1
    assert kb.delete(execution.id)
    assert kb.size() == 0
    kb.close()


class Unlistable(MemoryKnowledge):
    """A store whose executions must not be read to be counted."""

    def list(self, limit: int | None = None) -> list[Execution]:
        raise AssertionError("the size must not read every execution")


def test_the_knowledge_base_size_reads_no_execution() -> None:
    store = Unlistable()
    c = cluster([node("a")], [pod("w-1", "a")])
    store.record(execution_of(c, assess(c, Policy(frozenset())), Pricing(), 100.0, 0, 600))
    assert LazyKnowledge(lambda: store).size() == 1


@dataclass
class Failing:
    """An observer whose service is down (a real Prometheus cannot be made to raise this)."""

    def observe(self, start: float, end: float) -> WindowReport:
        raise ServiceError("prometheus: connection refused")


class NothingLeft:
    """An actuator used for nothing but the cycle's first step: no node to take back."""

    def reclaim_unremoved(self, now: float) -> tuple[str, ...]:
        return ()

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        return ()


def test_a_cycle_that_raises_is_reported_as_an_error_and_retried(tmp_path: Path) -> None:
    settings = Settings(windows=Windows(measure_s=600, retry_s=0.01))
    reports: list[CycleReport] = []
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        ports = Ports(Failing(), NothingLeft(), kb)  # type: ignore[arg-type]
        moderator = Moderator(settings, ports, on_cycle=lambda r, _s: reports.append(r))
        moderator.run_forever(max_cycles=2)
    assert [r.outcome for r in reports] == [Outcome.ERROR, Outcome.ERROR]
    assert "connection refused" in reports[0].reason
    assert reports[0].next_in == 0.01


class Needed(NothingLeft):
    """An actuator with a node that pending pods need: stops the moderator once taken back."""

    def __init__(self) -> None:
        self.moderator: Moderator | None = None
        self.taken = 0

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        self.taken += 1
        if self.moderator is not None:
            threading.Thread(target=self.moderator.stop, daemon=True).start()
        return ("node-1",)


def test_the_moderator_takes_needed_nodes_back_between_cycles(tmp_path: Path) -> None:
    settings = Settings(windows=Windows(measure_s=600, retry_s=0.01))
    actuator = Needed()
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        ports = Ports(Failing(), actuator, kb)  # type: ignore[arg-type]
        moderator = Moderator(settings, ports)
        actuator.moderator = moderator
        moderator.run_forever(max_cycles=1000)  # bounded: the take-back job stops it first
        assert actuator.taken >= 1
        assert moderator.cycles < 1000
        taken = actuator.taken
        assert Moderator(settings, ports, dry_run=True).take_back() == ()
        assert actuator.taken == taken  # a dry run never takes a node back


def test_the_loop_goes_on_when_reporting_a_failed_cycle_fails(tmp_path: Path) -> None:
    settings = Settings(windows=Windows(measure_s=600, retry_s=0.01))
    seen: list[Outcome] = []

    def broken_reporter(report: CycleReport, _seconds: float) -> None:
        seen.append(report.outcome)
        raise RuntimeError("metrics exporter broke")

    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        ports = Ports(Failing(), NothingLeft(), kb)  # type: ignore[arg-type]
        moderator = Moderator(settings, ports, on_cycle=broken_reporter)
        moderator.run_forever(max_cycles=3)
    assert seen == [Outcome.ERROR] * 3


def _removal_plan() -> PlanReport:
    """The plan that empties node a of two (its pod migrated to b, then a removed)."""
    s = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0),
    )
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    return build_report(c, s, analyse(c, s, [], random.Random(0)))


def test_a_cycle_logs_window_verdict_load_costs_decision_and_each_action(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plan = _removal_plan()
    window = WindowReport(Verdict.STABLE, "nothing changed", Load.scalar(42.0), 0, 600, 0)
    first = plan.actions[:1]  # verified where the scheduler put it: the workload not onboarded
    result = TransitionResult(first, False, "pod landed on node c", eviction_only=first)
    report = CycleReport(
        Outcome.FAILED,
        0,
        600,
        "stopped",
        600,
        window,
        Load.scalar(42.0),
        plan,
        result,
        recorded="abc",
    )
    with caplog.at_level(logging.INFO):
        log_cycle(report, logging.getLogger("tuner.daemon"))
    records = caplog.records
    assert any(getattr(r, "verdict", None) == "stable" and r.load == 42.0 for r in records)
    (options,) = [r for r in records if hasattr(r, "decision")]
    assert options.decision == "remove_nodes"
    assert options.cost_current == 8.0 and options.cost_removal == "4.0000"
    assert options.cost_previous is None  # no previous deployment for this load
    statuses = [r.status for r in records if hasattr(r, "action")]
    assert statuses == ["verified", "failed", *["not started"] * (len(plan.actions) - 2)]
    verified = next(r for r in records if getattr(r, "status", None) == "verified")
    assert verified.getMessage().endswith(
        "verified (placement not controlled: not onboarded, the scheduler chose the node)"
    )
    assert verified.placement == Placement.EVICTION_ONLY.value
    assert all(r.outcome == "failed" for r in records)


def test_a_migration_that_landed_elsewhere_says_where_in_the_cycle_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plan = _removal_plan()
    (first, *_) = plan.actions
    assert isinstance(first, Migrate)
    result = TransitionResult((first,), False, "stopped", landed_elsewhere=((first, "c"),))
    report = CycleReport(Outcome.FAILED, 0, 600, "stopped", 600, plan=plan, result=result)
    with caplog.at_level(logging.INFO):
        log_cycle(report, logging.getLogger("tuner.daemon"))
    (verified,) = [r for r in caplog.records if getattr(r, "status", None) == "verified"]
    assert verified.getMessage().endswith(
        f"verified (landed elsewhere: on c, not its destination {first.target}: the "
        "scheduler's other scores outweighed the label)"
    )
    assert verified.landed == "c"


def test_a_stop_racing_the_retirement_of_a_cycle_job_ends_the_loop_quietly(
    tmp_path: Path,
) -> None:
    """APScheduler 3 retires a one-shot job right after submitting it; when a stop sets its
    state to stopped in between, the retirement raises ``JobLookupError`` out of ``start()``
    (seen about one run in five under load). After a stop that is the end asked for; before
    one it is a real error."""
    settings = Settings(windows=Windows(measure_s=600, retry_s=0.01))
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        ports = Ports(Failing(), NothingLeft(), kb)  # type: ignore[arg-type]
        for stopped in (True, False):
            moderator = Moderator(settings, ports)

            def racing_start(moderator: Moderator = moderator, stopped: bool = stopped) -> None:
                if stopped:
                    moderator._stopped.set()
                raise JobLookupError(f"{JOB}-1")

            moderator._scheduler.start = racing_start  # type: ignore[method-assign]
            if stopped:
                moderator.run_forever()
            else:
                with pytest.raises(JobLookupError):
                    moderator.run_forever()


def _one_stable_cycle(load: float, **window: object) -> CycleReport:
    s = Settings(analyse=Analyse(excluded_namespaces=frozenset()))
    c = cluster([node("a")], [pod("w-1", "a")])
    plan = build_report(c, s, analyse(c, s, [], random.Random(0)))
    seen = WindowReport(Verdict.STABLE, "nothing changed", Load.scalar(load), 0, 600, 0, **window)  # type: ignore[arg-type]
    served = Load.scalar(load)
    return CycleReport(Outcome.STAYED, 0, 600, "stay", 600, seen, served, plan, recorded="abc")


def test_loads_are_logged_rounded(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        log_cycle(_one_stable_cycle(237.99615894928814), logging.getLogger("tuner.daemon"))
    text = caplog.text
    assert "recorded as abc (load 237.996)" in text
    assert "237.99615894928814" not in text


def test_a_single_cycle_says_nothing_of_a_next_one(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        log_cycle(_one_stable_cycle(10.0), logging.getLogger("tuner.daemon"), once=True)
    assert "next in" not in caplog.text
    assert caplog.records[-1].getMessage() == "cycle stayed: stay"
    caplog.clear()
    with caplog.at_level(logging.INFO):
        log_cycle(_one_stable_cycle(10.0), logging.getLogger("tuner.daemon"))
    assert caplog.records[-1].getMessage() == "cycle stayed; next in 600 s: stay"


def test_a_load_measured_over_part_of_the_window_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cycle = _one_stable_cycle(7.0, load_covered_from=500.0, load_warning="only the last 100 s")
    with caplog.at_level(logging.INFO):
        log_cycle(cycle, logging.getLogger("tuner.daemon"))
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage().endswith(": only the last 100 s")
