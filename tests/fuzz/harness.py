"""Runs the real command line on a hostile input and checks the README's promise: exit status 2,
exactly one line on stderr (``tuner: error: ...``), no traceback, no file changed."""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
from collections import Counter
from pathlib import Path

from tuner.cli import main

GENERATED: Counter[str] = Counter()
"""Hostile inputs fed to the command line in this run, per suite (printed at the end)."""


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and a hash of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run(argv: list[str]) -> tuple[int, str]:
    """``tuner argv`` in-process: its exit status and what it wrote to stderr."""
    logging.getLogger().handlers.clear()  # main's log handler writes to this run's stderr
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
    logging.getLogger().handlers.clear()
    return status, err.getvalue()


def assert_refused(
    suite: str, argv: list[str], folder: Path, expected: str | None = None, status: int = 2
) -> None:
    """Run ``argv`` on a hostile input in ``folder``: refused in one line, nothing changed."""
    GENERATED[suite] += 1
    before = snapshot(folder)
    code, err = run(argv)
    lines = err.splitlines()
    assert code == status, (argv, code, err)
    assert len(lines) == 1 and lines[0].startswith("tuner: error: "), (argv, err)
    assert "Traceback" not in err
    if expected is not None:
        assert expected in lines[0], (expected, lines[0])
    assert snapshot(folder) == before, argv
