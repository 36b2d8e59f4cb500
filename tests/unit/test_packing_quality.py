"""The bin-packing heuristic against an exact MILP solver (HiGHS) on small random clusters."""

import pytest

from testkit.packing import compare, summarise

SEEDS = range(60)


@pytest.mark.parametrize("make_room", [False, True], ids=["plain", "make_room"])
def test_heuristic_is_sound_and_close_to_exact(make_room: bool) -> None:
    summary = summarise([compare(seed, make_room) for seed in SEEDS])
    # never claims a drain that does not exist (every heuristic plan is also replay-checked)
    assert summary["drains_wrong"] == 0
    # finds a re-placement for (nearly) every node the exact solver can drain
    assert summary["drain_agreement"] >= 0.97
    # removing only whole nodes' pods stays close to the cheapest full repack
    assert summary["mean_cost_gap"] <= 0.05
    assert summary["share_of_possible_saving"] >= 0.9


def test_making_room_drains_nodes_the_plain_search_misses() -> None:
    plain = summarise([compare(seed, make_room=False) for seed in SEEDS])
    making_room = summarise([compare(seed, make_room=True) for seed in SEEDS])
    assert making_room["drains_missed"] < plain["drains_missed"]
