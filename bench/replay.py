"""A scenario replayed on the real control plane against the simulator (docs/fidelity.md).

    .venv/bin/python -m bench.replay --scenario NAME|FILE --comparison hpa|karpenter|karpenter-tuner
        [--hours H] [--speedup K] [--warmup S] [--seed S] [--runs N]
        [--node-removal autoscaler|delete-node] [--results docs/fidelity/results.json]

Runs the simulator's matching strategy once and the real replay ``--runs`` times (one after
the other, each on a fresh private control plane; see :mod:`testkit.replay.run`), adds every
real run to the comparison's entry in ``--results`` (created as needed; the entry is keyed by
comparison, scenario, speedup, hours and seed, so runs made by separate invocations, even at
the same time, gather in one entry), writes each run's curves beside it (``runs/``) and redraws
the comparison's plot (``<comparison>-<scenario>-x<speedup>-<hours>h.png``) and the table
between ``--page``'s fidelity markers (``docs/fidelity.md``). ``--speedup`` compresses the load on
top of a scenario file's own ``speedup``; both sides play the same compressed scenario.
``--warmup`` shortens the warm-up played before the scenario's start (its own is 30 minutes over
the speedup; a two-hour run at speedup 1 would otherwise take two and a half), on both sides;
the entry records it.
``--node-removal`` (``karpenter-tuner`` only) is the daemon's ``execute.node_removal`` on both
sides: ``autoscaler`` (the default; emptied nodes left for Karpenter) or ``delete-node`` (the
Node deleted at once; Karpenter's termination finalizer deletes its NodeClaim and instance);
an entry not at the default records it and keeps its own runs, plot and curves.
Progress (replay time, billed nodes, pending pods) goes to stderr once a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from testkit.replay import compare
from testkit.replay.drive import Recording
from testkit.replay.run import COMPARISONS, replay
from tuner.sim.scenarios import scenario as named_scenario

ROOT = Path(__file__).resolve().parents[1]
NODE_REMOVALS = ("autoscaler", "delete-node")
"""The daemon's ``execute.node_removal`` a replay beside Karpenter may run: a Karpenter user
leaves emptied nodes to its consolidation or deletes the Node (its documented manual removal);
``command`` would need a provider program, which the replay has none of."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", help="a scenario name or file")
    parser.add_argument("--comparison", choices=COMPARISONS)
    parser.add_argument("--hours", type=float, help="scenario hours (before the speedup)")
    parser.add_argument("--speedup", type=float, default=1.0)
    parser.add_argument(
        "--warmup", type=float, help="seconds of warm-up (at most the scenario's own)"
    )
    parser.add_argument("--seed", type=int)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--node-removal", choices=NODE_REMOVALS, default="autoscaler")
    parser.add_argument("--results", type=Path, default=ROOT / "docs/fidelity/results.json")
    parser.add_argument("--page", type=Path, default=ROOT / "docs/fidelity.md")
    parser.add_argument(
        "--resimulate",
        action="store_true",
        help="run the simulator again for every entry of --results (after a simulator change), "
        "with no real run; differences, plots and the page follow",
    )
    args = parser.parse_args()
    if args.resimulate:
        resimulate(args.results, args.page)
        return 0
    if args.scenario is None or args.comparison is None:
        parser.error("--scenario and --comparison are required (or --resimulate)")
    if args.node_removal != "autoscaler" and args.comparison != "karpenter-tuner":
        parser.error(f"--node-removal {args.node_removal}: only with --comparison karpenter-tuner")
    removal = None if args.node_removal == "autoscaler" else args.node_removal
    # SIGTERM (nohup, a job control stop) unwinds like Ctrl-C: the control plane is stopped.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    scenario = named_scenario(args.scenario, args.hours).compressed(args.speedup)
    if args.warmup is not None:
        if not 0 <= args.warmup <= scenario.warmup:
            parser.error(f"--warmup {args.warmup:g}: must be 0 to {scenario.warmup:g} s")
        scenario = replace(scenario, warmup=args.warmup)
    seed = args.seed if args.seed is not None else (scenario.seed or 1)
    played = compare.played(scenario, args.comparison)
    hours = round(scenario.duration * scenario.speedup / 3600, 4)
    key = compare.Key(
        args.comparison,
        scenario.name,
        scenario.speedup,
        hours,
        seed,
        args.scenario,
        args.warmup,
        removal,
    )
    runs_dir = args.results.parent / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    sim = compare.simulate(scenario, args.comparison, seed, node_removal=removal)
    (runs_dir / f"{key.stem}-sim.json").write_text(json.dumps(compare.series_doc(sim)) + "\n")
    print(f"simulator: {compare.figures(sim.series, 5.0)}", file=sys.stderr)
    for number in range(1, args.runs + 1):
        logs = Path(tempfile.gettempdir()) / "replay-logs" / f"{key.stem}-{os.getpid()}-{number}"
        with tempfile.TemporaryDirectory(prefix="replay-") as work:
            result = replay(
                played,
                args.comparison,
                Path(work),
                seed,
                progress=_progress(),
                logs=logs,
                node_removal=args.node_removal,
            )
        print(f"logs kept in {logs}", file=sys.stderr)
        real = compare.run_entry(result, sim)
        entry = compare.add_run(args.results, key, sim, result.tick, real, result.recording)
        print(json.dumps(entry, indent=2))
        _redraw(args.results.parent, entry, scenario.title)
        with compare.locked(args.results):
            compare.update_page(args.page, json.loads(args.results.read_text()))
    return 0


