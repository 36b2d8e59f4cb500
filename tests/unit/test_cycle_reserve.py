"""Each cycle holds the room its forecast's rise asks for, whatever its window, and so does the
hold between cycles; a rise due beyond a node's start-up and the next hold is left to a later
one; a dry run only reports it (tuner.cycle)."""

from __future__ import annotations

import random
import threading
from dataclasses import replace

import numpy as np

from knowledge.memory import MemoryKnowledge
from testkit.builders import cluster, node, pod
from tests.unit.test_forecast_visible import Stable, Still
from tuner.cycle import CycleReport, Outcome, Ports, hold_reserve, run_cycle
from tuner.cycle import CycleState as State
from tuner.model.cluster import Cluster, Hpa, Workload
from tuner.model.forecast import DAY_S, LoadSeries
from tuner.model.load import SCALAR, Load
from tuner.model.reserve import Reserve, ReserveOutcome
from tuner.model.resources import Resources
from tuner.model.window_report import Verdict, WindowReport
from tuner.moderator import Moderator
from tuner.settings import ForecastSettings, Settings, Windows

NOW = 100_000.0


class Rising:
    """A week of a load of 100 that rose to 150 for an hour from ``ahead_s`` (two minutes)
    after now's time of day: a seasonal forecast of a rise, proven by the rises of the days
    before."""

    def __init__(self, ahead_s: float = 120.0) -> None:
        self.ahead_s = ahead_s

    def series(self, end: float) -> LoadSeries:
        t = np.arange(end - 7 * DAY_S + 60, end + 1, 60.0)
        rise = (NOW + self.ahead_s) % DAY_S
        load = np.where((t - rise) % DAY_S < 3600, 150.0, 100.0)
        return LoadSeries.of(t[0], 60.0, {SCALAR: load})


class Full(Still):
    """One 4-CPU node full of 4 web pods an HPA may take to 10."""

    def read(self) -> Cluster:
        pods = [pod(f"web-{i}", "a", cpu="1", memory="1Gi") for i in range(4)]
        full = cluster([node("a", instance_type="e2-standard-4")], pods)
        return replace(
            full, hpas=(Hpa("default", "web", Workload("default", "Deployment", "web"), 1, 10),)
        )


class Unstable:
    def observe(self, start: float, end: float) -> WindowReport:
        return WindowReport(
            Verdict.UNSTABLE, "a pod was pending", Load.scalar(1.0), start, end, start
        )


class Keeper:
    def __init__(self) -> None:
        self.held: list[Reserve] = []

    def hold(self, reserve: Reserve, now: float) -> ReserveOutcome:
        self.held.append(reserve)
        return ReserveOutcome(created=("p",) * len(reserve.nodes), standing=len(reserve.nodes))


def _cycle(
    keeper: Keeper | None,
    *,
    observer: object = None,
    state: State | None = None,
    dry_run: bool = False,
    history: Rising | None = None,
) -> CycleReport:
    ports = Ports(
        observer or Stable(), Full(), MemoryKnowledge(), history=history or Rising(), reserve=keeper
    )  # type: ignore[arg-type]
    settings = Settings(
        windows=Windows(measure_s=600), forecast=ForecastSettings(reserve_max_nodes=3)
    )
    report, _ = run_cycle(NOW, state or State(), settings, ports, random.Random(0), dry_run=dry_run)
    return report


def test_a_stable_cycle_holds_the_reserve_and_reports_it() -> None:
    keeper = Keeper()
    report = _cycle(keeper)
    (held,) = keeper.held
    assert [(n.pool, n.requests) for n in held.nodes] == [
        ("e2-standard-4", Resources(2000, 2 << 30))
    ]
    assert held.until == NOW + 720.0
    assert report.reserve == held and report.reserved is not None
    assert report.reserved.created == ("p",)


