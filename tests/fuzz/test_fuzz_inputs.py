"""Generated hostile settings, dumps, knowledge exports and command-line numbers fed to the real
command line (in-process through ``tuner.cli.main``; a few as real subprocesses at the end).

Every input is invalid by construction; each must end with exit status 2, one line on stderr
naming what is wrong, no traceback and no file changed. The number generated per run is
printed at the end of the session ("hostile inputs generated: N").
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge.embedded import EmbeddedKnowledgeBase
from tests.fuzz.harness import GENERATED, assert_refused, snapshot
from tests.fuzz.strategies import (
    BAD_ARGUMENT,
    BAD_NUMBER,
    BAD_QUANTITY,
    HUGE_INT,
    NEGATIVE,
    NOT_FINITE,
    WRONG_TYPE,
)
from tests.knowledge.test_contract import execution

FUZZ = settings(max_examples=90, deadline=None, derandomize=False, database=None)
HOSTILE = '"__HOSTILE__"'
"""Where a document's raw hostile value goes."""

NUMERIC_SETTINGS = [
    ("pricing", "price_per_core"),
    ("pricing", "price_per_gb"),
    ("analyse", "migration_chance"),
    ("analyse", "max_parallel_removals"),
    ("analyse", "min_saving_per_hour"),
    ("load", "delta"),
    ("windows", "measure_s"),
    ("windows", "retry_s"),
    ("prometheus", "timeout_s"),
    ("execute", "verify_timeout_s"),
    ("execute", "max_actions_per_cycle"),
    ("knowledge", "lookup_limit"),
    ("daemon", "metrics_port"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a knowledge store of two executions, settings naming it and a dump."""
    folder = tmp_path_factory.mktemp("hostile")
    now = time.time()
    with EmbeddedKnowledgeBase(folder / "kb.sqlite") as kb:
        kb.record(execution("a", 100.0, 1.0, end=now - 7200))
        kb.record(execution("b", 200.0, 2.0, end=now - 3600))
    (folder / "settings.json").write_text(
        json.dumps({"knowledge": {"path": str(folder / "kb.sqlite")}})
    )
    (folder / "dump.json").write_text(json.dumps({"items": [_node("n1"), _pod("p", "n1")]}))
    return folder


def _node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "annotations": {}},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "nodeName": node,
            "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running"},
    }


def _write(world: Path, name: str, text: str | bytes) -> Path:
    """The hostile input, beside (not inside) the folder whose files must not change."""
    path = world.parent / f"{world.name}-{name}"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --- structure: any JSON input ------------------------------------------------------------

STRUCTURE = st.one_of(
    st.integers(min_value=65, max_value=200_000).map(lambda n: ("[" * n + "]" * n).encode()),
    st.binary(min_size=1, max_size=8).map(lambda b: b'{"items": ["' + b"\xff" + b + b'"]}'),
    st.sampled_from([b"", b"{", b'{"items": [', b"\xef\xbb\xbf{}", b"null", b"[1, 2"]),
)
"""Too deep, not UTF-8, or not JSON at all."""


# --- settings ------------------------------------------------------------------------------


@FUZZ
@given(key=st.sampled_from(NUMERIC_SETTINGS), value=BAD_NUMBER)
def test_hostile_setting_numbers(world: Path, key: tuple[str, str], value: str) -> None:
    document = json.dumps({key[0]: {key[1]: "__HOSTILE__"}}).replace(HOSTILE, value)
    path = _write(world, "settings.json", document)
    argv = ["plan", "--snapshot", str(world / "dump.json"), "--settings", str(path)]
    assert_refused("settings", argv, world)


@FUZZ
@given(key=st.sampled_from(["min_cpu", "min_memory"]), value=BAD_QUANTITY)
def test_hostile_setting_quantities(world: Path, key: str, value: str) -> None:
    document = json.dumps({"analyse": {"usability": {key: value}}})
    path = _write(world, "settings.json", document)
    argv = ["plan", "--snapshot", str(world / "dump.json"), "--settings", str(path)]
    assert_refused("settings", argv, world, "analyse.usability")


@settings(max_examples=30, deadline=None, database=None)
@given(data=STRUCTURE)
def test_hostile_settings_files(world: Path, data: bytes) -> None:
    path = _write(world, "settings.json", data)
    argv = ["plan", "--snapshot", str(world / "dump.json"), "--settings", str(path)]
    assert_refused("settings", argv, world)


# --- cluster dumps -------------------------------------------------------------------------


def _dump_with(where: str) -> str:
    """The dump's text with the hostile placeholder at ``where``."""
    node, pod = _node("n1"), _pod("p", "n1")
    items: list[Any] = [node, pod]
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    if where in ("cpu", "memory", "pods"):
        node["status"]["capacity"][where] = "__HOSTILE__"
    elif where in ("request cpu", "request memory"):
        requests[where.split()[1]] = "__HOSTILE__"
    elif where == "price":
        node["metadata"]["annotations"]["tuner.dev/price-per-hour"] = "__HOSTILE__"
    elif where == "metadata":
        items.append({"kind": "ReplicaSet", "metadata": "__HOSTILE__"})
    elif where == "ownerReferences":
        pod["metadata"]["ownerReferences"] = "__HOSTILE__"
    elif where == "maxReplicas":
        items.append(
            {
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "h", "namespace": "shop"},
                "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "w"},
                    "maxReplicas": "__HOSTILE__",
                },
            }
        )
    return json.dumps({"items": items})


