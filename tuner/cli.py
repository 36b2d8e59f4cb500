"""The ``tuner`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from knowledge.base import KnowledgeBase, KnowledgeError
from knowledge.open import open_knowledge
from knowledge.records import Execution, execution_of
from tuner.analyse.decision import analyse
from tuner.errors import InputError, ServiceError
from tuner.execute.printer import render_text
from tuner.model.cluster import Cluster
from tuner.model.movability import Policy, assess
from tuner.monitor.dump import load_dump
from tuner.plan.report import build_report
from tuner.settings import Settings, load_settings

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
    plan.add_argument("--load", type=_load, help="load served now (enables previous deployments)")
    plan.add_argument("--format", choices=("text", "json"), default="text")
    plan.set_defaults(run=_plan)

    kb = commands.add_parser("kb", help="inspect and edit the knowledge base")
    kb_commands = kb.add_subparsers(dest="kb_command", required=True)
    record = kb_commands.add_parser("record", help="store a dump as a stable deployment")
    record.add_argument("--snapshot", type=Path, required=True)
    record.add_argument("--load", type=_load, required=True)
    record.add_argument("--settings", type=Path)
    record.add_argument("--window", type=float, default=None, help="seconds it was stable")
    record.set_defaults(run=_kb_record)
    listing = kb_commands.add_parser("list", help="stored deployments, newest first")
    listing.add_argument("--settings", type=Path)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--format", choices=("text", "json"), default="text")
    listing.set_defaults(run=_kb_list)
    show = kb_commands.add_parser("show", help="one stored deployment in full (JSON)")
    show.add_argument("id")
    show.add_argument("--settings", type=Path)
    show.set_defaults(run=_kb_show)
    delete = kb_commands.add_parser("delete", help="remove a stored deployment")
    delete.add_argument("id")
    delete.add_argument("--settings", type=Path)
    delete.set_defaults(run=_kb_delete)
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
        history = _history(settings, args.load)
    rng = random.Random(settings.analyse.seed)
    report = build_report(cluster, settings, analyse(cluster, settings, history, rng))
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render_text(report))
    return 0


def _history(settings: Settings, load: float) -> list[Execution]:
    """Knowledge-base entries for this load; an unreachable store skips the option."""
    if settings.knowledge.backend == "embedded" and not Path(settings.knowledge.path).exists():
        return []
    try:
        with open_knowledge(settings.knowledge, read_only=True) as kb:
            return kb.find_by_load(load, settings.load.delta)
    except KnowledgeError as err:
        log.warning("previous-deployment option skipped: %s", err)
        return []


def _with_kb(args: argparse.Namespace, action: Callable[[KnowledgeBase, Settings], int]) -> int:
    settings = load_settings(args.settings)
    with open_knowledge(settings.knowledge) as kb:
        return action(kb, settings)


def _kb_record(args: argparse.Namespace) -> int:
    settings = load_settings(args.settings)
    cluster = load_dump(args.snapshot)
    end = time.time()
    window = settings.windows.measure_s if args.window is None else args.window
    movability = assess(cluster, Policy(settings.analyse.excluded_namespaces))
    execution = execution_of(cluster, movability, settings.pricing, args.load, end - window, end)
    with open_knowledge(settings.knowledge) as kb:
        kb.record(execution)
    print(execution.id)
    return 0


def _kb_list(args: argparse.Namespace) -> int:
    def run(kb: KnowledgeBase, _: Settings) -> int:
        executions = kb.list(args.limit)
        if args.format == "json":
            print(json.dumps([e.to_json() for e in executions], indent=2))
            return 0
        print(f"{'id':<16}  {'end (UTC)':<19}  {'load':>12}  {'cost/h':>9}  {'nodes':>5}  pods")
        for e in executions:
            end = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.end))
            pods = sum(c for n in e.nodes for _, c in n.pods)
            print(
                f"{e.id:<16}  {end:<19}  {e.load:>12g}  {e.cost:>9.4f}  {len(e.nodes):>5}  {pods}"
            )
        return 0

    return _with_kb(args, run)


def _kb_show(args: argparse.Namespace) -> int:
    def run(kb: KnowledgeBase, _: Settings) -> int:
        execution = kb.get(args.id)
        if execution is None:
            raise InputError(f"no execution {args.id!r} in the knowledge base")
        print(json.dumps(execution.to_json(), indent=2))
        return 0

    return _with_kb(args, run)


def _kb_delete(args: argparse.Namespace) -> int:
    def run(kb: KnowledgeBase, _: Settings) -> int:
        if not kb.delete(args.id):
            raise InputError(f"no execution {args.id!r} in the knowledge base")
        print(f"deleted {args.id}")
        return 0

    return _with_kb(args, run)


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
