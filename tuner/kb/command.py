"""``tuner kb ...``: inspect, edit, move and browse the knowledge base (either backend)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from knowledge.base import KnowledgeBase, KnowledgeError
from knowledge.browser.queries import ready_queries
from knowledge.browser.style import style_command
from knowledge.open import open_knowledge
from knowledge.transfer import copy_history, export_document, read_document, record_all
from tuner import arguments
from tuner.errors import InputError
from tuner.json_input import read_json
from tuner.kb.output import export_target
from tuner.model.execution import Execution, execution_of
from tuner.model.movability import Policy, assess
from tuner.monitor.dump import load_dump
from tuner.redact import redact_url
from tuner.settings import Settings, load_settings

BACKENDS = ("embedded", "neo4j")


def add_kb_parser(commands: argparse._SubParsersAction[Any]) -> None:
    """Register ``tuner kb`` and its subcommands."""
    kb = commands.add_parser("kb", help="inspect and edit the knowledge base")
    sub = kb.add_subparsers(dest="kb_command", required=True)

    def command(name: str, help: str, run: Callable[[argparse.Namespace], int]) -> Any:
        parser = sub.add_parser(name, help=help)
        parser.add_argument("--settings", type=Path, help="settings.json (knowledge section)")
        parser.set_defaults(run=run)
        return parser

    record = command("record", "store a dump as a stable deployment", _record)
    record.add_argument("--snapshot", type=Path, required=True)
    record.add_argument("--load", type=arguments.load, required=True)
    record.add_argument(
        "--window", type=arguments.seconds, default=None, help="seconds it was stable"
    )
    listing = command("list", "stored deployments, newest first", _list)
    listing.add_argument("--limit", type=arguments.count, default=50)
    listing.add_argument("--format", choices=("text", "json"), default="text")
    command("show", "one stored deployment in full (JSON)", _show).add_argument("id", type=_id)
    command("delete", "remove a stored deployment", _delete).add_argument("id", type=_id)
    export = command("export", "every stored deployment as one JSON document", _export)
    export.add_argument("--output", "-o", type=Path, help="file to write (default: stdout)")
    export.add_argument(
        "--force", action="store_true", help="overwrite an --output that is not an export"
    )
    load = command("import", "record the deployments of an export (idempotent)", _import)
    load.add_argument("file", type=Path, help="export document or JSON list ('-': stdin)")
    prune = command("prune", "delete old deployments", _prune)
    prune.add_argument("--older-than", type=arguments.duration, help="e.g. 30d: ended longer ago")
    prune.add_argument("--keep", type=arguments.count, help="keep only the newest N")
    prune.add_argument(
        "--orphans", action="store_true", help="Neo4j: also drop pod types no execution uses"
    )
    migrate = command("migrate", "copy the history from one backend to the other", _migrate)
    migrate.add_argument("--from", dest="source", choices=BACKENDS, required=True)
    migrate.add_argument("--to", dest="target", choices=BACKENDS, required=True)
    browse = command("browse", "Neo4j Browser URL, style and ready queries", _browse)
    browse.add_argument("--load", type=arguments.load, help="load band to show (default: newest)")
    browse.add_argument("--workload", help="namespace/Kind/name (default: from the newest)")
    browse.add_argument(
        "--http", help="Browser base URL (default: the HTTP port the Neo4j server advertises)"
    )


def _id(text: str) -> str:
    """An execution id from the command line: printable text, as every stored id is (bytes
    that are not UTF-8 arrive as surrogate escapes, which are not printable)."""
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"id {text!r} is not printable UTF-8 text")
    return text


def _with_kb(
    args: argparse.Namespace,
    action: Callable[[KnowledgeBase, Settings], int],
    *,
    read_only: bool = False,
    create: bool = True,
) -> int:
    """Run ``action`` on the configured knowledge base (``read_only``: changes nothing;
    without ``create``: a missing store is an error, not a new file)."""
    settings = load_settings(args.settings)
    with open_knowledge(settings.knowledge, read_only=read_only, create=create) as kb:
        return action(kb, settings)


def _record(args: argparse.Namespace) -> int:
    settings = load_settings(args.settings)
    cluster = load_dump(args.snapshot, settings.pricing.price_annotation)
    end = time.time()
    window = settings.windows.measure_s if args.window is None else args.window
    movability = assess(cluster, Policy(settings.analyse.excluded_namespaces))
    execution = execution_of(cluster, movability, settings.pricing, args.load, end - window, end)
    with open_knowledge(settings.knowledge) as kb:
        kb.record(execution)
    print(execution.id)
    return 0


def _list(args: argparse.Namespace) -> int:
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

    return _with_kb(args, run, read_only=True)


def _show(args: argparse.Namespace) -> int:
    def run(kb: KnowledgeBase, _: Settings) -> int:
        execution = kb.get(args.id)
        if execution is None:
            raise InputError(f"no execution {args.id!r} in the knowledge base")
        print(json.dumps(execution.to_json(), indent=2))
        return 0

    return _with_kb(args, run, read_only=True)


def _delete(args: argparse.Namespace) -> int:
    def run(kb: KnowledgeBase, _: Settings) -> int:
        if not kb.delete(args.id):
            raise InputError(f"no execution {args.id!r} in the knowledge base")
        print(f"deleted {args.id}")
        return 0

    return _with_kb(args, run, create=False)


def _export(args: argparse.Namespace) -> int:
    settings = load_settings(args.settings)
    target = None
    if args.output is not None:
        target = export_target(args.output, settings.knowledge, force=args.force)

    def run(kb: KnowledgeBase, _: Settings) -> int:
        text = json.dumps(export_document(kb), indent=2)
        if target is None:
            print(text)
        else:
            target.write(text + "\n")
            print(f"exported to {args.output}", file=sys.stderr)
        return 0

    return _with_kb(args, run, read_only=True)


def _import(args: argparse.Namespace) -> int:
    stdin = str(args.file) == "-"
    document = read_json(args.file, "export", sys.stdin.buffer if stdin else None)
    try:
        executions = read_document(document)
    except ValueError as err:
        raise InputError(f"{args.file}: {err}") from err

    def run(kb: KnowledgeBase, _: Settings) -> int:
        print(f"imported {record_all(kb, executions)} executions")
        return 0

    return _with_kb(args, run)


def _prune(args: argparse.Namespace) -> int:
    if args.older_than is None and args.keep is None and not args.orphans:
        raise InputError("kb prune needs --older-than, --keep or --orphans")
    if args.orphans and load_settings(args.settings).knowledge.backend != "neo4j":
        raise InputError("--orphans applies to the neo4j backend only")

    def run(kb: KnowledgeBase, _: Settings) -> int:
        from knowledge.neo4j_store import Neo4jKnowledgeBase  # the driver loads only when used

        cutoff = None if args.older_than is None else time.time() - args.older_than
        print(f"pruned {kb.prune(older_than=cutoff, keep=args.keep)} executions")
        if args.orphans and isinstance(kb, Neo4jKnowledgeBase):
            print(f"removed {kb.remove_orphan_pods()} unused pod types")
        return 0

    return _with_kb(args, run, create=False)


def _migrate(args: argparse.Namespace) -> int:
    if args.source == args.target:
        raise InputError("kb migrate needs two different backends (--from, --to)")
    settings = load_settings(args.settings).knowledge
    with (
        open_knowledge(replace(settings, backend=args.source), read_only=True) as source,
        open_knowledge(replace(settings, backend=args.target)) as target,
    ):
        copied = copy_history(source, target)
    print(f"copied {copied} executions from {args.source} to {args.target}")
    return 0


def browser_url(uri: str, user: str, http: str | None = None) -> str:
    """Neo4j Browser's address with the connection to ``uri`` pre-filled; ``http`` is the
    server's HTTP base URL (default: port 7474 of the Bolt host). Credentials in ``http`` are
    never printed."""
    bolt = urlsplit(uri)
    host = bolt.hostname or "127.0.0.1"
    base = redact_url(http or f"http://{host}:7474").rstrip("/")
    dbms = f"{bolt.scheme}://{quote(user)}@{host}:{bolt.port or 7687}"
    return f"{base}/browser/?dbms={quote(dbms, safe='')}"


def _browse(args: argparse.Namespace) -> int:
    settings = load_settings(args.settings)
    knowledge = settings.knowledge
    load, workload, http = args.load, args.workload, args.http
    newest: list[Execution] = []
    if load is None or workload is None or http is None:
        try:
            with open_knowledge(knowledge, read_only=True) as kb:
                if load is None or workload is None:
                    newest = kb.list(1)
                if http is None and knowledge.backend == "neo4j":
                    http = _browser_address(kb)
        except KnowledgeError as err:
            print(f"tuner: note: {err}", file=sys.stderr)
    if newest:
        load = newest[0].load if load is None else load
        names = [str(w.workload) for w in newest[0].workloads]
        workload = workload or (names[0] if names else None)
    if knowledge.backend == "neo4j" and http is None:
        print(
            "tuner: note: Neo4j did not say its HTTP port (--http gives Browser's address); "
            "assuming 7474",
            file=sys.stderr,
        )
    if knowledge.backend != "neo4j":
        print(
            "tuner: note: knowledge.backend is 'embedded'; copy the history into Neo4j with "
            "`tuner kb migrate --from embedded --to neo4j` to browse it",
            file=sys.stderr,
        )
    print(f"Neo4j Browser: {browser_url(knowledge.uri, knowledge.user, http)}")
    print(f"Log in as {knowledge.user} with the password in ${knowledge.password_env}.")
    print("\n// Style: run this line in Browser's editor once")
    print(style_command())
    queries = ready_queries(
        1000.0 if load is None else load, settings.load.delta, workload or "ns/Deployment/name"
    )
    for query in queries:
        print(f"\n// {query.title}\n{query.cypher}")
    return 0


def _browser_address(kb: KnowledgeBase) -> str | None:
    """Neo4j Browser's base URL as the Neo4j server advertises it (None: unknown)."""
    from knowledge.neo4j_store import Neo4jKnowledgeBase  # the driver loads only when used

    return kb.browser_address() if isinstance(kb, Neo4jKnowledgeBase) else None
