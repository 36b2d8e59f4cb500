"""The ``tuner`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tuner.daemon.run import add_run_parser
from tuner.errors import InputError, ServiceError
from tuner.execute.onboard import add_onboard_parsers
from tuner.kb.command import add_kb_parser
from tuner.monitor.command import add_monitor_parser
from tuner.offline.command import _load, add_plan_parser
from tuner.sim.command import add_simulate_parser
from tuner.sim.demo import add_demo_parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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

    add_kb_parser(commands, _load)
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
    try:
        return int(args.run(args))
    except InputError as err:
        print(f"tuner: error: {err}", file=sys.stderr)
        return 2
    except ServiceError as err:
        print(f"tuner: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