def resimulate(results: Path, page: Path) -> None:
    """The simulator's side of every entry again, against the recorded real runs."""
    with compare.locked(results):
        entries = json.loads(results.read_text())
        for entry in entries:
            key = compare.Key.of(entry)
            scenario = named_scenario(key.source, key.hours).compressed(key.speedup)
            if key.warmup is not None:
                scenario = replace(scenario, warmup=key.warmup)
            sim = compare.simulate(
                scenario, key.comparison, key.seed, node_removal=key.node_removal
            )
            runs_dir = results.parent / "runs"
            (runs_dir / f"{key.stem}-sim.json").write_text(
                json.dumps(compare.series_doc(sim)) + "\n"
            )
            for n, run in enumerate(entry["real"], 1):
                if run.get(compare.CURVES_LOST):
                    continue
                path = runs_dir / f"{key.stem}-real-{n}.json"
                recorded = Recording(replicas=json.loads(path.read_text())["replicas"])
                run["replica_curve_difference"] = compare.replica_curve_difference(sim, recorded)
            compare.summarise(entry, compare.figures(sim.series, 5.0))
            print(f"{key.stem}: simulator {entry['sim']}", file=sys.stderr)
            _redraw(results.parent, entry, scenario.title)
        results.write_text(json.dumps(entries, indent=2) + "\n")
        compare.update_page(page, entries)


def _redraw(folder: Path, entry: dict[str, Any], title: str) -> None:
    """The entry's plot: the simulator's run against the real runs that count and kept their
    curves (run ``n`` of the entry is ``…-real-<n>.json``)."""
    stem = compare.Key.of(entry).stem
    sim = json.loads((folder / "runs" / f"{stem}-sim.json").read_text())
    numbers = compare.drawn(entry)
    real = [json.loads((folder / "runs" / f"{stem}-real-{n}.json").read_text()) for n in numbers]
    png = compare.plot(f"{entry['comparison']}: {title}", sim, real, numbers)
    (folder / f"{stem}.png").write_bytes(png)


def _progress() -> Callable[[float, Recording], None]:
    last = [time.monotonic()]

    def report(t: float, recording: Recording) -> None:
        if time.monotonic() - last[0] < 60:
            return
        last[0] = time.monotonic()
        s = recording.series
        state = f"nodes {s.nodes[-1]}, pending {s.pending[-1]}" if s.time else "warm-up"
        print(f"[replay] t={t:.0f} s: {state}", file=sys.stderr, flush=True)

    return report


if __name__ == "__main__":
    sys.exit(main())
