"""Which migrations of a plan move at once (tuner.plan.waves)."""

from __future__ import annotations

import pytest

from testkit.builders import pod
from tuner.model.cluster import Workload
from tuner.plan.actions import Action, Migrate, RemoveNode
from tuner.plan.waves import spare, unavailable_allowed, wave


def _move(name: str, source: str, target: str, workload: str = "web") -> Migrate:
    return Migrate(pod(name, source, workload=workload), target)


def _two(workload: Workload) -> int:
    return 2


@pytest.mark.parametrize(
    ("max_unavailable", "replicas", "allowed"),
    [
        (None, 8, 2),  # the default 25 %, rounded down
        (None, 7, 1),
        (None, 3, 1),  # 0 rounded down: still one at a time
        ("50%", 5, 2),
        ("100%", 4, 4),
        (3, 10, 3),
        (0, 10, 1),
        ("many", 10, 1),
    ],
)
def test_a_workload_may_lose_what_its_rollout_takes_out_at_once(
    max_unavailable: int | str | None, replicas: int, allowed: int
) -> None:
    assert unavailable_allowed(max_unavailable, replicas) == allowed


@pytest.mark.parametrize(
    ("replicas", "utilisation", "spared"),
    [
        (8, 0.5, 4),  # at its HPA's 50 % target half the pods stand in for the rest
        (8, 0.8, 1),  # 8 x 0.8 = 6.4 pods' requests: seven pods hold it, not six
        (8, 0.75, 2),
        (4, 1.1, -1),  # over its requests already: no spare pod (the allowance's floor is 1)
        (8, None, None),  # nothing measured: no limit from the load
    ],
)
def test_a_busy_workload_spares_only_what_its_other_pods_can_stand_in_for(
    replicas: int, utilisation: float | None, spared: int | None
) -> None:
    assert spare(replicas, utilisation) == spared


def test_a_node_of_several_workloads_moves_at_once_within_each_allowance() -> None:
    plan: list[Action] = [
        _move("web-1", "n1", "n2"),
        _move("api-1", "n1", "n3", "api"),
        _move("web-2", "n1", "n3"),
        _move("web-3", "n1", "n2"),  # a third web pod: over web's allowance of two
        RemoveNode("n1"),
    ]
    assert wave(plan, _two, 10) == 3
    assert wave(plan[3:], _two, 10) == 1
    assert wave(plan[4:], _two, 10) == 1


def test_a_workload_moving_one_pod_is_never_asked_its_allowance() -> None:
    """The allowance is at least one: reading it (the daemon asks the API) is only needed for a
    workload's second pod in a wave."""
    asked: list[Workload] = []

    def allowance(workload: Workload) -> int:
        asked.append(workload)
        return 2

    plan: list[Action] = [_move("web-1", "n1", "n2"), _move("api-1", "n1", "n3", "api")]
    assert wave(plan, allowance, 10) == 2
    assert asked == []
    assert wave([*plan, _move("web-2", "n1", "n3")], allowance, 10) == 3
    assert [w.name for w in asked] == ["web"]


def test_the_limit_and_a_lone_allowance_keep_moves_one_at_a_time() -> None:
    plan = [_move("web-1", "n1", "n2"), _move("api-1", "n1", "n3", "api")]
    assert wave(plan, _two, 1) == 1
    assert wave([plan[0], _move("web-2", "n1", "n2")], lambda w: 1, 10) == 1


def test_a_move_onto_a_node_another_leaves_waits_for_it() -> None:
    # api-1 leaves n2 to make room there for web-1: web-1 must not start before it is gone
    freed = [_move("api-1", "n2", "n3", "api"), _move("web-1", "n1", "n2")]
    assert wave(freed, _two, 10) == 1
    # and the other way round: a move off a node another member moves onto
    back = [_move("web-1", "n1", "n2"), _move("api-1", "n2", "n3", "api")]
    assert wave(back, _two, 10) == 1


def test_a_move_onto_a_node_still_to_be_provisioned_is_not_in_a_wave() -> None:
    plan = [_move("web-1", "n1", "n2"), _move("api-1", "n1", "general-8+1", "api")]
    assert wave(plan, _two, 10) == 1
    assert wave([], _two, 10) == 0