DUMP_CASES = st.one_of(
    st.tuples(
        st.sampled_from(["cpu", "memory", "pods", "request cpu", "request memory"]),
        BAD_QUANTITY.map(json.dumps),
    ),
    st.tuples(
        st.just("price"),
        (st.sampled_from(["abc", "-5", "nan", "inf", "-0.01", ""]) | NEGATIVE).map(json.dumps),
    ),
    st.tuples(st.just("metadata"), WRONG_TYPE.filter(lambda v: v not in ("null", "{}"))),
    st.tuples(st.just("ownerReferences"), st.sampled_from(['"x"', "5", "[1]", '[{"kind": 5}]'])),
    st.tuples(st.just("maxReplicas"), BAD_NUMBER.filter(lambda v: v not in ("null",))),
)


@FUZZ
@given(case=DUMP_CASES)
def test_hostile_dump_values(world: Path, case: tuple[str, str]) -> None:
    where, value = case
    path = _write(world, "dump.json", _dump_with(where).replace(HOSTILE, value))
    assert_refused("dumps", ["plan", "--snapshot", str(path)], world)


@settings(max_examples=30, deadline=None, database=None)
@given(
    data=STRUCTURE
    | st.sampled_from(["node", "pod"]).map(
        lambda kind: json.dumps(
            {
                "items": [_node("n1"), _node("n1")]
                if kind == "node"
                else [_node("n1"), _pod("p", "n1"), _pod("p", "n1")]
            }
        ).encode()
    )
    | st.text(min_size=1, max_size=20)
    .filter(lambda n: n != "n1")
    .map(lambda ghost: json.dumps({"items": [_node("n1"), _pod("p", ghost)]}).encode())
)
def test_hostile_dump_files(world: Path, data: bytes) -> None:
    path = _write(world, "dump.json", data)
    assert_refused("dumps", ["plan", "--snapshot", str(path)], world)


# --- knowledge exports ---------------------------------------------------------------------

ENTRY_FIELDS = st.sampled_from(["start", "load", "cost", "cpu_ratio", "end"])


def _export_with(mutate: str) -> str:
    """An export whose second execution holds the hostile placeholder at ``mutate``."""
    good = execution("good", 100.0, 1.0, end=5000.0).to_json()
    bad = execution("bad", 100.0, 1.0, end=6000.0).to_json()
    if mutate in ("start", "load", "cost", "cpu_ratio", "end"):
        bad[mutate] = "__HOSTILE__"
    elif mutate == "node cpu":
        bad["nodes"][0]["cpu"] = "__HOSTILE__"
    elif mutate == "pod count":
        bad["nodes"][0]["pods"]["shop/Deployment/web"] = "__HOSTILE__"
    elif mutate == "movable":
        bad["workloads"][0]["movable"] = "__HOSTILE__"
    elif mutate == "workload":
        bad["workloads"][0]["workload"] = "__HOSTILE__"
    return json.dumps({"format": "tuner-knowledge", "version": 1, "executions": [good, bad]})


EXPORT_CASES = st.one_of(
    st.tuples(ENTRY_FIELDS, NOT_FINITE | NEGATIVE | WRONG_TYPE),
    st.tuples(
        st.just("end"), st.floats(min_value=1.0, max_value=5399.0).map(repr)
    ),  # before its start (end - 600)
    st.tuples(
        st.sampled_from(["node cpu", "pod count"]),
        NEGATIVE | HUGE_INT | WRONG_TYPE | st.sampled_from(["1.5", "NaN"]),
    ),
    st.tuples(st.just("movable"), WRONG_TYPE.filter(lambda v: v != "true") | st.just('"false"')),
    st.tuples(
        st.just("workload"),
        st.text(max_size=20).filter(lambda t: t.count("/") < 2).map(json.dumps) | WRONG_TYPE,
    ),
)


@FUZZ
@given(case=EXPORT_CASES)
def test_hostile_imports(world: Path, case: tuple[str, str]) -> None:
    where, value = case
    path = _write(world, "export.json", _export_with(where).replace(HOSTILE, value))
    argv = ["kb", "import", str(path), "--settings", str(world / "settings.json")]
    assert_refused("exports", argv, world)


# --- command-line numbers ------------------------------------------------------------------

OPTIONS = [
    ["kb", "list", "--limit"],
    ["kb", "prune", "--keep"],
    ["kb", "prune", "--older-than"],
    ["monitor", "--window"],
    ["plan", "--snapshot", "dump.json", "--load"],
    ["kb", "record", "--snapshot", "dump.json", "--load", "1", "--window"],
    ["kb", "record", "--snapshot", "dump.json", "--load"],
    ["kb", "browse", "--load"],
]


@FUZZ
@given(option=st.sampled_from(OPTIONS), value=BAD_ARGUMENT)
def test_hostile_command_line_numbers(world: Path, option: list[str], value: str) -> None:
    argv = [str(world / a) if a.endswith(".json") else a for a in option]
    argv += [value, "--settings", str(world / "settings.json")]
    assert_refused("arguments", argv, world, option[-1])


# --- a few real subprocesses ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "content"),
    [
        (["plan", "--snapshot", "{input}"], b"[" * 100_000),
        (["plan", "--snapshot", "{input}"], b'{"items": [{"kind": "Node", "metadata": NaN}]}'),
        (["kb", "import", "{input}", "--settings", "{settings}"], b'{"format": "x"}'),
        (["kb", "list", "--limit", "1" * 25, "--settings", "{settings}"], b""),
    ],
)
def test_hostile_inputs_in_a_real_process(
    world: Path, tmp_path: Path, argv: list[str], content: bytes
) -> None:
    GENERATED["subprocess"] += 1
    hostile = tmp_path / "input.json"
    hostile.write_bytes(content)
    args = [a.format(input=hostile, settings=world / "settings.json") for a in argv]
    before = snapshot(world)
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("tuner: error: ")
    assert snapshot(world) == before
