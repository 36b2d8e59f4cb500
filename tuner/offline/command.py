"""``tuner plan``: analyse a cluster once and print the plan, changing nothing.

The cluster comes from a ``kubectl get … -o json`` dump or, with ``--live``, from the API
server; with ``--load`` the knowledge base is read for the previous-deployment option.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path
from typing import Any

from knowledge.base import KnowledgeError
from knowledge.open import open_knowledge
from tuner import arguments
from tuner.analyse.decision import analyse
from tuner.model.cluster import Cluster
from tuner.model.execution import Execution
from tuner.model.load import Load
from tuner.monitor.dump import load_dump
from tuner.recall import previous_candidates
from tuner.report.build import build_report
from tuner.report.text import render_text
from tuner.settings import Settings, load_settings

log = logging.getLogger("tuner")


def _cluster(args: argparse.Namespace, settings: Settings) -> Cluster:
    """The cluster from a dump file or, with ``--live``, from the API server."""
    if args.snapshot is not None:
        return load_dump(args.snapshot, settings.pricing.price_annotation)
    from tuner.monitor.kube import api_client, read_cluster

    with api_client(settings.kubernetes) as api:
        return read_cluster(api)


def run_plan(args: argparse.Namespace) -> int:
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


def add_plan_parser(commands: Any) -> None:
    """Register ``plan`` on the CLI's subparsers."""
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
        "--load", type=arguments.load, help="scalar load served now (enables previous deployments)"
    )
    plan.add_argument("--format", choices=("text", "json"), default="text")
    plan.set_defaults(run=run_plan)
