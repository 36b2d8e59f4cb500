"""A scenario's ``speedup``: the simulator plays the same load faster, over a shorter run, and a
bad value is refused naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tuner.errors import InputError
from tuner.sim.scenario_file import build
from tuner.sim.scenarios import scenario

DOC: dict[str, Any] = {
    "name": "fast",
    "hours": 3,
    "pools": [{"name": "general", "node_type": "e2-standard-4", "min": 1, "max": 8, "initial": 2}],
    "applications": [{"app": "php-apache", "trace": "alibaba2018", "first_day": 1, "peak": 30}],
}


def test_speedup_plays_the_same_load_faster_over_a_shorter_run() -> None:
    slow = build(copy.deepcopy(DOC))
    fast = build({**copy.deepcopy(DOC), "speedup": 6})
    assert slow.speedup == 1 and fast.speedup == 6
    assert fast.duration == pytest.approx(slow.duration / 6)
    assert fast.warmup == pytest.approx(slow.warmup / 6)
    for t in (-fast.warmup, -17.0, 0.0, 123.4, 900.0, fast.duration):
        assert fast.load(t) == pytest.approx(slow.load(6 * t))
    assert fast.pools == slow.pools and fast.services == slow.services


def test_a_named_scenario_compresses_the_same_way() -> None:
    slow = scenario("thesis-wide")
    fast = slow.compressed(4)
    assert fast.duration == pytest.approx(slow.duration / 4)
    assert [fast.load(t) for t in (0.0, 600.0, 1200.0)] == [
        pytest.approx(slow.load(t)) for t in (0.0, 2400.0, 4800.0)
    ]
    assert slow.compressed(1) is slow


@pytest.mark.parametrize("value", [0, 0.5, 61, "6"])
def test_a_bad_speedup_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(InputError, match=r"^speedup: "):
        build({**copy.deepcopy(DOC), "speedup": value})
