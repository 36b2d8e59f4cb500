"""When the daemon looks again and what it counts as settled while the load swings: a load that
rose and then fell is falling from its peak on; on a window stable as a whole during a falling
load the forecast agrees with, a removal candidate waits one retry window, not the candidate
delay, and the cycle looks again a retry window later; after staying, it looks again when the
first candidate passes its delay; a window overlapping the last recorded is not recorded again."""

from __future__ import annotations

import random

from knowledge.memory import MemoryKnowledge
from tests.unit.test_cycle import Recorder
from tests.unit.test_decline import Diurnal, two_nodes_one_web_pod_each
from tuner.analyse.options import Refusal
from tuner.cycle import CycleReport, CycleState, Outcome, Ports, run_cycle
from tuner.model.forecast import DAY_S
from tuner.model.load import Load
from tuner.model.window_report import Scope, Verdict, WindowReport, falling
from tuner.settings import Analyse, Pricing, Settings, Windows

FALLING_AT = 10 * DAY_S + 0.75 * DAY_S
"""The diurnal history falls fastest here."""
RISING_AT = 10 * DAY_S + 0.25 * DAY_S


def test_a_load_that_rose_and_then_fell_is_falling_from_its_peak_on() -> None:
    assert falling((150.0, 180.0, 215.0, 190.0, 160.0))
    assert falling((200.0, 190.0, 215.0, 150.0))
    assert not falling((150.0, 180.0, 215.0))  # still at its highest
    assert not falling((150.0, 215.0, 160.0, 190.0))  # rose again after the peak
    assert not falling((150.0, 150.0))
    assert not falling((100.0, 120.0, 140.0, 160.0, 180.0, 200.0, 199.9))  # a dip, no decline
    assert not falling((200.0, 202.0, 199.0, 201.0, 198.0))  # a flat load's noise after a rise
    assert falling((200.0, 199.5, 199.0, 198.6))  # highest at the start: a slow decline


class Stable:
    """Nothing changed over any window (judged under the touched scope)."""

    def observe(self, start: float, end: float) -> WindowReport:
        load = Load.scalar(200.0)
        return WindowReport(
            Verdict.STABLE, "nothing changed", load, start, end, start, scope=Scope.TOUCHED
        )


def stable_cycle(
    now: float, state: CycleState, kb: MemoryKnowledge, delay: float
) -> tuple[CycleReport, CycleState, Recorder]:
    s = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=delay),
        windows=Windows(measure_s=600.0, retry_s=60.0),
    )
    actuator = Recorder(two_nodes_one_web_pod_each())
    ports = Ports(Stable(), actuator, kb, history=Diurnal())
    report, state = run_cycle(now, state, s, ports, random.Random(0))
    return report, state, actuator


def test_on_a_stable_window_while_the_load_falls_a_candidate_waits_only_one_look() -> None:
    kb = MemoryKnowledge()
    report, state, _ = stable_cycle(FALLING_AT, CycleState(), kb, 600.0)
    assert report.decline is not None and report.decline.holds
    assert report.plan is not None
    assert report.plan.analysis.proposals[0].refusal is Refusal.CANDIDATE_DELAY
    assert report.next_in == 30.0  # the decline's looks, not a whole window
    report, state, actuator = stable_cycle(FALLING_AT + 15, state, kb, 600.0)
    assert report.outcome is Outcome.STAYED and actuator.calls == []
    report, _, actuator = stable_cycle(FALLING_AT + 30, state, kb, 600.0)
    assert report.outcome is Outcome.ACTED and len(actuator.calls) == 1  # decline_retry_s


def test_a_window_overlapping_the_last_recorded_is_not_recorded_again() -> None:
    kb = MemoryKnowledge()
    report, state, _ = stable_cycle(FALLING_AT, CycleState(), kb, 600.0)
    assert report.recorded is not None and state.recorded_to == FALLING_AT
    report, state, _ = stable_cycle(FALLING_AT + 15, state, kb, 600.0)
    assert report.recorded is None and len(kb.list()) == 1
    report, _, _ = stable_cycle(FALLING_AT + 600, state, kb, 600.0)
    assert report.recorded is not None and len(kb.list()) == 2


def test_after_staying_the_cycle_looks_again_when_the_first_candidate_passes_its_delay() -> None:
    kb = MemoryKnowledge()
    report, state, _ = stable_cycle(RISING_AT, CycleState(), kb, 300.0)
    assert report.decline is not None and report.decline.kind == "not-falling"
    assert report.outcome is Outcome.STAYED
    assert report.next_in == 300.0  # not a whole window: the candidate is ripe then
    report, _, actuator = stable_cycle(RISING_AT + report.next_in, state, kb, 300.0)
    assert report.outcome is Outcome.ACTED and len(actuator.calls) == 1
    report, _, _ = stable_cycle(RISING_AT, CycleState(), kb, 900.0)
    assert report.next_in == 600.0  # a whole window comes first
