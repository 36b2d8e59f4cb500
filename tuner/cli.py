"""The ``tuner`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from knowledge.base import KnowledgeError
from knowledge.open import open_knowledge
from tuner.analyse.decision import analyse
from tuner.cycle import previous_candidates
from tuner.daemon.run import add_run_parser
from tuner.errors import InputError, ServiceError
from tuner.execute.onboard import add_onboard_parsers
from tuner.kb.command import add_kb_parser
from tuner.model.cluster import Cluster
from tuner.model.execution import Execution
from tuner.model.load import Load
from tuner.monitor.command import run_monitor, window_seconds
from tuner.monitor.dump import load_dump
from tuner.report.build import build_report
from tuner.report.text import render_text
from tuner.settings import Settings, load_settings
from tuner.sim.command import add_simulate_parser
from tuner.sim.demo import add_demo_parser

log = logging.getLogger("tuner")


def _load(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"load must be a number, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"load must be a finite number >= 0, not {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuner", description="Deployment tuner for Kubernetes: fewer, fuller nodes."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(dest="command", required=True)

    plan = commands.add_parser(
        "plan", help="what the tuner would do with a cluster dump (reads only)"
    )
    source = plan.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", type=Path, help="kubectl get ... -o json dump")
    source.add_argument(
        "--live", action="store_true", help="read the cluster of settings.kubernetes (read-only)"
    )
    plan.add_argument("--settings", type=Path, help="settings.json (default: built-in defaults)")
    plan.add_argument(
        "--load", type=_load, help="scalar load served now (enables previous deployments)"
    )
    plan.add_argument("--format", choices=("text", "json"), default="text")
    plan.set_defaults(run=_plan)

    monitor = commands.add_parser(
        "monitor", help="the last window: load, stability verdict and why (reads only)"
    )
    monitor.add_argument("--settings", type=Path, help="settings.json (load query, Prometheus)")
    monitor.add_argument(
        "--window", type=window_seconds, help="window length in seconds (default: measure_s)"
    )
    monitor.add_argument("--format", choices=("text", "json"), default="text")
    monitor.set_defaults(run=lambda a: run_monitor(a.settings, a.window, a.format))

    add_run_parser(commands)
    add_simulate_parser(commands)

    add_onboard_parsers(commands)
    add_demo_parser(commands)

    add_kb_parser(commands, _load)
    return parser


def _cluster(args: argparse.Namespace, settings: Settings) -> Cluster:
    """The cluster from a dump file or, with ``--live``, from the API server."""
    if args.snapshot is not None:
        return load_dump(args.snapshot)
    from tuner.monitor.kube import api_client, read_cluster

    with api_client(settings.kubernetes) as api:
        return read_cluster(api)


def _plan(args: argparse.Namespace) -> int:
    settings = load_settings(args.settings)
    cluster = _cluster(args, settings)
    history: list[Execution] = []
    if args.load is not None:
        history = _history(cluster, settings, args.load)
    rng = random.Random(settings.analyse.seed)
    report = build_report(cluster, settings, analyse(cluster, settings, history, rng))
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render_text(report))
    return 0


def _history(cluster: Cluster, settings: Settings, load: float) -> list[Execution]:
    """The entries the daemon would read for this scalar load (executions recorded with a load
    vector do not match it); an unreachable store skips the option."""
    if settings.knowledge.backend == "embedded" and not Path(settings.knowledge.path).exists():
        return []
    try:
        with open_knowledge(settings.knowledge, read_only=True) as kb:
            return previous_candidates(kb, cluster, settings, Load.scalar(load))
    except KnowledgeError as err:
        log.warning("previous-deployment option skipped: %s", err)
        return []


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
