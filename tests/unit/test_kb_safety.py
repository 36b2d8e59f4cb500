"""Named regressions of issue 15 for ``tuner kb`` on the embedded store: writes that cannot
destroy (export, import, prune, a foreign SQLite file) and read-only commands that create
nothing. On Neo4j: tests/integration/test_neo4j_kb_safety.py."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from tests.knowledge.test_contract import execution
from tuner.cli import main


def _tuner(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "kb.sqlite"
    now = time.time()
    with EmbeddedKnowledgeBase(path) as kb:
        kb.record(execution("old", 100.0, 1.0, end=now - 86400))
        kb.record(execution("new", 200.0, 3.0, end=now - 3600))
    return path


@pytest.fixture
def settings(tmp_path: Path, store: Path) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"knowledge": {"backend": "embedded", "path": str(store)}}))
    return path


def _one_line_error(status: int, err: str, fragment: str) -> None:
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("tuner: error:") and fragment in err, err


def test_export_onto_the_store_is_refused(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path
) -> None:
    before = _digest(store)
    for extra in ((), ("--force",)):
        status, _, err = _tuner(
            capsys, "kb", "export", "-o", str(store), "--settings", str(settings), *extra
        )
        _one_line_error(status, err, "is the knowledge store itself")
    assert _digest(store) == before


def test_export_over_a_file_that_is_not_an_export_needs_force(
    capsys: pytest.CaptureFixture[str], settings: Path, tmp_path: Path
) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("keep me\n")
    status, _, err = _tuner(capsys, "kb", "export", "-o", str(other), "--settings", str(settings))
    _one_line_error(status, err, "exists and is not an export")
    assert other.read_text() == "keep me\n"
    status, _, _ = _tuner(
        capsys, "kb", "export", "-o", str(other), "--force", "--settings", str(settings)
    )
    assert status == 0 and json.loads(other.read_text())["format"] == "tuner-knowledge"
    status, _, _ = _tuner(capsys, "kb", "export", "-o", str(other), "--settings", str(settings))
    assert status == 0  # a previous export is replaced without --force
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.sqlite", "notes.txt", "settings.json"]


@pytest.mark.parametrize(
    ("target", "fragment"), [("missing/x.json", "does not exist"), (".", "is a folder")]
)
def test_export_into_a_missing_folder_or_onto_a_folder(
    capsys: pytest.CaptureFixture[str], settings: Path, tmp_path: Path, target: str, fragment: str
) -> None:
    status, _, err = _tuner(
        capsys, "kb", "export", "-o", str(tmp_path / target), "--settings", str(settings)
    )
    _one_line_error(status, err, fragment)


def _export(capsys: pytest.CaptureFixture[str], settings: Path) -> dict[str, Any]:
    status, out, _ = _tuner(capsys, "kb", "export", "--settings", str(settings))
    assert status == 0
    document: dict[str, Any] = json.loads(out)
    return document


def _broken(entry: dict[str, Any], case: str) -> dict[str, Any]:
    entry = copy.deepcopy(entry)
    entry["id"] = "broken"
    if case == "negative load":
        entry["load"] = -1
    elif case == "negative cost":
        entry["cost"] = -0.5
    elif case == "start after end":
        entry["start"] = entry["end"] + 1
    elif case == "movable as a string":
        entry["workloads"][0]["movable"] = "false"
    elif case == "workload without slashes":
        entry["workloads"][0]["workload"] = "web"
    elif case == "negative pod count":
        pods = entry["nodes"][0]["pods"]
        pods[next(iter(pods))] = -3
    return entry


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("negative load", "load is -1"),
        ("negative cost", "cost is -0.5"),
        ("start after end", "is before start"),
        ("movable as a string", "movable is 'false'"),
        ("workload without slashes", "not namespace/Kind/name"),
        ("negative pod count", "is -3"),
    ],
)
def test_an_import_whose_second_entry_is_bad_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    settings: Path,
    store: Path,
    tmp_path: Path,
    case: str,
    fragment: str,
) -> None:
    document = _export(capsys, settings)
    good = copy.deepcopy(document["executions"][0])
    good["id"], good["end"] = "fresh", good["end"] + 1
    document["executions"] = [good, _broken(document["executions"][0], case)]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    before = _digest(store)
    status, _, err = _tuner(capsys, "kb", "import", str(path), "--settings", str(settings))
    _one_line_error(status, err, fragment)
    assert "execution #1 ('broken')" in err
    assert _digest(store) == before


def test_an_import_is_one_transaction(store: Path) -> None:
    """A write that fails half way (a row SQLite refuses) leaves the store as it was."""
    good = execution("a", 1.0, 1.0)
    with EmbeddedKnowledgeBase(store) as kb:
        before = [e.id for e in kb.list()]
        bad = execution("b", 1.0, 1.0)
        with sqlite3.connect(store) as db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON executions WHEN NEW.id = 'b' "
                "BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        with pytest.raises(Exception, match="refused"):
            kb.record_many([good, bad])
        assert [e.id for e in kb.list()] == before


def test_prune_checks_its_options_before_deleting(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path
) -> None:
    before = _digest(store)
    status, out, err = _tuner(
        capsys, "kb", "prune", "--keep", "1", "--orphans", "--settings", str(settings)
    )
    _one_line_error(status, err, "--orphans applies to the neo4j backend only")
    assert out == "" and _digest(store) == before


def test_a_foreign_sqlite_file_is_refused_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    foreign = tmp_path / "app.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE customers (name TEXT)")
        db.execute("INSERT INTO customers VALUES ('ada')")
    db.close()
    before = _digest(foreign)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"knowledge": {"path": str(foreign)}}))
    dump = Path(__file__).parents[2] / "examples" / "cluster-dump.json"
    status, _, err = _tuner(
        capsys, "kb", "record", "--snapshot", str(dump), "--load", "1", "--settings", str(settings)
    )
    _one_line_error(status, err, "is not a tuner knowledge store")
    assert _digest(foreign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.sqlite", "settings.json"]


@pytest.mark.parametrize(
    "argv",
    [
        ["kb", "list"],
        ["kb", "show", "new"],
        ["kb", "export"],
        ["kb", "browse", "--load", "100", "--workload", "a/Deployment/b"],
    ],
)
def test_read_only_commands_create_and_change_nothing(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path, argv: list[str]
) -> None:
    before = (_digest(store), sorted(p.name for p in store.parent.iterdir()))
    status, _, _ = _tuner(capsys, *argv, "--settings", str(settings))
    assert status == 0
    assert (_digest(store), sorted(p.name for p in store.parent.iterdir())) == before
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()


def test_an_import_from_stdin_is_checked_like_a_file(
    settings: Path, store: Path, tmp_path: Path
) -> None:
    """``kb import -`` in a real process: a bad entry on stdin is one line, nothing written."""
    before = _digest(store)
    bad = execution("x", 1.0, 1.0).to_json()
    bad["load"] = -1
    result = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "kb", "import", "-", "--settings", str(settings)],
        input=json.dumps([bad]),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    _one_line_error(result.returncode, result.stderr, "load is -1")
    assert _digest(store) == before


def test_an_import_that_reuses_a_stored_id_with_another_content_is_refused(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path, tmp_path: Path
) -> None:
    """Issue 28: such an import replaced the stored execution (load 200 -> 100, cost -> 0,
    nodes -> []) and exited 0. Now: exit 2, one line naming the id, the whole import refused;
    the identical export again is a no-op."""
    document = _export(capsys, settings)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    before = _digest(store)
    status, out, _ = _tuner(capsys, "kb", "import", str(path), "--settings", str(settings))
    assert (status, out) == (0, "imported 2 executions\n")
    assert _digest(store) == before

    fresh = copy.deepcopy(document["executions"][0])
    fresh["id"], fresh["end"] = "fresh", fresh["end"] + 1
    forged = copy.deepcopy(document["executions"][0])
    assert forged["id"] == "new" and forged["load"] == 200.0
    forged.update(load=100.0, cost=0.0, cpu_ratio=0.0, nodes=[], workloads=[])
    path.write_text(json.dumps([fresh, forged]))
    status, _, err = _tuner(capsys, "kb", "import", str(path), "--settings", str(settings))
    _one_line_error(status, err, "execution 'new' is already stored with another content")
    assert "load 200.0, not 100.0" in err
    assert _digest(store) == before


def test_an_export_that_gives_one_id_two_contents_is_refused(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path, tmp_path: Path
) -> None:
    entry = _export(capsys, settings)["executions"][0]
    entry["id"] = "twice"
    other = {**entry, "cost": 0.0}
    path = tmp_path / "export.json"
    path.write_text(json.dumps([entry, entry, other]))
    before = _digest(store)
    status, _, err = _tuner(capsys, "kb", "import", str(path), "--settings", str(settings))
    _one_line_error(status, err, "execution #2 ('twice') has the id of #0 with another content")
    assert _digest(store) == before


def test_delete_on_a_missing_store_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"knowledge": {"path": str(tmp_path / "kb.sqlite")}}))
    for argv in (["delete", "nope"], ["prune", "--keep", "1"]):
        status, out, err = _tuner(capsys, "kb", *argv, "--settings", str(settings))
        assert (status, out) == (1, "") and len(err.splitlines()) == 1, err
        assert "no knowledge store at" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


@pytest.mark.parametrize("command", ["show", "delete"])
def test_an_id_that_is_not_utf8_is_one_line(settings: Path, store: Path, command: str) -> None:
    """A non-UTF-8 argument (here the byte 0xff) reached the store as a surrogate escape and
    ended in a UnicodeEncodeError traceback."""
    before = _digest(store)
    argv = [
        sys.executable,
        "-m",
        "tuner.cli",
        "kb",
        command,
        b"x\xff".decode("utf-8", "surrogateescape"),
    ]
    result = subprocess.run(
        [*argv, "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONUTF8": "1"},
    )
    _one_line_error(result.returncode, result.stderr, "is not printable UTF-8 text")
    assert _digest(store) == before


def _is_export(path: Path) -> bool:
    return bool(json.loads(path.read_text())["format"] == "tuner-knowledge")


def test_export_writes_through_a_symlink_and_keeps_it(
    capsys: pytest.CaptureFixture[str], settings: Path, tmp_path: Path
) -> None:
    """Issue 28: ``-o LINK --force`` replaced the link by a regular file."""
    folder = tmp_path / "exports"
    folder.mkdir()
    notes, link = folder / "notes.txt", tmp_path / "link.json"
    notes.write_text("keep me\n")
    link.symlink_to(notes)
    status, _, err = _tuner(capsys, "kb", "export", "-o", str(link), "--settings", str(settings))
    _one_line_error(status, err, "exists and is not an export")
    assert notes.read_text() == "keep me\n"
    for extra in (["--force"], []):  # the second time, the file it leads to is an export
        argv = ["kb", "export", "-o", str(link), "--settings", str(settings), *extra]
        assert _tuner(capsys, *argv)[0] == 0
        assert link.is_symlink() and link.readlink() == notes and _is_export(notes)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(folder / "new.json")
    argv = ["kb", "export", "-o", str(dangling), "--settings", str(settings)]
    assert _tuner(capsys, *argv)[0] == 0
    assert dangling.is_symlink() and _is_export(folder / "new.json")
    assert sorted(p.name for p in folder.iterdir()) == ["new.json", "notes.txt"]


def test_export_keeps_the_permissions_of_the_file_it_replaces(
    capsys: pytest.CaptureFixture[str], settings: Path, tmp_path: Path
) -> None:
    target = tmp_path / "history.json"
    umask = os.umask(0o027)
    try:
        assert (
            _tuner(capsys, "kb", "export", "-o", str(target), "--settings", str(settings))[0] == 0
        )
        assert target.stat().st_mode & 0o777 == 0o640  # 0666 less the umask, as `>` makes it
        target.chmod(0o604)
        assert (
            _tuner(capsys, "kb", "export", "-o", str(target), "--settings", str(settings))[0] == 0
        )
        assert target.stat().st_mode & 0o777 == 0o604
    finally:
        os.umask(umask)


def _export_process(settings: Path, output: str, **options: Any) -> subprocess.Popen[str]:
    argv = ["kb", "export", "-o", output, "--settings", str(settings)]
    return subprocess.Popen(
        [sys.executable, "-m", "tuner.cli", *argv],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def test_export_into_a_fifo_writes_it_and_never_reads_it(settings: Path, tmp_path: Path) -> None:
    """Issue 28: ``-o FIFO`` hung reading the FIFO to see whether it was a previous export."""
    fifo = tmp_path / "export.fifo"
    os.mkfifo(fifo)
    export = _export_process(settings, str(fifo))
    with open(fifo, encoding="utf-8") as reader:  # returns once the export opens it to write
        text = reader.read()
    assert export.wait(timeout=120) == 0, export.stderr
    assert json.loads(text)["format"] == "tuner-knowledge"
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_export_to_dev_stdout_into_a_pipe(settings: Path) -> None:
    """Issue 28: ``-o /dev/stdout`` into a pipe hung (and with --force could replace the
    /dev/stdout link with a file)."""
    export = _export_process(settings, "/dev/stdout", stdout=subprocess.PIPE)
    out, err = export.communicate(timeout=120)
    assert export.returncode == 0, err
    assert json.loads(out)["format"] == "tuner-knowledge"
    assert Path("/dev/stdout").is_symlink()


def test_export_to_a_character_device_writes_it(
    capsys: pytest.CaptureFixture[str], settings: Path
) -> None:
    assert _tuner(capsys, "kb", "export", "-o", "/dev/null", "--settings", str(settings))[0] == 0
    status, _, err = _tuner(capsys, "kb", "export", "-o", "/dev/full", "--settings", str(settings))
    _one_line_error(status, err, "cannot write /dev/full: No space left on device")


def test_export_onto_a_block_device_or_socket_is_refused(
    capsys: pytest.CaptureFixture[str], settings: Path, tmp_path: Path
) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "s.sock"))
    targets = [tmp_path / "s.sock"]
    if os.geteuid() == 0:  # a node of no device (major 240 is for local experiments)
        os.mknod(tmp_path / "disk", stat.S_IFBLK | 0o600, os.makedev(240, 123))
        targets.append(tmp_path / "disk")
    try:
        for target in targets:
            argv = ["kb", "export", "-o", str(target), "--force", "--settings", str(settings)]
            status, _, err = _tuner(capsys, *argv)
            _one_line_error(status, err, "is neither a file, a FIFO nor a terminal")
            assert not stat.S_ISREG(target.stat().st_mode)
    finally:
        server.close()


HUGE = "9" * 4001
"""An integer JSON (and Python) reads, but no float holds: OverflowError before."""


@pytest.mark.parametrize(
    ("where", "value", "fragment"),
    [
        (("start",), HUGE, "start is 9999"),
        (("end",), "1" + "0" * 310, "end is 1000"),
        (("load",), HUGE, "load is 9999"),
        (("cost",), HUGE, "cost is 9999"),
        (("cpu_ratio",), HUGE, "cpu_ratio is 9999"),
        (("nodes", 0, "price"), HUGE, "price is 9999"),
        (("load_vector",), '{"a": ' + HUGE + "}", "load_vector['a'] is 9999"),
        (("load_vector",), '{"a": 1e300}', "load_vector['a'] is 1e+300, not a number in 0..1e+15"),
        (("load_vector",), '{"a": true}', "load_vector['a'] is True, not a number"),
        (("load_vector",), '{"a": 150, "b": 1}', "load 200.0 is not the total of load_vector"),
        (("load_vector",), "[200]", "load_vector is [200], not an object"),
        (("id",), '"a\\u001b[2Jb"', r"id is 'a\x1b[2Jb', not one line of printable text"),
        (("id",), '"a\\u2028b"', r"id is 'a\u2028b'"),
        (("nodes", 0, "name"), '"n\\u0085"', r"name is 'n\x85'"),
        (("nodes", 0, "type"), '"e2\\u2029"', r"type is 'e2\u2029'"),
        (("workloads", 0, "workload"), '"shop/Deployment/w\\u001b"', "not namespace/Kind/name"),
        (
            ("workloads", 1),
            '{"workload": "shop/Deployment/web", "cpu": 1, "memory": 1, "movable": true}',
            "workload 'shop/Deployment/web' is listed twice",
        ),
        (
            ("workloads", 1, "workload"),
            '"shop/Deployment/idle"',
            "'shop/Deployment/idle' is run by no node",
        ),
    ],
    ids=lambda v: str(v)[:30],
)
def test_hostile_export_values_are_one_line(
    capsys: pytest.CaptureFixture[str],
    settings: Path,
    store: Path,
    tmp_path: Path,
    where: tuple[str | int, ...],
    value: str,
    fragment: str,
) -> None:
    """Issue 28's import cases: each is exit 2 and one line naming the field, nothing written."""
    entry = _export(capsys, settings)["executions"][0]
    entry["id"] = "hostile"
    holder: Any = entry
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = "__HOSTILE__"
    path = tmp_path / "export.json"
    path.write_text(json.dumps([entry]).replace('"__HOSTILE__"', value))
    before = _digest(store)
    status, _, err = _tuner(capsys, "kb", "import", str(path), "--settings", str(settings))
    _one_line_error(status, err, fragment)
    assert _digest(store) == before


@pytest.mark.parametrize("version", ["true", '"1"', "0", "1.0", "-1"])
def test_an_export_version_that_is_not_a_version_number_is_refused(
    capsys: pytest.CaptureFixture[str], settings: Path, store: Path, tmp_path: Path, version: str
) -> None:
    path = tmp_path / "export.json"
    path.write_text(f'{{"format": "tuner-knowledge", "version": {version}, "executions": []}}')
    status, _, err = _tuner(capsys, "kb", "import", str(path), "--settings", str(settings))
    _one_line_error(status, err, "is not a version number")
