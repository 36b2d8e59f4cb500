"""The bin-packing heuristic against an exact MILP solver (HiGHS) on small random clusters."""

from testkit.packing import compare, summarise


def test_heuristic_is_sound_and_close_to_exact() -> None:
    summary = summarise([compare(seed) for seed in range(60)])
    # never claims a drain that does not exist (every heuristic plan is also replay-checked)
    assert summary["drains_wrong"] == 0
    # finds a re-placement for (nearly) every node the exact solver can drain
    assert summary["drain_agreement"] >= 0.97
    # removing only whole nodes' pods stays close to the cheapest full repack
    assert summary["mean_cost_gap"] <= 0.05
    assert summary["share_of_possible_saving"] >= 0.9
