"""Generated hostile input for the knowledge store's commands: huge integers and control
characters anywhere in an export, ids that are not UTF-8, special files as ``kb export -o``,
and signals at random points of a write.

Each export case must end with exit status 2, one line on stderr and no file changed (the
harness' promise); each ``-o`` target must be written as documented or refused in one line,
without a hang and without replacing anything but a regular file; each signal must leave a
store that every reader reads in its committed state.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge.embedded import EmbeddedKnowledgeBase
from tests.fuzz.harness import GENERATED, assert_refused, run, snapshot
from tests.knowledge.test_contract import execution

FUZZ = settings(max_examples=60, deadline=None, database=None)
ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '"__HOSTILE__"'


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a knowledge store of two executions and settings naming it."""
    folder = tmp_path_factory.mktemp("kb-hostile")
    with EmbeddedKnowledgeBase(folder / "kb.sqlite") as kb:
        kb.record(execution("a", 100.0, 1.0, end=5000.0))
        kb.record(execution("b", 200.0, 2.0, end=6000.0))
    (folder / "settings.json").write_text(
        json.dumps({"knowledge": {"path": str(folder / "kb.sqlite")}})
    )
    return folder


def _write(world: Path, name: str, text: str) -> Path:
    """The hostile input, beside (not inside) the folder whose files must not change."""
    path = world.parent / f"{world.name}-{name}"
    path.write_text(text, encoding="utf-8")
    return path


# --- huge integers anywhere in an export ----------------------------------------------------

NUMBER_FIELDS = [
    ("start",),
    ("end",),
    ("load",),
    ("cost",),
    ("cpu_ratio",),
    ("nodes", 0, "price"),
    ("nodes", 0, "cpu"),
    ("nodes", 0, "memory"),
    ("nodes", 0, "pods", "shop/Deployment/web"),
    ("workloads", 0, "cpu"),
    ("load_vector", '{service="web"}'),
]
HUGE_DIGITS = st.integers(min_value=310, max_value=4001).map(lambda n: "9" * n) | st.integers(
    min_value=310, max_value=4000
).map(lambda n: "1" + "0" * n)
"""Integers too large for a float (and for every bound): OverflowError before."""


def _export_with(where: tuple[str | int, ...]) -> str:
    """An export of one new execution with the hostile placeholder at ``where``."""
    entry = execution("fresh", 100.0, 1.0, end=7000.0).to_json()
    entry["load_vector"] = {'{service="web"}': 100.0}
    holder: Any = entry
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = "__HOSTILE__"
    return json.dumps({"format": "tuner-knowledge", "version": 1, "executions": [entry]})


@FUZZ
@given(where=st.sampled_from(NUMBER_FIELDS), digits=HUGE_DIGITS, sign=st.sampled_from(["", "-"]))
def test_huge_integers_in_an_export(
    world: Path, where: tuple[str, ...], digits: str, sign: str
) -> None:
    path = _write(world, "export.json", _export_with(where).replace(HOSTILE, sign + digits))
    argv = ["kb", "import", str(path), "--settings", str(world / "settings.json")]
    assert_refused("kb exports", argv, world, str(where[-1]))


@FUZZ
@given(version=HUGE_DIGITS | st.sampled_from(["true", "false", '"1"', "1.0", "0", "-1", "null"]))
def test_hostile_export_versions(world: Path, version: str) -> None:
    document = f'{{"format": "tuner-knowledge", "version": {version}, "executions": []}}'
    argv = ["kb", "import", str(_write(world, "export.json", document))]
    assert_refused("kb exports", [*argv, "--settings", str(world / "settings.json")], world)


# --- control characters in every name an export holds --------------------------------------

NOT_PRINTABLE = st.characters(
    blacklist_categories=(
        "Lu",
        "Ll",
        "Lt",
        "Lm",
        "Lo",
        "Mn",
        "Mc",
        "Me",
        "Nd",
        "Nl",
        "No",
        "Pc",
        "Pd",
        "Ps",
        "Pe",
        "Pi",
        "Pf",
        "Po",
        "Sm",
        "Sc",
        "Sk",
        "So",
    ),
).filter(lambda c: not c.isprintable() and c != " ")
"""Control, format, separator (other than space) and surrogate characters: ESC, U+0085,
U+2028, U+2029, U+200B, …"""
NAME_FIELDS = [
    ("id",),
    ("nodes", 0, "name"),
    ("nodes", 0, "type"),
    ("workloads", 0, "workload"),
]


@FUZZ
@given(
    where=st.sampled_from(NAME_FIELDS),
    char=NOT_PRINTABLE | st.sampled_from(["\x1b", "\u2028", "\u0085", "\u2029", "\r", "\x00"]),
    at=st.integers(min_value=0, max_value=30),
)
def test_control_characters_in_an_export(
    world: Path, where: tuple[str | int, ...], char: str, at: int
) -> None:
    entry = json.loads(_export_with(("id",)).replace(HOSTILE, '"fresh"'))["executions"][0]
    holder: Any = entry
    for key in where[:-1]:
        holder = holder[key]
    text = str(holder[where[-1]])
    holder[where[-1]] = text[:at] + char + text[at:]
    document = json.dumps([entry])  # JSON escapes every such character
    argv = ["kb", "import", str(_write(world, "export.json", document))]
    assert_refused("kb exports", [*argv, "--settings", str(world / "settings.json")], world)


@FUZZ
@given(raw=st.binary(min_size=1, max_size=12).filter(lambda b: not _utf8(b) and b[:1] != b"-"))
def test_ids_that_are_not_utf8(world: Path, raw: bytes) -> None:
    """How Python hands a non-UTF-8 argument over (PEP 383 surrogate escapes)."""
    identifier = raw.decode("utf-8", "surrogateescape")
    for command in ("show", "delete"):
        argv = ["kb", command, identifier, "--settings", str(world / "settings.json")]
        assert_refused("kb arguments", argv, world, "is not printable UTF-8 text")


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- special files as kb export -o -----------------------------------------------------------

