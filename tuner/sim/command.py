"""The ``tuner simulate`` subcommand (parser and runner; heavy imports happen on use)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from tuner import arguments
from tuner.errors import ServiceError

STRATEGY_NAMES = (
    "autoscaler",
    "binpacking",
    "descheduler",
    "karpenter",
    "tuner2019",
    "tuner",
    "tuner-unlimited",
    "tuner-reserve",
    "binpacking-tuner",
    "karpenter-tuner",
)


def add_simulate_parser(commands: Any) -> None:
    """Register ``simulate`` on the CLI's subparsers."""
    simulate = commands.add_parser(
        "simulate",
        help="compare the Cluster Autoscaler alone, its peers and the tuners in the simulator",
        description=(
            "Simulate a scenario (a name, 'all', or a scenario JSON file) with the Cluster "
            "Autoscaler alone, with a bin-packing scheduler, with the descheduler, with "
            "Karpenter instead, with the 2019 tuner, and with this tuner (with and without "
            "thresholds, and beside the bin-packing scheduler), on the same load; "
            "print the comparison table and, with --output, write PNG plots and results."
        ),
    )
    simulate.add_argument("--scenario", required=True, help="scenario name, 'all', or a file")
    simulate.add_argument(
        "--strategy",
        action="append",
        choices=STRATEGY_NAMES,
        help="strategies to run (repeatable; default: all; the CA alone always runs)",
    )
    simulate.add_argument("--hours", type=arguments.hours, help="simulated hours after the warm-up")
    simulate.add_argument(
        "--seed", type=int, help="random seed (default: the scenario file's, else 1)"
    )
    simulate.add_argument("--output", type=Path, help="directory for the PNGs and results")
    simulate.add_argument(
        "--jobs",
        type=arguments.jobs,
        default=1,
        help="simulations run at once in worker processes (default 1; same figures)",
    )
    simulate.add_argument(
        "--readme",
        type=Path,
        help="also put the tables and plots between this file's evaluation markers",
    )
    simulate.add_argument(
        "--ledger",
        action="store_true",
        help="also print, per scenario, where each tuner row leaves the room: its cost above "
        "the lower bound by the tuner's last cycle outcome and by node",
    )
    simulate.add_argument(
        "--ledger-doc",
        type=Path,
        help="also put each tuner row's room ledger, one summary row per scenario, between this "
        "file's ledger markers, the rows of other scenarios kept (implies --ledger)",
    )
    simulate.add_argument(
        "--phases",
        type=arguments.phases,
        default=1,
        help="also run every row but CA alone and Karpenter this many times, its first look "
        "10 s later each time, and print how its figures and targets spread (default 1: not)",
    )
    simulate.add_argument(
        "--phases-doc",
        type=Path,
        help="also put the phase spread, one row per scenario and row, between this file's "
        "phases markers, the rows of other scenarios kept (needs --phases 2 or more)",
    )
    simulate.set_defaults(run=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:
    """Run ``tuner simulate``."""
    try:
        from tuner.sim.evaluate import simulate
    except ModuleNotFoundError as err:  # a slim install: the daemon's dependencies only
        raise ServiceError(
            f"{err.name} is not installed: tuner simulate needs the simulator's extra "
            "(pip install 'k8s-deployment-tuner[sim]')"
        ) from err

    if not getattr(args, "verbose", False):  # thousands of simulated cycles: decisions only
        logging.getLogger("tuner.cycle").setLevel(logging.WARNING)
    simulate(
        args.scenario,
        tuple(args.strategy or STRATEGY_NAMES),
        args.hours,
        args.seed,
        args.output,
        args.readme,
        args.jobs,
        args.ledger,
        args.ledger_doc,
        args.phases,
        args.phases_doc,
    )
    return 0
