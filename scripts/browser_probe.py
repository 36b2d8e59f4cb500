#!/usr/bin/env python3
"""Drive Neo4j Browser in headless Chromium and screenshot a rendered graph.

A manual check of the stack (scripts/neo4j.sh + scripts/chromium.sh) outside pytest:

1. seeds a small Execution/Node/Pod graph through the Python ``neo4j`` driver
   (only vertices marked ``_probe: true`` are touched);
2. opens Neo4j Browser in Debian's Chromium (tests/support/browser.py: PyPI ``playwright``
   with ``executable_path``, never ``playwright install``) and logs in;
3. applies the tuner's GraSS style (knowledge/browser/tuner.grass; ``--grass FILE`` for
   another, ``--no-style`` for Browser's default colours);
4. runs a query, waits until the graph is drawn and settled, checks every vertex and edge
   was drawn with its label's colour, and saves a PNG of the result frame.

Usage::

    eval "$(scripts/neo4j.sh env)"
    .venv/bin/python scripts/browser_probe.py /tmp/graph.png

Exit status 0 when the graph rendered as expected, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from neo4j import GraphDatabase

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from knowledge.browser.style import label_colours, style_command
from tests.support.browser import neo4j_browser

SEED_CYPHER = """
CREATE (e:Execution {_probe: true, name: 'exec-1', load: 1.0, cost: 1.0})
CREATE (n:Node {_probe: true, name: 'node-a'})
CREATE (e)-[:HAS_NODE]->(n)
WITH n
UNWIND ['pod-1', 'pod-2', 'pod-3'] AS pod
CREATE (p:Pod {_probe: true, name: pod})
CREATE (n)-[:RAN {count: 1}]->(p)
"""
PROBE_QUERY = "MATCH p=(a {_probe: true})-->(b {_probe: true}) RETURN p"
EXPECTED_NODES = 5  # exec-1, node-a, pod-1..3
EXPECTED_RELS = 4  # HAS_NODE + 3 RAN


def log(msg: str) -> None:
    print(f"[browser_probe] {msg}", file=sys.stderr, flush=True)


def seed_graph(uri: str, user: str, password: str) -> None:
    """Replace the probe subgraph (vertices with _probe: true)."""
    with GraphDatabase.driver(uri, auth=(user, password)) as driver:
        driver.execute_query("MATCH (n {_probe: true}) DETACH DELETE n")
        driver.execute_query(SEED_CYPHER)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("screenshot", type=Path, help="PNG file to write")
    ap.add_argument("--http", default=os.environ.get("NEO4J_HTTP", "http://127.0.0.1:7474"))
    ap.add_argument("--uri", default=os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687"))
    ap.add_argument("--user", default=os.environ.get("NEO4J_USER", "neo4j"))
    ap.add_argument("--password", default=os.environ.get("NEO4J_PASSWORD", "tuner-test-pw"))
    ap.add_argument("--grass", type=Path, help="GraSS file to apply (default: the tuner's)")
    ap.add_argument("--no-style", action="store_true", help="keep Browser's default style")
    ap.add_argument("--no-seed", action="store_true", help="do not (re)create the probe graph")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per wait (default 60)")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    grass = args.grass.read_text() if args.grass else None
    if not args.no_seed:
        seed_graph(args.uri, args.user, args.password)
    with neo4j_browser(args.http, args.timeout) as browser:
        browser.connect(args.uri, args.user, args.password)
        if not args.no_style:
            browser.apply_style(style_command(grass))
        frame = browser.run(PROBE_QUERY)
        drawn = browser.wait_for_graph(frame, EXPECTED_NODES)
        rels = browser.relationships(frame)
        args.screenshot.parent.mkdir(parents=True, exist_ok=True)
        frame.screenshot(path=str(args.screenshot))
    log(f"screenshot: {args.screenshot}; drawn: {drawn}, {rels} relationships")
    colours = {} if args.no_style else label_colours(grass)
    problems = [f"expected {EXPECTED_RELS} relationships, saw {rels}"] * (rels != EXPECTED_RELS)
    problems += [f"expected {EXPECTED_NODES} nodes, saw {len(drawn)}"] * (
        len(drawn) != EXPECTED_NODES
    )
    for vertex in drawn:
        caption = vertex.caption
        label = (
            "Execution" if caption.startswith("load") else "Node" if caption == "node-a" else "Pod"
        )
        if label in colours and vertex.fill != colours[label]:
            problems.append(f"{vertex.caption}: fill {vertex.fill} != {label} {colours[label]}")
    for problem in problems:
        log(f"FAIL: {problem}")
    if not problems:
        log("OK: graph rendered")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
