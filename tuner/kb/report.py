"""``tuner report``: what the shadow daemon (``tuner run --shadow``) would have done and saved
over a period, from the account it keeps in the knowledge base (:mod:`tuner.model.account`)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from knowledge.open import open_knowledge
from tuner import arguments
from tuner.model.account import Account, Counts, summary
from tuner.settings import load_settings


def add_report_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``tuner report``."""
    report = commands.add_parser(
        "report", help="what tuner run --shadow would have saved, with its actions and evictions"
    )
    report.add_argument("--settings", type=Path, help="settings.json (knowledge section)")
    report.add_argument(
        "--since", type=arguments.duration, default=7 * 86400.0, help="period, e.g. 7d (default)"
    )
    report.add_argument("--format", choices=("text", "json"), default="text")
    report.set_defaults(run=run_report)


def run_report(args: argparse.Namespace) -> int:
    """``tuner report``: reads the knowledge base only."""
    settings = load_settings(args.settings)
    until = time.time()
    since = until - args.since
    with open_knowledge(settings.knowledge, read_only=True) as kb:
        cycles = kb.shadow_cycles(since, until)
    account = summary(cycles, since, until, settings.pricing.currency)
    if args.format == "json":
        print(json.dumps(account.to_json(), indent=2))
    else:
        print(render(account))
    return 0


def render(account: Account) -> str:
    """The account as text."""
    money = f"{account.saving:.4f} {account.currency}"
    lines = [
        f"shadow account from {_utc(account.since)} to {_utc(account.until)}",
        f"cycles:            {account.cycles} ({account.acting} would have acted, "
        f"{account.held} held by a pause, a maintenance window or the eviction budget)",
        f"would have saved:  {money} (each change's saving per hour until the next cycle)",
        f"changes:           {account.plans} (a plan repeated on an unchanged cluster counts once)",
        f"actions:           {_listed(account.actions)}",
        f"evictions:         {account.evicted}"
        + (f" ({_listed(account.evictions)})" if account.evictions else ""),
        f"cluster changed:   {account.changed} of {account.compared} cycles "
        "(under the previous cycle's plan)",
    ]
    if not account.cycles:
        lines.append("no shadow cycle in the period: run tuner run --shadow first")
    return "\n".join(lines)


def _listed(counts: Counts) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts) or "none"


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))
