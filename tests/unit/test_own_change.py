"""The decline rule tells the tuner's own change from the load's: in the window right after a
transition (and in no later one), the workloads its verified moves started pods of (and the nodes
they landed on, when nothing else grew) count as settled, while no more pods of them run than it
left; anything else that grew still refuses; the cycle remembers what each transition changed and
acts again at the next look."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from knowledge.memory import MemoryKnowledge
from testkit.builders import pod
from tests.unit.test_cycle import Recorder
from tests.unit.test_decline import WEB, Diurnal, forecast, two_nodes_one_web_pod_each, window
from tuner.cycle import CycleState, Outcome, Ports, TransitionResult, run_cycle
from tuner.model.acting import Acting, decline_settle_s
from tuner.model.cluster import Workload
from tuner.model.forecast import DAY_S
from tuner.model.window_report import OwnChange, Unsettled, WindowReport, decline_release
from tuner.own_moves import own_change
from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode
from tuner.settings import Analyse, Pricing, Settings, Windows

API = Workload("default", "Deployment", "api")
SHOP = Workload("default", "Deployment", "shop")
LEFT = ("a node left",)
MOVED_ONTO_A = Unsettled(frozenset({"a"}), frozenset({WEB}), LEFT, only_leaving=True)
"""The window after the tuner moved a web pod onto a and removed a node: web started a pod on
a, a node left, nothing else changed."""
OWN = OwnChange(0.0, 0.0, ((WEB, 2),), frozenset({"a"}))


def test_the_window_after_the_tuners_own_moves_is_released_without_it_refused() -> None:
    assert decline_release(window(MOVED_ONTO_A), forecast()).kind == "grown"
    release = decline_release(window(MOVED_ONTO_A), forecast(), OWN)
    assert release.holds and "only the tuner's own moves changed" in release.reason
    assert release.moved == ((WEB, 2),) and release.nodes == {"a"}
    acting = Acting(window(MOVED_ONTO_A), True, release)
    assert acting.unsettled_workloads == frozenset() and acting.unsettled_nodes == frozenset()


def test_a_change_before_the_window_or_another_workload_growing_is_not_explained() -> None:
    later = replace(OWN, at=1.0, until=1.0)  # checked from 0: it saw more than the change
    assert decline_release(window(MOVED_ONTO_A), forecast(), later).kind == "grown"
    earlier = replace(OWN, at=-60.0, until=-60.0)  # checked from 0: not the window right after
    assert decline_release(window(MOVED_ONTO_A), forecast(), earlier).kind == "grown"
    warm = replace(OWN, at=-60.0, until=30.0)  # checked from within the warm-up after it
    assert decline_release(window(MOVED_ONTO_A), forecast(), warm).holds
    both = replace(MOVED_ONTO_A, workloads=frozenset({WEB, API}))
    assert decline_release(window(both), forecast(), OWN).kind == "grown"
    shrinking = replace(both, workloads=frozenset({WEB, API, SHOP}), shrinking=frozenset({SHOP}))
    release = decline_release(window(shrinking), forecast(), OWN)
    assert release.holds and release.moved == ((WEB, 2),)
    assert release.nodes == frozenset()  # api grew: the nodes pods started on stay out


def test_a_moved_workload_that_grew_since_refuses_once_the_cluster_is_read() -> None:
    release = decline_release(window(MOVED_ONTO_A), forecast(), OWN)
    assert release.left_as_moved({WEB: 2}).holds
    assert release.left_as_moved({WEB: 1}).holds  # its HPA shrank it since
    grew = release.left_as_moved({WEB: 3})
    assert (
        not grew.holds and grew.kind == "grown" and "grew since the tuner moved it" in grew.reason
    )


def test_own_change_counts_the_workloads_started_and_the_nodes_they_landed_on() -> None:
    cluster = two_nodes_one_web_pod_each()
    web_1, web_2 = cluster.pods
    api = pod("api-1", "b", workload="api")
    api_workload = api.workload
    moved = Migrate(web_1, "b")
    added = Add(WEB, "a", web_1.requests)
    placed = Migrate(web_2, "a")
    result = TransitionResult(
        (
            moved,
            added,
            placed,
            Remove(web_2),
            RemoveNode("c"),
            Add(api_workload, "b", api.requests),
        ),
        True,
        eviction_only=(placed,),
        landed_elsewhere=((added, "c"),),
    )
    own = own_change(cluster, result, 5.0, 35.0)
    assert (own.at, own.until) == (5.0, 35.0)
    assert dict(own.counts) == {WEB: 2, api_workload: 1}  # 2 + 1 added - 1 removed; 0 + 1
    assert own.nodes == {"b", "c"}  # web-1's target, the add where it landed; not the placed one


class OwnMoves:
    """Every window sees web start a pod on a and a node leave (the tuner's last change)."""

    def observe(self, start: float, end: float) -> WindowReport:
        return replace(window(MOVED_ONTO_A), start=start, end=end, checked_from=start)


FALLING_AT = 10 * DAY_S + 0.75 * DAY_S
"""A time the diurnal history is falling at."""
SETTINGS = Settings(
    pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
    analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0.0),
    windows=Windows(measure_s=600.0),
)
CHANGED = CycleState(
    stable_since=FALLING_AT - 120, own=replace(OWN, at=FALLING_AT - 120, until=FALLING_AT - 120)
)
"""The state two minutes after the tuner's last change (instantaneous, then)."""


