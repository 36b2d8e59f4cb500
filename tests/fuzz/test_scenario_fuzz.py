"""Fuzzing scenario files: any JSON value anywhere in a valid scenario is either built or refused
with one InputError line, never another exception (nothing is simulated here); hostile numbers
(not finite, huge, thousands of digits, integers written as floats), texts (control characters,
over-long values, bad quantities), output targets (FIFOs, devices, dangling links, links among
the outputs) and flags through the real command line are refused in one line naming the field,
before anything is simulated or written."""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import assert_refused, run
from tests.fuzz.strategies import BAD_ARGUMENT, BAD_QUANTITY, HUGE, NEGATIVE, NOT_FINITE
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


# --- issues 27 and 28: hostile values, written as JSON text, and hostile output targets ------

HOSTILE = '"__HOSTILE__"'
"""Where a document's raw hostile value goes."""
INTEGERS = [
    ("seed",),
    ("pools", 0, "max"),
    ("pools", 0, "initial"),
    ("applications", 0, "copies"),
    ("services", 0, "replicas"),
    ("services", 1, "hpa", "max"),
    ("services", 0, "pdb_max_unavailable"),
    ("loads", "shop", "first_day"),
]
NUMBERS = [("hours",), ("loads", "shop", "peak"), ("services", 1, "cpu_per_load"), *INTEGERS]
TEXTS = [
    ("name",),
    ("title",),
    ("pools", 0, "name"),
    ("services", 0, "namespace"),
    ("services", 0, "source"),
]
QUANTITIES = [("services", 1, "cpu"), ("services", 1, "memory")]
WHOLE_AS_FLOAT = st.integers(min_value=1, max_value=20).map(lambda n: f"{n}.0")
BAD_NUMBER = st.one_of(
    NOT_FINITE,
    HUGE,
    NEGATIVE,
    st.integers(min_value=41, max_value=6000).map(lambda n: "9" * n),
)
CONTROL = st.sampled_from(["\n", "\r", "\x1b[31m", "\x00", "\u2028", "\u0085", "\u202e"])
BAD_TEXT = st.one_of(
    st.tuples(st.text(max_size=20), CONTROL, st.text(max_size=5)).map("".join),
    st.integers(min_value=301, max_value=20_000).map(lambda n: "s" * n),
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose files must not change: a previous run's outputs."""
    folder = tmp_path_factory.mktemp("scenario-world")
    (folder / "out").mkdir()
    (folder / "out" / "results.md").write_text("previous")
    return folder


def _hostile(world: Path, path: tuple[Any, ...], raw: str) -> list[str]:
    """``tuner simulate`` on VALID with the raw JSON text ``raw`` at ``path``."""
    text = json.dumps(_set(VALID, path, "__HOSTILE__")).replace(HOSTILE, raw)
    scenario = world.parent / f"{world.name}-scenario.json"
    scenario.write_text(text, encoding="utf-8")
    return ["simulate", "--scenario", str(scenario), "--output", str(world / "out")]


def _field(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


@settings(max_examples=60, deadline=None, database=None)
@given(path=st.sampled_from(NUMBERS), raw=BAD_NUMBER)
def test_hostile_numbers_name_their_field(world: Path, path: tuple[Any, ...], raw: str) -> None:
    assert_refused("scenarios", _hostile(world, path, raw), world, _field(path))


@settings(max_examples=30, deadline=None, database=None)
@given(path=st.sampled_from(INTEGERS), raw=WHOLE_AS_FLOAT)
def test_integers_written_as_floats_name_their_field(
    world: Path, path: tuple[Any, ...], raw: str
) -> None:
    argv = _hostile(world, path, raw)
    assert_refused("scenarios", argv, world, f"{_field(path)}: {raw} is not allowed")


@settings(max_examples=60, deadline=None, database=None)
@given(
    case=st.tuples(st.sampled_from(TEXTS), BAD_TEXT)
    | st.tuples(st.sampled_from(QUANTITIES), BAD_TEXT | BAD_QUANTITY)
)
def test_hostile_texts_name_their_field_in_a_short_line(
    world: Path, case: tuple[tuple[Any, ...], str]
) -> None:
    path, text = case
    argv = _hostile(world, path, json.dumps(text))
    assert_refused("scenarios", argv, world, _field(path))
    assert len(run(argv)[1]) < 500


TARGETS = ["fifo", "device", "dangling", "under-a-file", "link-in-output", "readme-fifo"]


@settings(max_examples=12, deadline=None, database=None)
@given(kind=st.sampled_from(TARGETS), hours=st.sampled_from(["0.01", "0.25"]))
def test_hostile_output_targets_are_refused_before_simulating(
    world: Path, kind: str, hours: str
) -> None:
    scenario = world.parent / f"{world.name}-valid.json"
    scenario.write_text(json.dumps(VALID))
    with tempfile.TemporaryDirectory(dir=world.parent) as scratch:
        place = Path(scratch)
        (place / "file").write_text("x")
        os.mkfifo(place / "fifo")
        (place / "dangling").symlink_to(place / "missing")
        (place / "out").mkdir()
        (place / "out" / "results.json").symlink_to(place / "file")
        output, readme = {
            "fifo": (place / "fifo", None),
            "device": (Path("/dev/null"), None),
            "dangling": (place / "dangling", None),
            "under-a-file": (place / "file" / "out", None),
            "link-in-output": (place / "out", None),
            "readme-fifo": (place / "new", place / "fifo"),
        }[kind]
        argv = ["simulate", "--scenario", str(scenario), "--hours", hours]
        argv += ["--output", str(output)]
        argv += [] if readme is None else ["--readme", str(readme)]
        assert_refused("scenarios", argv, place)


TOO_FEW_HOURS = st.floats(min_value=1e-320, max_value=0.0099).map(repr)
BAD_HOURS = BAD_ARGUMENT | TOO_FEW_HOURS | st.sampled_from(["1e-300", "0", "336.5", "1e300"])
BAD_SPEED = BAD_ARGUMENT | st.floats(min_value=1e-320, max_value=0.99).map(repr)
BAD_SPEED |= st.sampled_from(["1e-300", "0", "3601", "1e300"])


@settings(max_examples=30, deadline=None, database=None)
@given(
    case=st.tuples(st.just(["simulate", "--scenario", "thesis-wide", "--hours"]), BAD_HOURS)
    | st.tuples(st.just(["demo", "--hours"]), BAD_HOURS)
    | st.tuples(st.just(["demo", "--speed"]), BAD_SPEED)
)
def test_hostile_simulation_flags_are_refused(world: Path, case: tuple[list[str], str]) -> None:
    option, value = case
    assert_refused("scenarios", [*option, value], world, option[-1])
