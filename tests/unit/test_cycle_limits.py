"""The limits in the analysis and the cycle: the eviction budget cuts or refuses a change, a
pause or a closed maintenance window holds it, and the ledger counts what really ran."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from testkit.builders import cluster, node, pod
from tests.unit.test_cycle import STABLE, Recorder, Script, settings, two_half_empty_nodes
from tuner.analyse.decision import analyse
from tuner.analyse.options import Choice, Refusal
from tuner.cycle import CycleState, Outcome, Ports, run_cycle
from tuner.errors import ServiceError
from tuner.holds import MemorySafeguards
from tuner.model.cluster import Cluster
from tuner.model.execution import execution_of
from tuner.model.limits import Budget, EvictionLimit, Limits, Spent
from tuner.model.maintenance import MaintenanceWindow
from tuner.model.movability import Policy, assess
from tuner.plan.actions import Migrate, RemoveNode
from tuner.settings import Settings

NOW = 1_000_000.0  # 1970-01-12 13:46:40 UTC


def with_limits(s: Settings, **limits: object) -> Settings:
    return replace(s, limits=Limits(**limits))  # type: ignore[arg-type]


def budget(per_hour: int | None, *spent: int) -> Budget:
    limits = Limits(cluster=EvictionLimit(per_hour=per_hour))
    return Budget.of(limits, [Spent.of(NOW - 60, {"default": n}) for n in spent], NOW)


def three_nodes() -> Cluster:
    """Three 4-core nodes; a and b hold one pod, c two: a and b can both go onto c."""
    return cluster(
        [node("a"), node("b"), node("c")],
        [pod("w-1", "a"), pod("w-2", "b"), pod("w-3", "c"), pod("w-4", "c")],
    )


def removal(c: Cluster, b: Budget | None, **analyse_settings: object):  # type: ignore[no-untyped-def]
    s = settings(max_parallel_removals=3, **analyse_settings)
    return analyse(c, s, [], random.Random(0), budget=b)


def test_the_budget_cuts_a_removal_to_the_nodes_it_allows() -> None:
    free = removal(three_nodes(), None)
    assert free.decision is Choice.REMOVE_NODES and len(free.change.remove_nodes) == 2
    assert free.limited is None
    cut = removal(three_nodes(), budget(3, 2))  # one eviction left this hour
    assert cut.decision is Choice.REMOVE_NODES
    assert len(cut.change.remove_nodes) == 1
    assert len(cut.change.relocations) == 1
    assert cut.limited is not None and "limits.evictions_per_hour 3 (2 in the last hour)" in (
        cut.limited
    )
    assert "no more within the eviction budget" in cut.reason


def test_a_spent_budget_refuses_the_removal_and_says_why() -> None:
    spent = removal(three_nodes(), budget(3, 3))
    assert spent.decision is Choice.STAY
    assert spent.change.relocations == ()
    assert "evictions would exceed limits.evictions_per_hour 3 (3 in the last hour)" in (
        spent.reason
    )
    assert spent.limited is not None


def test_an_option_over_budget_is_refused_whole() -> None:
    """The previous deployment (everything on one node) moves two pods: refused with one left;
    node removal is off, so the analysis stays."""
    before = cluster([node("a")], [pod("w-1", "a"), pod("w-2", "a"), pod("w-3", "a")])
    now = cluster(
        [node("a"), node("b"), node("c")], [pod("w-1", "a"), pod("w-2", "b"), pod("w-3", "c")]
    )
    s = settings(remove_nodes=False, replace_nodes=False)
    history = [execution_of(before, assess(before, Policy(frozenset())), s.pricing, 100, 0, 600)]
    chosen = analyse(now, s, history, random.Random(0))
    assert chosen.decision is Choice.PREVIOUS
    refused = analyse(now, s, history, random.Random(0), budget=budget(1))
    assert refused.decision is Choice.STAY
    (previous,) = [p for p in refused.proposals if p.option == "previous_deployment"]
    assert not previous.possible and previous.refusal is Refusal.BUDGET
    assert previous.reason.endswith(
        "but 2 evictions would exceed limits.evictions_per_hour 1 (0 in the last hour)"
    )
    assert previous.holds is None


def test_no_exploration_beyond_the_budget() -> None:
    lonely = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    s = settings(remove_nodes=False, replace_nodes=False, migration_chance=1.0)
    assert analyse(lonely, s, [], random.Random(0)).decision is Choice.RANDOM
    assert analyse(lonely, s, [], random.Random(0), budget=budget(0)).decision is Choice.STAY


class Unreadable(MemorySafeguards):
    """A ledger and a switch whose API calls fail (a fault the unit tests inject)."""

    def __init__(self, *, ledger: bool = True, switch: bool = True, write: bool = True) -> None:
        super().__init__(lambda: NOW)
        self.fail = {"spent": ledger, "paused": switch, "begin": write}

    def spent(self) -> Sequence[Spent]:
        if self.fail["spent"]:
            raise ServiceError("configmaps is forbidden")
        return super().spent()

    def paused(self) -> str | None:
        if self.fail["paused"]:
            raise ServiceError("connection refused")
        return super().paused()

    def begin(self, evicting: dict[str, int]) -> None:  # type: ignore[override]
        if self.fail["begin"]:
            raise ServiceError("etcd timeout")
        super().begin(evicting)


def run(  # type: ignore[no-untyped-def]
    s: Settings,
    safeguards: MemorySafeguards,
    actuator: Recorder,
    tmp_path: Path,
    *,
    now: float = NOW,
    dry_run: bool = False,
):
    with EmbeddedKnowledgeBase(tmp_path / "kb.sqlite") as kb:
        ports = Ports(Script([STABLE]), actuator, kb, safeguards)
        return run_cycle(now, CycleState(), s, ports, random.Random(0), dry_run=dry_run)


def test_the_ledger_counts_the_actions_that_ran(tmp_path: Path) -> None:
    ledger = MemorySafeguards(lambda: NOW + 5)
    report, _ = run(settings(), ledger, Recorder(two_half_empty_nodes()), tmp_path)
    assert report.outcome is Outcome.ACTED
    (record,) = ledger.records
    assert record == Spent(NOW + 5, (("default", 1),))
    failing = Recorder(three_nodes(), fail_at=0)  # the first migration fails: it may have evicted
    report, _ = run(settings(max_parallel_removals=2), ledger, failing, tmp_path)
    assert report.outcome is Outcome.FAILED
    assert [r.total for r in ledger.records] == [1, 1]
    ((planned, _),) = failing.calls
    assert sum(isinstance(a, Migrate) for a in planned) == 2


def test_a_spent_budget_holds_the_cycle(tmp_path: Path) -> None:
    s = with_limits(settings(), cluster=EvictionLimit(per_day=1))
    ledger = MemorySafeguards(lambda: NOW)
    ledger.records = [Spent.of(NOW - 3600, {"default": 1})]
    actuator = Recorder(two_half_empty_nodes())
    report, _ = run(s, ledger, actuator, tmp_path)
    assert report.outcome is Outcome.HELD
    assert actuator.calls == []
    assert (
        report.hold is not None and "limits.evictions_per_day 1 (1 in the last day)" in report.hold
    )
    ledger.records = [Spent.of(NOW - 86400, {"default": 1})]  # a day later it is spent no more
    assert run(s, ledger, actuator, tmp_path)[0].outcome is Outcome.ACTED


def test_paused_it_plans_and_holds_then_resumes(tmp_path: Path) -> None:
    switch = MemorySafeguards(lambda: NOW)
    switch.pause = "paused by annotation tuner.dev/paused='true'"
    actuator = Recorder(two_half_empty_nodes())
    report, state = run(settings(), switch, actuator, tmp_path)
    assert report.outcome is Outcome.HELD
    assert report.paused == report.hold == switch.pause
    assert report.plan is not None and report.plan.actions
    assert report.reason.endswith(f"; not done: {switch.pause}")
    assert actuator.calls == [] and switch.records == []
    assert state.awaiting is None
    dry, _ = run(settings(), switch, actuator, tmp_path, dry_run=True)
    assert dry.outcome is Outcome.HELD and actuator.calls == []
    switch.pause = None
    assert run(settings(), switch, actuator, tmp_path)[0].outcome is Outcome.ACTED


def test_outside_every_maintenance_window_it_only_plans(tmp_path: Path) -> None:
    # NOW is 13:46:40 UTC: a window from 13:00 for an hour is open, one from 14:00 is not.
    opened = with_limits(settings(), maintenance_windows=(MaintenanceWindow("0 13 * * *", 3600),))
    later = with_limits(settings(), maintenance_windows=(MaintenanceWindow("0 14 * * *", 3600),))
    actuator = Recorder(two_half_empty_nodes())
    report, _ = run(later, MemorySafeguards(), actuator, tmp_path)
    assert report.outcome is Outcome.HELD
    assert report.hold == "outside maintenance window, next at 1970-01-12 14:00 UTC (UTC)"
    assert actuator.calls == []
    assert run(opened, MemorySafeguards(), actuator, tmp_path)[0].outcome is Outcome.ACTED
    ((actions, _),) = actuator.calls
    assert isinstance(actions[-1], RemoveNode)


@pytest.mark.parametrize(
    ("safeguards", "limited", "hold"),
    [
        (Unreadable(ledger=False, write=False), False, "the pause switch cannot be read"),
        (Unreadable(switch=False, write=False), True, "the eviction ledger cannot be read"),
        (Unreadable(ledger=False, switch=False), False, "the eviction ledger was not written"),
    ],
)
def test_a_safeguard_that_cannot_be_read_or_written_holds_the_change(
    tmp_path: Path, safeguards: Unreadable, limited: bool, hold: str
) -> None:
    s = with_limits(settings(), cluster=EvictionLimit(per_day=100)) if limited else settings()
    actuator = Recorder(two_half_empty_nodes())
    report, _ = run(s, safeguards, actuator, tmp_path)
    assert report.outcome is Outcome.HELD
    assert report.hold is not None and report.hold.startswith(hold)
    assert actuator.calls == []


def test_without_limits_the_ledger_is_not_read(tmp_path: Path) -> None:
    actuator = Recorder(two_half_empty_nodes())
    report, _ = run(settings(), Unreadable(switch=False, write=False), actuator, tmp_path)
    assert report.outcome is Outcome.ACTED
