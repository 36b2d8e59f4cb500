"""Running a provider command (``execute.node_removal_command``, ``node_provision_command``):
no shell, bounded in time and memory, a failure as one clean line.

The command runs in its own session (a timeout ends its whole process group). Of its stdout
and stderr the tuner keeps the first and the last :data:`KEEP` bytes each, whatever it prints
(800 MB of output costs no memory), decodes them as UTF-8 with replacement characters (a
stray byte never turns a successful command into a failed one) and logs them at debug level;
a failure names the command's last stderr line with its control characters escaped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from tuner.execute.retry import ActionFailed
from tuner.redact import printable

log = logging.getLogger(__name__)

KEEP = 64 * 1024
"""Bytes kept of the start and of the end of each output stream."""
LINE = 300
"""Characters of the stderr line a failure message quotes."""


class Captured:
    """The first and the last :data:`KEEP` bytes of a stream, and how many were dropped."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        """Keep what fits of ``chunk``."""
        room = KEEP - len(self.head)
        self.head += chunk[:room]
        self.tail += chunk[room:] if room > 0 else chunk
        if len(self.tail) > KEEP:
            self.dropped += len(self.tail) - KEEP
            del self.tail[:-KEEP]

    def text(self) -> str:
        """What was kept, decoded (bad bytes replaced), with a mark where bytes were dropped."""
        gap = f"\n[... {self.dropped} bytes not kept ...]\n" if self.dropped else ""
        head, tail = (part.decode(errors="replace") for part in (self.head, self.tail))
        return head + gap + tail


def run_command(
    argv: Sequence[str], what: str, timeout_s: float, env: Mapping[str, str] | None = None
) -> None:
    """Run ``argv`` (``env`` added to the tuner's environment); :class:`ActionFailed` naming
    ``what`` when it cannot start, times out or exits non-zero (with its last stderr line)."""
    environment = {**os.environ, **env} if env else None
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
            start_new_session=True,
        )
    except (OSError, ValueError) as err:  # ValueError: a NUL in an argument
        raise ActionFailed(f"{what} {printable(argv[0])}: {printable(str(err))}") from err
    with process:
        stdout, stderr = _read(process, time.monotonic() + timeout_s)
        if process.returncode is None:
            _end(process)
            raise ActionFailed(f"{what} {printable(argv[0])}: timed out after {timeout_s:g} s")
    log.debug("%s %s: stdout %r, stderr %r", what, argv[0], stdout.text(), stderr.text())
    if process.returncode != 0:
        last = stderr.text().strip().rsplit("\n", 1)[-1]  # not splitlines: CR, U+2028 escaped
        if len(last) > LINE:
            last = last[:LINE] + "..."
        raise ActionFailed(f"{what} exited {process.returncode}: {printable(last)}")


def _read(process: subprocess.Popen[bytes], deadline: float) -> tuple[Captured, Captured]:
    """Read ``process``'s stdout and stderr until both end or ``deadline`` passes; returns what
    was kept (``process.returncode`` stays None when the deadline passed first). Once the
    process has exited, output still held open by a child it left is not waited for."""
    captured = {"out": Captured(), "err": Captured()}
    with selectors.DefaultSelector() as selector:
        assert process.stdout is not None and process.stderr is not None
        selector.register(process.stdout, selectors.EVENT_READ, "out")
        selector.register(process.stderr, selectors.EVENT_READ, "err")
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return captured["out"], captured["err"]
            exited = process.poll() is not None
            ready = selector.select(0 if exited else min(remaining, 0.5))
            if exited and not ready:
                break
            for key, _events in ready:
                chunk = os.read(key.fd, KEEP)
                if chunk:
                    captured[key.data].feed(chunk)
                else:
                    selector.unregister(key.fileobj)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(max(0.0, deadline - time.monotonic()))
    return captured["out"], captured["err"]


def _end(process: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group, and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
