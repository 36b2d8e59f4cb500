"""Progress of a long simulation on stderr: a tqdm bar on a terminal, else (a pipe, a log file,
CI) one line each time another :data:`STEP` of the simulated hours is done, so that a run of
hours is not silent until its end."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, TextIO

from tqdm import tqdm

STEP = 0.05
"""Share of the total between two progress lines without a terminal."""


class Progress:
    """Simulated hours done out of ``total``, with what runs now."""

    def __init__(self, total: float, stream: TextIO | None = None, step: float = STEP) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.step = step
        self.done = 0.0
        self.what = ""
        self._shown = 0
        self._started = time.monotonic()
        self._bar: tqdm[Any] | None = None
        if _is_terminal(self.stream):
            self._bar = tqdm(
                total=round(total, 2), unit="sim-h", file=self.stream, dynamic_ncols=True
            )

    def describe(self, what: str) -> None:
        """Name what runs now (a scenario, a strategy)."""
        self.what = what
        if self._bar is not None:
            self._bar.set_description(what)

    def update(self, hours: float) -> None:
        """Count ``hours`` more simulated hours as done."""
        self.done += hours
        if self._bar is not None:
            self._bar.update(round(hours, 4))
            return
        steps = int(self.done / self.total / self.step + 1e-9) if self.total > 0 else 0
        if steps > self._shown:
            self._shown = steps
            share = min(self.done / self.total, 1.0)
            elapsed = time.monotonic() - self._started
            now = f"; {self.what}" if self.what else ""
            line = (
                f"simulate: {share * 100:.0f} % ({self.done:.1f} of {self.total:.1f} "
                f"simulated hours, {elapsed:.0f} s{now})"
            )
            with contextlib.suppress(OSError):  # nobody reads stderr any more: the run goes on
                print(line, file=self.stream, flush=True)

    def close(self) -> None:
        """End the bar."""
        if self._bar is not None:
            self._bar.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
