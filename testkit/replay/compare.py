"""The simulator against a real replay of the same scenario: the simulator's run of the
matching strategy, the figures of both, their differences, the fidelity results file and the
plots.

Matching strategies: ``hpa`` — no autoscaler at all (the pools fixed at their initial size, the
same pinned scenario the real replay plays), kube-scheduler's scoring and the HPA;
``karpenter`` — Karpenter instead of the Cluster Autoscaler; ``karpenter-tuner`` — the tuner
with the daemon's defaults beside Karpenter (``tuner.sim.strategies.tuner.KarpenterTuner``).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import statistics
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from testkit.replay.drive import Recording
from testkit.replay.objects import service_key
from testkit.replay.run import RunResult, pinned
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.metrics import ActionCounts, TickSeries
from tuner.sim.report import StrategyRun
from tuner.sim.state import SimCluster, SimPod
from tuner.sim.strategies import STRATEGIES
from tuner.sim.strategies.tuner import KarpenterTuner
from tuner.sim.strategy import Strategy

FIGURES = ("cost", "pending_pod_seconds", "evictions_per_hour", "seconds_over_cpu")
PENDING_REASONS = 10
"""How many of a run's pending reasons (the most pod-seconds first) its entry keeps."""
SIM_STRATEGY = {
    "hpa": "fixed-nodes",
    "karpenter": "karpenter",
    "karpenter-tuner": "karpenter-tuner",
}


class NoAutoscaler:
    """An autoscaler that never adds or removes a node."""

    def step(self, cluster: SimCluster, unschedulable: list[SimPod], now: float) -> list[SimPod]:
        """Nothing."""
        return []


class FixedNodes(Strategy):
    """The ``hpa`` comparison's strategy: HPAs and kube-scheduler on fixed nodes."""

    name = "fixed-nodes"

    def autoscaler(self, scenario: Scenario) -> NoAutoscaler:
        """No Cluster Autoscaler."""
        return NoAutoscaler()

    def on_tick(self, sim: Simulation) -> None:
        """Nothing beyond the HPAs and the scheduler."""


def played(scenario: Scenario, comparison: str) -> Scenario:
    """The scenario both sides play for ``comparison``."""
    return pinned(scenario) if comparison == "hpa" else scenario


def simulate(
    scenario: Scenario,
    comparison: str,
    seed: int,
    tick: float = 5.0,
    node_removal: str | None = None,
) -> Recording:
    """The simulator's run of the matching strategy, recorded as a replay records;
    ``node_removal`` is the daemon's ``execute.node_removal`` for ``karpenter-tuner`` (None:
    its default, ``autoscaler``). The strategy runs from the warm-up's start, as the replay
    starts ``tuner run`` before it plays the warm-up (the evaluation's tuner starts after it)."""
    scenario = played(scenario, comparison)
    strategy: Strategy
    if comparison == "hpa":
        strategy = FixedNodes()
    elif node_removal is not None:
        strategy = KarpenterTuner(scenario, seed, node_removal)
    else:
        strategy = STRATEGIES[SIM_STRATEGY[comparison]](scenario, seed)
    sim = Simulation(scenario, seed, strategy, tick, strategy_from=-scenario.warmup)
    hpa_services = [s for s in scenario.services if s.hpa is not None]
    recording = Recording(series=sim.series, replicas={service_key(s): [] for s in hpa_services})
    while sim.now < scenario.duration - 1e-9:
        at = sim.now
        sim.advance(tick)  # the controllers ran at `at`, the tick was observed there
        if at >= 0:
            for service in hpa_services:
                recording.replicas[service_key(service)].append(sim.replicas[service])
    return recording


def figures(series: TickSeries, tick: float) -> dict[str, float]:
    """The four compared figures (and node-hours) of a recorded series."""
    outcome = StrategyRun("", series, tick, ActionCounts(), {})
    return {
        "cost": round(outcome.cost, 4),
        "pending_pod_seconds": outcome.pending_pod_seconds,
        "evictions_per_hour": round(outcome.evictions_per_hour, 3),
        "seconds_over_cpu": outcome.short_seconds,
        "node_hours": round(outcome.node_hours, 3),
    }


def replica_curve_difference(sim: Recording, real: Recording) -> float | None:
    """Mean absolute difference of the HPA-scaled replica counts, tick by tick and service by
    service, over their mean (both curves); None without HPA-scaled services."""
    diffs: list[int] = []
    total = 0
    for key, ours in sim.replicas.items():
        theirs = real.replicas.get(key, [])
        n = min(len(ours), len(theirs))
        diffs += [abs(a - b) for a, b in zip(ours[:n], theirs[:n], strict=True)]
        total += sum(ours[:n]) + sum(theirs[:n])
    if not diffs or not total:
        return None
    return round(sum(diffs) / len(diffs) / (total / (2 * len(diffs))), 4)


def relative(sim: float, real: Sequence[float]) -> float | None:
    """How far the simulator is from the real runs' median, as a fraction of it."""
    middle = statistics.median(real)
    return round((sim - middle) / middle, 4) if middle else None


