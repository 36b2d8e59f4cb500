"""Neo4j knowledge base at scale: load 100,000 executions of 20 nodes, time the load lookup.

Run: make bench-kb, or .venv/bin/python bench/kb_lookup.py [--executions 100000] [--nodes 20]

Starts a private Neo4j through scripts/neo4j.sh (free ports, throwaway state directory,
``NEO4J_HEAP``/``NEO4J_PAGECACHE`` from ``--heap``/``--pagecache``) unless ``--uri`` names a
server to use (its password in ``$NEO4J_PASSWORD``; the bench deletes everything there).

Executions get loads spread uniformly over [1,000, 1,000 + executions) (about one per load
unit), 20 nodes of three shapes, each running 3 to 6 of 60 workload types. They are written
with ``Neo4jKnowledgeBase.record_many`` (one UNWIND transaction per batch). Then lookups run
at random loads with a delta chosen so the band holds about 5, 50, 200 and 1,000 executions
(``--band-entries``), two at each load:

- ``daemon``: what the cycle asks for (:func:`tuner.recall.previous_candidates`): the default
  ``knowledge.lookup_limit`` cheapest executions that cost less than the cluster now. The
  "cluster now" is dearer than every recorded deployment (one node more than they have, all
  of the dearest shape), so every execution in the band qualifies and each answer holds the
  full limit: the worst case.
- ``unbounded``: every execution in the band with its full deployment (``--no-unbounded``
  skips it), for comparison: its time follows the size of the band.

Prints medians and 95th percentiles in milliseconds and checks every answer: in the band,
cheaper than asked, cheapest first, and the daemon's answer is the head of the unbounded one.
``--uri URI --reuse`` measures again on a graph an earlier run loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from knowledge.base import load_band
from knowledge.neo4j_store import Neo4jKnowledgeBase
from testkit.neo4j_fixture import Neo4jServer
from tuner.model.cluster import Workload
from tuner.model.execution import Execution, NodeState, WorkloadType, by_name
from tuner.settings import Knowledge

SHAPES = [("e2-standard-4", 4000, 16 * 2**30, 0.134), ("e2-standard-8", 8000, 32 * 2**30, 0.268)]
SHAPES.append(("e2-highmem-4", 4000, 32 * 2**30, 0.181))
WORKLOADS = [
    WorkloadType(
        Workload(f"ns-{i % 6}", "StatefulSet" if i % 10 == 0 else "Deployment", f"app-{i}"),
        100 * (1 + i % 8),
        2**27 * (1 + i % 16),
        i % 10 != 0,
    )
    for i in range(60)
]
Band = tuple[float, float]
"""(load, delta) of one lookup."""


def executions(count: int, nodes: int, seed: int) -> Iterator[Execution]:
    """Deterministic synthetic history."""
    rng = random.Random(seed)
    for i in range(count):
        states = []
        used: set[int] = set()
        for n in range(nodes):
            kind, cpu, memory, price = rng.choice(SHAPES)
            picked = sorted(rng.sample(range(len(WORKLOADS)), rng.randint(3, 6)))
            used.update(picked)
            pods = tuple(
                sorted(((WORKLOADS[w].workload, rng.randint(1, 4)) for w in picked), key=by_name)
            )
            states.append(NodeState(f"node-{n:02d}", cpu, memory, kind, price, pods))
        end = 1.7e9 + i * 600
        yield Execution(
            id=f"x{i:07d}",
            start=end - 600,
            end=end,
            load=1000.0 + rng.random() * count,
            cost=round(sum(s.price for s in states), 6),
            cpu_ratio=round(rng.random(), 6),
            nodes=tuple(states),
            workloads=tuple(sorted((WORKLOADS[w] for w in used), key=lambda w: w.workload)),
        )


def batches(items: Iterator[Execution], size: int) -> Iterator[list[Execution]]:
    batch: list[Execution] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


LOOKUP_LIMIT = Knowledge().lookup_limit
Lookup = Callable[[Neo4jKnowledgeBase, float, float, float], list[Execution]]
"""One way of asking for a band: (store, load, delta, cost of the cluster now) -> executions."""
LOOKUPS: dict[str, Lookup] = {
    "daemon": lambda kb, load, delta, now: kb.find_by_load(
        load, delta, cheaper_than=now, limit=LOOKUP_LIMIT
    ),
    "unbounded": lambda kb, load, delta, _: kb.find_by_load(load, delta),
}


def check(found: list[Execution], load: float, delta: float, cheaper_than: float | None) -> None:
    """An answer is in the band, cheapest first, and (bounded) cheaper and within the limit."""
    low, high = load_band(load, delta)
    assert all(low <= e.load <= high for e in found)
    assert [e.rank for e in found] == sorted(e.rank for e in found)
    assert all(len(e.nodes) > 0 for e in found)
    if cheaper_than is not None:
        assert len(found) <= LOOKUP_LIMIT and all(e.cost < cheaper_than for e in found)


def timed_lookups(
    kb: Neo4jKnowledgeBase, bands: list[Band], kinds: list[str], now: float
) -> dict[str, tuple[list[float], list[int]]]:
    """Per kind of lookup: milliseconds per lookup and executions found, each answer checked;
    ``now`` is the cost of the cluster the daemon compares with."""
    timings: dict[str, tuple[list[float], list[int]]] = {kind: ([], []) for kind in kinds}
    for load, delta in bands:
        answers = {}
        for kind in kinds:
            t0 = time.perf_counter()
            found = LOOKUPS[kind](kb, load, delta, now)
            timings[kind][0].append((time.perf_counter() - t0) * 1000)
            timings[kind][1].append(len(found))
            check(found, load, delta, now if kind == "daemon" else None)
            answers[kind] = found
        if len(answers) == len(LOOKUPS):
            assert answers["daemon"] == answers["unbounded"][:LOOKUP_LIMIT]
    return timings


def summary(times: list[float], sizes: list[int]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "mean_entries": round(statistics.mean(sizes), 1),
        "lookups": len(times),
    }


def bands(executions: int, entries: int, count: int, rng: random.Random) -> list[Band]:
    """``count`` lookups at random loads whose band holds about ``entries`` executions.

    Loads are spread one per load unit, so ``load*(1±delta)`` holds about
    ``2 * load * delta`` of them.
    """
    low, high = 1000.0 + 0.1 * executions, 1000.0 + 0.9 * executions
    found = []
    for _ in range(count):
        load = rng.uniform(low, high)
        found.append((load, entries / (2 * load)))
    return found


def load_history(kb: Neo4jKnowledgeBase, args: argparse.Namespace) -> float:
    """Empty the graph and record the synthetic history; seconds it took."""
    kb.prune(keep=0)
    t0 = time.perf_counter()
    done = 0
    for batch in batches(executions(args.executions, args.nodes, 7), args.batch):
        kb.record_many(batch)
        done += len(batch)
        if done % 10_000 == 0:
            rate = done / (time.perf_counter() - t0)
            print(f"  loaded {done:,} executions ({rate:,.0f}/s)", flush=True)
    load_s = time.perf_counter() - t0
    print(f"loaded {done:,} executions of {args.nodes} nodes in {load_s:.1f} s", flush=True)
    return load_s


def measure(kb: Neo4jKnowledgeBase, args: argparse.Namespace) -> dict[str, Any]:
    """Lookups for every band size of ``--band-entries``."""
    rng = random.Random(1)
    kinds = list(LOOKUPS) if args.unbounded else ["daemon"]
    now = (args.nodes + 1) * max(price for *_, price in SHAPES)  # dearer than every execution
    timed_lookups(kb, bands(args.executions, 5, 20, rng), kinds, now)  # warm caches and plans
    results = {}
    for entries in args.band_entries:
        count = max(20, min(args.lookups, 20_000 // entries))
        timings = timed_lookups(kb, bands(args.executions, entries, count, rng), kinds, now)
        results[f"band_{entries}"] = {kind: summary(*timings[kind]) for kind in kinds}
        print(f"  band of {entries}: {json.dumps(results[f'band_{entries}'])}", flush=True)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--executions", type=int, default=100_000)
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--lookups", type=int, default=200, help="per band size (fewer for wide)")
    ap.add_argument(
        "--band-entries",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[5, 50, 200, 1000],
        help="executions a looked-up band holds, comma-separated (default 5,50,200,1000)",
    )
    ap.add_argument(
        "--unbounded",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the unbounded lookup at each load (default: yes)",
    )
    ap.add_argument("--heap", default="2g")
    ap.add_argument("--pagecache", default="1g")
    ap.add_argument(
        "--uri", help="use this server instead of starting one (password: $NEO4J_PASSWORD)"
    )
    ap.add_argument(
        "--reuse", action="store_true", help="with --uri: keep the history already loaded there"
    )
    args = ap.parse_args()

    results: dict[str, Any] = {
        "executions": args.executions,
        "nodes": args.nodes,
        "lookup_limit": LOOKUP_LIMIT,
    }
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as state:
        server = None
        if args.uri:
            uri, password = args.uri, os.environ.get("NEO4J_PASSWORD", "tuner-test-pw")
        else:
            server = Neo4jServer(
                Path(state), {"NEO4J_HEAP": args.heap, "NEO4J_PAGECACHE": args.pagecache}
            )
            t0 = time.perf_counter()
            server.start()
            print(f"server up in {time.perf_counter() - t0:.1f} s ({server.uri})", flush=True)
            uri, password = server.uri, server.password
        try:
            with Neo4jKnowledgeBase(uri, "neo4j", password, query_timeout_s=600) as kb:
                if not (args.uri and args.reuse):
                    results["load_s"] = round(load_history(kb, args), 1)
                results |= measure(kb, args)
        finally:
            if server is not None:
                server.stop(keep_data=False)
    results |= {"python": platform.python_version(), "machine": platform.machine()}
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
