"""The ``tuner`` command line."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from tuner.errors import InputError, ServiceError
from tuner.redact import RedactingFilter, redact_url

_COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("tuner.offline.command", "add_plan_parser"),
    "monitor": ("tuner.monitor.command", "add_monitor_parser"),
    "run": ("tuner.daemon.run", "add_run_parser"),
    "simulate": ("tuner.sim.command", "add_simulate_parser"),
    "onboard": ("tuner.execute.onboard", "add_onboard_parsers"),
    "offboard": ("tuner.execute.onboard", "add_onboard_parsers"),
    "demo": ("tuner.sim.demo", "add_demo_parser"),
    "kb": ("tuner.kb.command", "add_kb_parser"),
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
    """The one line a failure prints: control characters of the message cannot break it."""
    text = redact_url(str(message))
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    print(f"tuner: error: {line}", file=sys.stderr)


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the command ``argv`` names (all commands when it names none)."""
    parser = _Parser(
        prog="tuner", description="Deployment tuner for Kubernetes: fewer, fuller nodes."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True)
    named = next((arg for arg in argv if not arg.startswith("-")), None)
    wanted = [_COMMANDS[named]] if named in _COMMANDS else list(_COMMANDS.values())
    for module, function in dict.fromkeys(wanted):
        getattr(importlib.import_module(module), function)(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one-line errors with exit status 2 for bad input, never a traceback."""
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
    except KeyboardInterrupt:  # Ctrl-C: every write is one transaction, rolled back
        print("tuner: interrupted", file=sys.stderr)
        return 130  # the shell's 128 + SIGINT


if __name__ == "__main__":
    sys.exit(main())
