"""The ``tuner`` command line."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from tuner import __version__
from tuner.errors import InputError, ServiceError
from tuner.redact import RedactingFilter, printable, redact_url

MAX_ERROR = 2000
"""Characters of a one-line error printed (a 300,000-letter name is cut)."""

_COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("tuner.offline.command", "add_plan_parser"),
    "monitor": ("tuner.monitor.command", "add_monitor_parser"),
    "run": ("tuner.daemon.run", "add_run_parser"),
    "simulate": ("tuner.sim.command", "add_simulate_parser"),
    "onboard": ("tuner.execute.onboard", "add_onboard_parsers"),
    "offboard": ("tuner.execute.onboard", "add_onboard_parsers"),
    "demo": ("tuner.sim.demo", "add_demo_parser"),
    "kb": ("tuner.kb.command", "add_kb_parser"),
    "report": ("tuner.kb.report", "add_report_parser"),
}
"""Each command's module and the function registering its parser (in ``--help`` order).
Only the named command's module is imported: the daemon's clients (Kubernetes, Neo4j,
APScheduler, Prometheus) cost ~2 s of imports that ``tuner plan --snapshot`` never uses."""


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line (``tuner: error: ...``) and exit status 2, like any bad input;
    ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("tuner").strip()
        _fail(f"{command}: {message}" if command else message)
        sys.exit(2)


def _fail(message: object) -> None:
    """The one line a failure prints: control characters of the message cannot break it, and
    a message longer than :data:`MAX_ERROR` characters is cut in the middle."""
    line = printable(redact_url(str(message)))
    if len(line) > MAX_ERROR:
        half = MAX_ERROR // 2
        line = f"{line[:half]} ... ({len(line) - MAX_ERROR} characters) ... {line[-half:]}"
    print(f"tuner: error: {line}", file=sys.stderr)


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the command ``argv`` names (all commands when it names none)."""
    parser = _Parser(
        prog="tuner", description="Deployment tuner for Kubernetes: fewer, fuller nodes."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    parser.add_argument("--version", action="version", version=f"tuner {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    named = next((arg for arg in argv if not arg.startswith("-")), None)
    wanted = [_COMMANDS[named]] if named in _COMMANDS else list(_COMMANDS.values())
    for module, function in dict.fromkeys(wanted):
        getattr(importlib.import_module(module), function)(commands)
    return parser


CLOSED_PIPE = 141
"""Exit status when the reader of the output went away (``tuner plan | head -c1``): the shell's
status of a command killed by SIGPIPE (128 + 13), as ``cat`` or ``yes`` give; nothing is
printed about it."""
INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), with one line and no traceback; output not yet
written is dropped."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one-line errors with exit status 2 for bad input, never a traceback; a
    closed output pipe ends the command quietly (:data:`CLOSED_PIPE`)."""
    try:
        try:
            status = _run(argv)
        except SystemExit:  # --help, or bad arguments
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # here, not at exit: a closed pipe is caught below
        return status
    except BrokenPipeError as err:
        if not _silence_closed_pipes():
            _fail(f"{err.strerror or err}")
            return 1
        return CLOSED_PIPE
    except KeyboardInterrupt:  # Ctrl-C: every knowledge write is one transaction, rolled back
        _fail("interrupted")
        _drop(sys.stdout)  # what is still buffered must not block the exit on a full pipe
        return INTERRUPTED


def _run(argv: Sequence[str] | None) -> int:
    parser = _parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not args.verbose:
        logging.getLogger("urllib3").setLevel(logging.ERROR)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
    try:
        return int(args.run(args))
    except InputError as err:
        _fail(err)
        return 2
    except ServiceError as err:
        _fail(err)
        return 1


def _drop(stream: TextIO) -> None:
    """Point ``stream``'s file descriptor at /dev/null (when it has one)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # not a file (a test's StringIO)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def _silence_closed_pipes() -> bool:
    """Point stdout and stderr, where their reader is gone, at /dev/null (so that the flush at
    exit cannot fail again); False when neither was a closed pipe."""
    closed = False
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (OSError, ValueError):  # not a file (a test's StringIO): nothing to silence
            continue
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _fd, events in poller.poll(0)):
            closed = True
            _drop(stream)
    return closed


if __name__ == "__main__":
    sys.exit(main())