TARGETS = ["fifo", "null", "full", "socket", "folder", "store", "export", "notes", "missing"]


def _target(folder: Path, world: Path, kind: str) -> Path:
    """A fresh ``-o`` target of ``kind`` in ``folder``."""
    path = folder / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind in ("null", "full"):
        return Path(f"/dev/{kind}")
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "folder":
        path.mkdir()
    elif kind == "store":
        return world / "kb.sqlite"
    elif kind == "export":
        path.write_text(json.dumps({"format": "tuner-knowledge", "version": 1, "executions": []}))
    elif kind == "notes":
        path.write_text("keep me\n")
    return path


@settings(max_examples=40, deadline=None, database=None)
@given(kind=st.sampled_from(TARGETS), links=st.integers(0, 2), force=st.booleans())
def test_special_files_as_export_output(
    world: Path, tmp_path_factory: pytest.TempPathFactory, kind: str, links: int, force: bool
) -> None:
    """Written as documented, or refused in one line; never a hang, never a read of a FIFO or
    device, never a symbolic link, FIFO, socket or device replaced by a file."""
    GENERATED["kb export -o"] += 1
    folder = tmp_path_factory.mktemp("out")
    target = _target(folder, world, kind)
    given_path = target
    for n in range(links):  # a chain of symbolic links to the target
        link = folder / f"link-{n}"
        link.symlink_to(given_path)
        given_path = link
    before = snapshot(world)
    kind_before = os.lstat(target).st_mode if os.path.lexists(target) else None
    text: list[str] = []
    reader = None
    if kind == "fifo":
        reader = threading.Thread(target=lambda: text.append(target.read_text()), daemon=True)
        reader.start()
    argv = ["kb", "export", "-o", str(given_path), "--settings", str(world / "settings.json")]
    code, err = run(argv + (["--force"] if force else []))
    if reader is not None:
        if code != 0:  # let the reader go
            with open(target, "w"):
                pass
        reader.join(timeout=60)
        assert not reader.is_alive()
    assert snapshot(world) == before
    assert "Traceback" not in err
    refused = {"socket", "folder", "store", "full"} | ({"notes"} if not force else set())
    if kind in refused:
        assert code == 2 and len(err.splitlines()) == 1, (kind, err)
    else:
        assert code == 0, (kind, err)
    for n in range(links):
        assert (folder / f"link-{n}").is_symlink()
    if kind_before is not None and not stat.S_ISREG(kind_before):
        assert stat.S_IFMT(os.lstat(target).st_mode) == stat.S_IFMT(kind_before)
    if kind == "fifo":
        assert json.loads(text[0])["format"] == "tuner-knowledge"
    elif code == 0 and kind not in ("null",):
        assert json.loads(target.read_text())["format"] == "tuner-knowledge"


# --- signals at random points of a write ----------------------------------------------------

BULK = 4000


@settings(max_examples=6, deadline=None, database=None)
@given(
    how=st.sampled_from([signal.SIGINT, signal.SIGTERM, signal.SIGKILL]),
    command=st.sampled_from(["import", "prune"]),
    polls=st.integers(min_value=0, max_value=20_000),
)
def test_signals_mid_write(
    tmp_path_factory: pytest.TempPathFactory, how: signal.Signals, command: str, polls: int
) -> None:
    """A signal once the write has begun, ``polls`` file checks later (the write may have
    committed by then): the store holds either the state before or after, never a mix, and
    every reader reads it."""
    GENERATED["kb signals"] += 1
    folder = tmp_path_factory.mktemp("signal")
    store = folder / "kb.sqlite"
    old = [execution(f"old-{i}", 100.0, 1.0, end=1000.0 + i) for i in range(BULK)]
    with EmbeddedKnowledgeBase(store) as kb:
        kb.record(execution("kept", 100.0, 1.0, end=9_000_000.0))
        if command == "prune":
            kb.record_many(old)
    (folder / "settings.json").write_text(json.dumps({"knowledge": {"path": str(store)}}))
    export = folder / "export.json"
    export.write_text(json.dumps([e.to_json() for e in old]))
    argv = ["import", str(export)] if command == "import" else ["prune", "--keep", "1"]
    writer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuner.cli",
            "kb",
            *argv,
            "--settings",
            str(folder / "settings.json"),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    journal = folder / "kb.sqlite-journal"
    deadline = time.monotonic() + 300
    while not journal.exists() and writer.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.002)  # polling a file: no event to wait on
    for _ in range(polls):  # a random point later in the write: a few microseconds a check
        journal.exists()
    writer.send_signal(how)
    _, err = writer.communicate(timeout=300)
    assert "Traceback" not in err
    if writer.returncode == 130:
        assert how == signal.SIGINT and err == "tuner: error: interrupted\n"
    elif writer.returncode != 0:  # killed (SIGINT too once Python has begun to exit)
        assert writer.returncode == -how, err
    code, out, _ = _kb_list(folder)
    assert code == 0
    ids = {e["id"] for e in json.loads(out)}
    everything = {"kept"} | {e.id for e in old}
    assert ids in ({"kept"}, everything), len(ids)  # before or after, never a mix
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()


def _kb_list(folder: Path) -> tuple[int, str, str]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner.cli",
            "kb",
            "list",
            "--format",
            "json",
            "--limit",
            "100000",
            "--settings",
            str(folder / "settings.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return result.returncode, result.stdout, result.stderr