def run_entry(result: RunResult, sim: Recording) -> dict[str, Any]:
    """One real run as it goes into the results file."""
    entry: dict[str, Any] = figures(result.recording.series, result.tick)
    entry |= {
        "replica_curve_difference": replica_curve_difference(sim, result.recording),
        "evictions_by_actor": dict(result.recording.evictions_by_actor),
        "pending_pod_seconds_by_reason": {
            reason: ticks * result.tick
            for reason, ticks in result.recording.pending_reasons.most_common(PENDING_REASONS)
        },
        "wall_s": round(result.wall_s),
        "late_ticks": result.late_ticks,
        "usage_patches": result.patches,
        "load_average_median": round(statistics.median(result.load_average), 2)
        if result.load_average
        else None,
    }
    if result.daemon is not None:
        entry["daemon"] = result.daemon.as_dict()
    return entry


@contextmanager
def locked(path: Path) -> Any:
    """An exclusive lock on ``path`` (two replays may finish at once), held on a lock file in
    the temporary directory named after it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"replay-results-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@dataclass(frozen=True)
class Key:
    """What identifies a comparison in the results file, and the scenario it was played from."""

    comparison: str
    scenario: str
    speedup: float
    hours: float
    seed: int
    source: str
    """The scenario's name or file, as given to the bench."""
    warmup: float | None = None
    """Seconds of warm-up played before the scenario's start when shorter than its own
    (``--warmup``); None: the scenario's own (30 minutes over the speedup)."""
    node_removal: str | None = None
    """The daemon's ``execute.node_removal`` for ``karpenter-tuner`` when not its default
    (``--node-removal``); None: ``autoscaler``, as every entry recorded without the key."""

    @property
    def stem(self) -> str:
        """The file name stem of its plot and its runs' curves."""
        stem = f"{self.comparison}-{self.scenario}-x{self.speedup:g}-{self.hours:g}h"
        stem = stem if self.warmup is None else f"{stem}-w{self.warmup:g}s"
        return stem if self.node_removal is None else f"{stem}-{self.node_removal}"

    def matches(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` is this comparison's."""
        ours = (
            self.comparison,
            self.scenario,
            self.speedup,
            self.hours,
            self.seed,
            self.warmup,
            self.node_removal,
        )
        return ours == (
            entry["comparison"],
            entry["scenario"],
            entry["speedup"],
            entry["hours"],
            entry["seed"],
            entry.get("warmup"),
            entry.get("node_removal"),
        )

    @staticmethod
    def of(entry: dict[str, Any]) -> Key:
        """An entry's key."""
        return Key(
            entry["comparison"],
            entry["scenario"],
            entry["speedup"],
            entry["hours"],
            entry["seed"],
            entry["source"],
            entry.get("warmup"),
            entry.get("node_removal"),
        )


WITHDRAWN = "withdrawn"
"""A real run's key saying why it no longer counts (recorded with a harness fault since fixed):
it stays in the results file and is listed under the table, but no median counts it."""


CURVES_LOST = "curves_lost"
"""A real run's key saying why its curves file is missing: its figures (computed from its own
recording when it ended) still count, but no plot draws it and ``--resimulate`` keeps its
recorded replica curve difference."""


def drawn(entry: dict[str, Any]) -> list[int]:
    """The numbers (from 1) of the entry's real runs a plot draws: counted, curves kept."""
    return [
        n
        for n, run in enumerate(entry["real"], 1)
        if not run.get(WITHDRAWN) and not run.get(CURVES_LOST)
    ]


def counted(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The entry's real runs that count (not withdrawn)."""
    return [r for r in entry["real"] if not r.get(WITHDRAWN)]


def summarise(entry: dict[str, Any], sim: dict[str, float]) -> None:
    """Set the entry's simulator figures and its differences to the median of the real runs
    that count (None where none does)."""
    entry["sim"] = sim
    real = counted(entry)
    entry["difference"] = {
        f: relative(sim[f], [r[f] for r in real]) if real else None for f in FIGURES
    }
    curves = [r["replica_curve_difference"] for r in real]
    known = [c for c in curves if c is not None]
    entry["replica_curve_difference"] = round(statistics.mean(known), 4) if known else None
    loads = [r["load_average_median"] for r in real if r["load_average_median"] is not None]
    entry["load_average_median"] = statistics.median(loads) if loads else None


def add_run(
    results: Path, key: Key, sim: Recording, tick: float, real: dict[str, Any], curves: Recording
) -> dict[str, Any]:
    """Add one real run to the comparison's entry in ``results`` (created as needed) and its
    ``curves`` beside it as ``runs/<stem>-real-<n>.json``, ``n`` its place in the entry, both
    under the lock (two replays of one comparison may finish at once); the entry, with the
    differences against the median of its real runs."""
    with locked(results):
        entries: list[dict[str, Any]] = json.loads(results.read_text()) if results.exists() else []
        entry = next((e for e in entries if key.matches(e)), None)
        if entry is None:
            entry = {
                "comparison": key.comparison,
                "scenario": key.scenario,
                "source": key.source,
                "speedup": key.speedup,
                "hours": key.hours,
                "seed": key.seed,
                **({} if key.warmup is None else {"warmup": key.warmup}),
                **({} if key.node_removal is None else {"node_removal": key.node_removal}),
                "real": [],
            }
            entries.append(entry)
        entry["real"].append(real)
        runs = results.parent / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        curve_file = runs / f"{key.stem}-real-{len(entry['real'])}.json"
        curve_file.write_text(json.dumps(series_doc(curves)) + "\n")
        summarise(entry, figures(sim.series, tick))
        results.write_text(json.dumps(entries, indent=2) + "\n")
    return entry


def series_doc(recording: Recording) -> dict[str, Any]:
    """A recording's curves for the plots (kept beside the results file)."""
    s = recording.series
    return {
        "time": s.time,
        "nodes": s.nodes,
        "cost": [round(c, 5) for c in s.cost],
        "pending": s.pending,
        "load": [round(x, 3) for x in s.load],
        "evictions": s.evictions,
        "replicas": dict(recording.replicas),
    }


def plot(
    title: str,
    sim: dict[str, Any],
    real: Sequence[dict[str, Any]],
    numbers: Sequence[int] | None = None,
) -> bytes:
    """Simulator against every real run over time: billed nodes, pending pods, the replicas of
    the HPA-scaled services (summed), and the load; PNG. ``numbers`` are the runs' numbers in
    their entry (default 1, 2, ...)."""
    numbers = numbers or range(1, len(real) + 1)
    figure, axes = plt.subplots(4, 1, figsize=(10, 9), sharex=True)
    panels = (
        ("billed nodes", lambda d: d["nodes"]),
        ("pending pods", lambda d: d["pending"]),
        (
            "HPA replicas (sum)",
            lambda d: [sum(v) for v in zip(*d["replicas"].values(), strict=False)],
        ),
        ("load", lambda d: d["load"]),
    )
    for axis, (label, pick) in zip(axes, panels, strict=True):
        minutes = [t / 60 for t in sim["time"]]
        values = pick(sim)
        axis.step(
            minutes[: len(values)],
            values,
            where="post",
            label="simulator",
            color="tab:blue",
            linewidth=2.5,
            alpha=0.5,
        )
        for number, run in zip(numbers, real, strict=True):
            values = pick(run)
            axis.step(
                [t / 60 for t in run["time"]][: len(values)],
                values,
                where="post",
                label=f"real run {number}",
                linewidth=1.0,
            )
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[0].set_title(title)
    axes[0].legend(loc="upper right", fontsize="small")
    axes[-1].set_xlabel("replay time (min)")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def _cell(sim: float, real: Sequence[float], difference: float | None, digits: int) -> str:
    real_part = " / ".join(f"{r:.{digits}f}" for r in real)
    diff = "—" if difference is None else f"{difference * 100:+.0f} %"
    return f"{sim:.{digits}f} · {real_part} ({diff})"


def table(entries: Sequence[dict[str, Any]]) -> str:
    """The results file as a Markdown table: per comparison, the simulator's figure, each real
    run's, and the simulator's difference to the real runs' median (the daemon's node removal
    beside the comparison where it is not the default)."""
    rows = [
        "| comparison | scenario | speedup | hours | cost: sim · real (diff) "
        "| pending pod-s | evictions/h | s over 100 % CPU | replica curves | load |",
        "|---|---|---:|---:|---|---|---|---|---:|---:|",
    ]
    withdrawn: list[str] = []
    for e in entries:
        real, sim, diff = counted(e), e["sim"], e["difference"]
        withdrawn += [
            f"- {e['comparison']} on {e['scenario']} (speedup {e['speedup']:g}), real run "
            f"{n}: {r[WITHDRAWN]}"
            for n, r in enumerate(e["real"], 1)
            if r.get(WITHDRAWN)
        ]
        if not real:
            continue
        cells = [
            _cell(sim[f], [r[f] for r in real], diff[f], d)
            for f, d in (
                ("cost", 3),
                ("pending_pod_seconds", 0),
                ("evictions_per_hour", 1),
                ("seconds_over_cpu", 0),
            )
        ]
        curve = e["replica_curve_difference"]
        removal = e.get("node_removal")
        name = f"{e['comparison']} ({removal})" if removal else e["comparison"]
        rows.append(
            f"| {name} | {e['scenario']} | {e['speedup']:g} | {e['hours']:g} | "
            + " | ".join(cells)
            + f" | {'—' if curve is None else f'{curve * 100:.1f} %'}"
            + f" | {e['load_average_median']:.1f} |"
        )
    if withdrawn:
        rows += ["", "Withdrawn real runs (kept in the results file, counted nowhere):", *withdrawn]
    return "\n".join(rows)


BEGIN = "<!-- fidelity:begin -->"
END = "<!-- fidelity:end -->"


def update_page(page: Path, entries: Sequence[dict[str, Any]]) -> None:
    """Put the table between the page's fidelity markers."""
    text = page.read_text(encoding="utf-8")
    head, begin, rest = text.partition(BEGIN)
    _old, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{page} has no {BEGIN} ... {END} section")
    page.write_text(f"{head}{BEGIN}\n{table(entries)}\n{END}{tail}", encoding="utf-8")
