"""Fuzzing scenario files: any JSON value anywhere in a valid scenario is either built or refused
with one InputError line, never another exception (nothing is simulated here)."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_sim_scenario_file import VALID
from tuner.errors import InputError
from tuner.sim.engine import Scenario
from tuner.sim.scenario_file import build

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            found += _paths(value, (*prefix, i))
    return found


PATHS = _paths(VALID)


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    changed = copy.deepcopy(doc)
    target = changed
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return changed


def _outcome(doc: Any) -> str:
    try:
        built = build(doc, hours=0.1)
    except InputError as err:
        message = str(err)
        assert message and "\n" not in message
        return "refused"
    assert isinstance(built, Scenario)
    assert all(math.isfinite(p.node_type.price) for p in built.pools)
    return "built"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PATHS), JSON_VALUES)
def test_one_field_set_to_any_json_value(path: tuple[Any, ...], value: Any) -> None:
    _outcome(_set(VALID, path, value))


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6))
def test_any_json_object(doc: dict[str, Any]) -> None:
    assert _outcome(json.loads(json.dumps(doc))) == "refused"  # no "pools": never valid
