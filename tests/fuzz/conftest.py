"""The fuzz suite's count of generated hostile inputs, printed at the end of every run."""

from __future__ import annotations

import pytest

from tests.fuzz.harness import GENERATED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line with the number of hostile inputs this run fed to the command line."""
    if GENERATED:
        parts = ", ".join(f"{suite} {n}" for suite, n in sorted(GENERATED.items()))
        terminalreporter.write_line(
            f"hostile inputs generated: {sum(GENERATED.values())} ({parts})"
        )