def test_waiting_and_unstable_cycles_hold_it_too() -> None:
    keeper = Keeper()
    waiting = _cycle(keeper, state=State(stable_since=NOW))
    unstable = _cycle(keeper, observer=Unstable())
    assert waiting.outcome is Outcome.WAITING and unstable.outcome is Outcome.UNSTABLE
    assert [len(r.nodes) for r in keeper.held] == [1, 1]
    assert waiting.reserved is not None and unstable.reserved is not None


def test_between_cycles_the_reserve_is_held_through_the_keeper_unless_off() -> None:
    keeper = Keeper()
    settings = Settings(forecast=ForecastSettings(reserve_max_nodes=3))
    ports = Ports(Stable(), Full(), MemoryKnowledge(), history=Rising(), reserve=keeper)  # type: ignore[arg-type]

    reserve, held = hold_reserve(NOW, settings, ports)

    assert keeper.held == [reserve] and reserve is not None and len(reserve.nodes) == 1
    assert held is not None and held.created == ("p",)
    off = Settings(forecast=ForecastSettings(reserve_max_nodes=0))
    assert hold_reserve(NOW, off, ports) == (None, None)
    assert hold_reserve(NOW, settings, replace(ports, reserve=None)) == (None, None)
    assert len(keeper.held) == 1


def test_a_rise_due_after_a_start_up_and_a_retry_is_left_to_a_later_cycle() -> None:
    keeper = Keeper()
    report = _cycle(keeper, history=Rising(ahead_s=300.0))  # due in 5 min, the lead is 3 min
    assert report.reserve is not None and report.reserve.nodes == ()
    assert "expected over the next 180 s" in report.reserve.reason
    later = _cycle(keeper, history=Rising(ahead_s=180.0))
    assert later.reserve is not None and len(later.reserve.nodes) == 1


def test_a_dry_run_reports_the_reserve_and_holds_nothing() -> None:
    keeper = Keeper()
    report = _cycle(keeper, dry_run=True)
    assert keeper.held == []
    assert report.reserve is not None and len(report.reserve.nodes) == 1
    assert report.reserved is None
    alone = _cycle(None, dry_run=True)  # no keeper: the dry run still says what it would hold
    assert alone.reserve is not None and len(alone.reserve.nodes) == 1


def test_without_a_keeper_nothing_is_reserved() -> None:
    report = _cycle(None)
    assert report.reserve is None and report.reserved is None


class Stopping(Keeper):
    """Stops the moderator at its third hold."""

    moderator: Moderator | None = None

    def hold(self, reserve: Reserve, now: float) -> ReserveOutcome:
        outcome = super().hold(reserve, now)
        if len(self.held) == 3 and self.moderator is not None:
            threading.Thread(target=self.moderator.stop, daemon=True).start()
        return outcome


def test_the_moderator_holds_the_reserve_between_cycles_every_retry() -> None:
    keeper = Stopping()
    settings = Settings(
        windows=Windows(measure_s=600, retry_s=0.01),
        forecast=ForecastSettings(reserve_max_nodes=3),
    )
    ports = Ports(Stable(), Full(), MemoryKnowledge(), history=Rising(), reserve=keeper)  # type: ignore[arg-type]
    moderator = Moderator(settings, ports, start_time=NOW)
    moderator.state = State(stable_since=NOW)  # the first cycle waits a whole window
    keeper.moderator = moderator

    watchdog = threading.Timer(30.0, moderator.stop)  # without holds between cycles: fail
    watchdog.start()
    moderator.run_forever(max_cycles=1000)  # the third hold stops it
    watchdog.cancel()

    assert moderator.cycles == 1 and len(keeper.held) >= 3
    assert all(len(r.nodes) == 1 for r in keeper.held)
    held = len(keeper.held)  # the scheduler has shut down: nothing holds any more
    Moderator(settings, ports, dry_run=True, start_time=NOW).hold_reserve()
    assert len(keeper.held) == held  # a dry run holds nothing
