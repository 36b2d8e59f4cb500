"""The ``tuner`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from tuner.daemon.run import add_run_parser
from tuner.errors import InputError, ServiceError
from tuner.execute.onboard import add_onboard_parsers
from tuner.kb.command import add_kb_parser
from tuner.monitor.command import add_monitor_parser
from tuner.offline.command import add_plan_parser
from tuner.redact import RedactingFilter, redact_url
from tuner.sim.command import add_simulate_parser
from tuner.sim.demo import add_demo_parser


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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tuner", description="Deployment tuner for Kubernetes: fewer, fuller nodes."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True)

    add_plan_parser(commands)

    add_monitor_parser(commands)

    add_run_parser(commands)
    add_simulate_parser(commands)

    add_onboard_parsers(commands)
    add_demo_parser(commands)

    add_kb_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one-line errors with exit status 2 for bad input, never a traceback."""
    parser = _parser()
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


if __name__ == "__main__":
    sys.exit(main())
