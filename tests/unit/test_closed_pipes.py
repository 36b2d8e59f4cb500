"""``tuner … | head -c1``: every command that prints ends quietly when the reader of its
output is gone — exit status 141 (the shell's status of a command killed by SIGPIPE, as
``cat`` gives), nothing on stderr, no traceback. ``--help`` may also end with 0 (argparse
ignores a failed write of its help, so a closed pipe may go unseen). The commands that need
a cluster (``run --once --dry-run``, ``onboard``, ``offboard``) are checked on the real
control plane in ``tests/cluster/test_closed_pipes.py``.

Each command runs in-process with stdout a pipe whose read end is already closed, so its
first write fails (a reader that takes one byte and goes, like ``head -c1``, only makes the
failure come later); two run as real processes behind a real ``head -c1``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.lazy import LazyKnowledge
from testkit.builders import cluster, node, pod
from tests.knowledge.test_contract import execution
from tuner.analyse.decision import analyse
from tuner.cli import CLOSED_PIPE, main
from tuner.cycle import CycleReport, Outcome
from tuner.daemon.run import Daemon
from tuner.report.build import build_report
from tuner.settings import Analyse, Pricing, Settings

EXAMPLE = Path(__file__).parents[2] / "examples" / "cluster-dump.json"
ROOT = Path(__file__).parents[2]


@contextlib.contextmanager
def _stdout_closed_early() -> Iterator[io.StringIO]:
    """stdout a pipe nobody reads any more; yields what goes to stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    out = open(write_end, "w", encoding="utf-8")  # noqa: SIM115  (closed below)
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield err
    finally:
        with contextlib.suppress(OSError):
            out.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pipes")
    with EmbeddedKnowledgeBase(folder / "kb.sqlite") as kb:
        for index in range(3):
            kb.record(execution(f"e{index}", 100.0 + index, 1.0, end=time.time() - 3600 * index))
    (folder / "settings.json").write_text(
        json.dumps(
            {
                "knowledge": {"path": str(folder / "kb.sqlite")},
                "prometheus": {"url": "http://127.0.0.1:9", "timeout_s": 2},
                "load": {"query": "vector(1)"},
            }
        )
    )
    export = folder / "export.json"
    export.write_text(
        json.dumps(
            {
                "format": "tuner-knowledge",
                "version": 1,
                "executions": [execution("x1", 300.0, 2.0).to_json()],
            }
        )
    )
    return folder


COMMANDS: dict[str, list[str]] = {
    "plan": ["plan", "--snapshot", str(EXAMPLE), "--settings", "{settings}"],
    "plan --format json": ["plan", "--snapshot", str(EXAMPLE), "--format", "json"],
    "monitor": ["monitor", "--settings", "{settings}"],
    "monitor --format json": ["monitor", "--settings", "{settings}", "--format", "json"],
    "kb list": ["kb", "list", "--settings", "{settings}"],
    "kb list --format json": ["kb", "list", "--settings", "{settings}", "--format", "json"],
    "kb show": ["kb", "show", "e1", "--settings", "{settings}"],
    "kb export": ["kb", "export", "--settings", "{settings}"],
    "kb record": [
        "kb",
        "record",
        "--snapshot",
        str(EXAMPLE),
        "--load",
        "42",
        "--settings",
        "{settings}",
    ],
    "kb import": ["kb", "import", "{folder}/export.json", "--settings", "{settings}"],
    "kb prune": ["kb", "prune", "--keep", "100", "--settings", "{settings}"],
    "kb delete": ["kb", "delete", "e2", "--settings", "{settings}"],
    "kb browse": ["kb", "browse", "--settings", "{settings}"],
    "simulate": ["simulate", "--scenario", "thesis-narrow", "--hours", "0.25"],
    "demo": ["demo", "--hours", "0.5", "--speed", "1800"],
    "--help": ["--help"],
    "kb --help": ["kb", "--help"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_closed_output_pipe_ends_the_command_quietly(world: Path, name: str) -> None:
    argv = [a.format(settings=world / "settings.json", folder=world) for a in COMMANDS[name]]
    with _stdout_closed_early() as err:
        try:
            status = main(argv)
        except SystemExit as exit_:  # --help
            status = int(exit_.code or 0)
    expected = (0, CLOSED_PIPE) if name.endswith("--help") else (CLOSED_PIPE,)
    assert status in expected, err.getvalue()
    assert "Traceback" not in err.getvalue() and "Broken pipe" not in err.getvalue()
    assert "tuner: error" not in err.getvalue()


@pytest.mark.parametrize("name", ["plan", "kb list"])
def test_behind_a_real_head_c1(world: Path, name: str) -> None:
    argv = [a.format(settings=world / "settings.json", folder=world) for a in COMMANDS[name]]
    command = " ".join(f"'{a}'" for a in [sys.executable, "-m", "tuner.cli", *argv])
    done = subprocess.run(
        ["bash", "-c", f"{command} | head -c1 >/dev/null; echo ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.stdout.strip() in ("0", str(CLOSED_PIPE)), done.stderr
    assert done.stderr == ""


class _Actuator:
    """What the daemon asks of its actuator before and after a dry-run cycle."""

    def __init__(self) -> None:
        self.stop_requested = threading.Event()

    def read(self) -> None:
        raise AssertionError("not read: the cycle is given")


def test_a_dry_run_daemon_whose_plans_have_no_reader_stops(tmp_path: Path) -> None:
    """``tuner run --dry-run | head``: the first planned cycle's print fails, the daemon stops
    as after a signal (the command line then ends with 141), no cycle is reported failed."""
    s = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0),
    )
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    plan = build_report(c, s, analyse(c, s, [], random.Random(0)))
    report = CycleReport(Outcome.PLANNED, 0, 600, "planned", 600, plan=plan)
    kb = LazyKnowledge(lambda: EmbeddedKnowledgeBase(tmp_path / "kb.sqlite"))
    daemon = Daemon(s, _Actuator(), prometheus=None, kb=kb, dry_run=True)  # type: ignore[arg-type]
    with _stdout_closed_early() as err:
        daemon._on_cycle(report, 0.1)
    assert daemon.stopping.is_set()
    assert "Traceback" not in err.getvalue()