def test_the_cycle_acts_at_the_next_look_after_its_own_change_during_a_decline() -> None:
    falling_at, s, state = FALLING_AT, SETTINGS, CHANGED
    actuator = Recorder(two_nodes_one_web_pod_each())
    ports = Ports(OwnMoves(), actuator, MemoryKnowledge(), history=Diurnal())
    report, after = run_cycle(falling_at, state, s, ports, random.Random(0))
    assert report.decline is not None and report.decline.holds
    assert report.outcome is Outcome.ACTED and len(actuator.calls) == 1
    assert after.own is not None and after.own.at == after.own.until == falling_at
    without = Recorder(two_nodes_one_web_pod_each())
    ports = Ports(OwnMoves(), without, MemoryKnowledge(), history=Diurnal())
    report, _ = run_cycle(falling_at, replace(state, own=None), s, ports, random.Random(0))
    assert report.decline is not None and report.decline.kind == "grown"
    assert without.calls == []


class Slow(Recorder):
    """A transition that takes ``took_s`` by the actuator's clock (evictions, pods started)."""

    took_s: float = 40.0

    def carry_out(self, actions: Sequence[Action]) -> TransitionResult:
        return replace(super().carry_out(actions), took_s=self.took_s)


def test_the_look_after_a_transition_that_took_time_still_tells_its_own_moves() -> None:
    """The warm-up, and the window right after the change, count from the transition's end:
    a window checked from when it ended sees all of it and nothing before it. Counted from when
    it began, the next look during a decline (checked from the end) was never right after it,
    and every own move refused that look as a workload that grew."""
    falling_at, s, state = FALLING_AT, SETTINGS, CHANGED
    slow = Slow(two_nodes_one_web_pod_each())
    ports = Ports(OwnMoves(), slow, MemoryKnowledge(), history=Diurnal())
    report, after = run_cycle(falling_at, state, s, ports, random.Random(0))
    assert report.outcome is Outcome.ACTED
    ended = falling_at + Slow.took_s
    assert after.stable_since == ended and after.own is not None
    assert (after.own.at, after.own.until) == (falling_at, ended)
    next_look = ended + decline_settle_s(s)  # its window is checked from the end
    report, _ = run_cycle(next_look, after, s, ports, random.Random(0))
    assert report.decline is not None and report.decline.holds, report.reason
    assert report.decline.moved == ((WEB, 2),)
