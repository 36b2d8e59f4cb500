"""``tuner demo``: the tuner's real moderator loop on a simulated cluster, in accelerated time.

Nothing to install or configure: the cluster is a :class:`~tuner.sim.engine.Simulation` (HPAs,
kube-scheduler, the Cluster Autoscaler), the knowledge base is the embedded one in a temporary
file, and the loop is :class:`~tuner.moderator.Moderator` with the default settings, running
``--speed`` times faster than the wall clock. Each cycle prints the window's verdict, the
decision with its reason and, when it acts, the planned transitions (the ``--dry-run`` table).

The cycle's ports are :mod:`tuner.sim.ports` (the same the evaluation runs the cycle through)
and the daemon's :class:`~knowledge.lazy.LazyKnowledge` on the embedded store.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.lazy import LazyKnowledge
from tuner import arguments
from tuner.cycle import CycleReport, Outcome, Ports
from tuner.holds import MemorySafeguards
from tuner.moderator import Moderator
from tuner.report.text import render_text
from tuner.settings import Analyse, Settings
from tuner.sim.engine import Simulation
from tuner.sim.pools import pricing
from tuner.sim.ports import SimActuator, SimObserver
from tuner.sim.scenarios import scenario

DEFAULT_SCENARIO = "demo"
T = TypeVar("T")


def demo_settings(sim: Simulation, knowledge: Path, seed: int) -> Settings:
    """The default settings, priced by the scenario's node type, with the given knowledge file."""
    defaults = Settings()
    return replace(
        defaults,
        pricing=pricing(sim.scenario.pools),
        analyse=Analyse(seed=seed),
        knowledge=replace(defaults.knowledge, backend="embedded", path=str(knowledge)),
    )


def clock(seconds: float) -> str:
    """Simulated time as ``t+H:MM``."""
    minutes = max(int(seconds // 60), 0)
    return f"t+{minutes // 60}:{minutes % 60:02d}"


def describe(report: CycleReport, sim: Simulation) -> str:
    """What one cycle saw and decided, for a person watching."""
    nodes = len(sim.cluster_state.nodes)
    head = f"[{clock(report.end)}] {nodes} nodes, {report.outcome.value}"
    if report.outcome in (Outcome.UNSTABLE, Outcome.UNKNOWN, Outcome.WAITING, Outcome.ERROR):
        return f"{head}: {report.reason}"
    load = "" if report.load is None else f", load {report.load.total:.1f} req/s"
    if report.plan is None or not report.plan.actions:
        return f"{head}{load}: {report.reason}"
    lines = [f"{head}{load}", *("  " + line for line in render_text(report.plan).splitlines())]
    if report.result is not None and not report.result.completed:
        lines.append(f"  stopped: {report.result.reason}")
    return "\n".join(lines)


def run_demo(name: str, hours: float, speed: float, seed: int) -> int:
    """Run the moderator over ``hours`` of simulated time; print every cycle."""
    sim = Simulation(scenario(name, hours), seed)
    sim.advance(sim.scenario.warmup)
    node_type = sim.scenario.pools[0].node_type
    say(
        f"tuner demo: {sim.scenario.title}; {node_type.name} nodes at "
        f"{node_type.price:g} {node_type.currency}/h; HPAs and the Cluster Autoscaler run in the "
        f"simulator, the tuner's moderator at {speed:g}x ({hours:g} simulated h)"
    )
    with tempfile.TemporaryDirectory(prefix="tuner-demo-") as tmp:
        knowledge_path = Path(tmp) / "knowledge.sqlite"
        settings = demo_settings(sim, knowledge_path, seed)
        sim.advance(settings.windows.measure_s)  # no window (nor recorded time) before 0
        end = sim.now + hours * 3600
        execute = settings.execute
        actuator = SimActuator(
            sim, execute.node_removal, execute.max_moves_at_once, execute.surge_lone_pods
        )
        counts: dict[str, int] = {}
        knowledge = LazyKnowledge(lambda: EmbeddedKnowledgeBase(knowledge_path))
        ports = Ports(SimObserver(sim), actuator, knowledge, MemorySafeguards(lambda: sim.now))
        moderator: Moderator

        def on_cycle(report: CycleReport, _seconds: float) -> None:
            counts[report.outcome.value] = counts.get(report.outcome.value, 0) + 1
            if not say(describe(report, sim)) or report.end >= end:
                threading.Thread(target=moderator.stop, daemon=True).start()

        logging.getLogger("tuner.cycle").setLevel(logging.WARNING)  # the cycles say it all
        # a take-back run skipped while a cycle holds the lock is expected in accelerated time
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        moderator = Moderator(settings, ports, on_cycle=on_cycle, speed=speed, start_time=sim.now)
        with knowledge:
            moderator.run_forever()
            stored = len(knowledge.list())
    summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    say(
        f"done: {sum(counts.values())} cycles ({summary}); {actuator.actions} actions carried "
        f"out; {stored} stable deployments in the knowledge base; "
        f"{len(sim.cluster_state.nodes)} nodes at the end"
    )
    return 0


def say(text: str) -> bool:
    """Print a line; False when nobody reads any more (a closed pipe): the demo then stops."""
    try:
        print(text, flush=True)
    except OSError:
        return False
    return True


def add_demo_parser(commands: Any) -> None:
    """Register ``demo`` on the CLI's subparsers."""
    demo = commands.add_parser(
        "demo",
        help="watch the tuner's loop on a simulated cluster (no cluster or database needed)",
        description=(
            "Run the tuner's real moderator loop, with the default settings and an embedded "
            "knowledge base in a temporary file, against a simulated cluster (HPAs, "
            "kube-scheduler, Cluster Autoscaler) in accelerated time, printing every cycle's "
            "decision and planned transitions."
        ),
    )
    demo.add_argument(
        "--scenario", default=DEFAULT_SCENARIO, help="simulator scenario name or file"
    )
    demo.add_argument("--hours", type=arguments.hours, default=2.0, help="simulated hours")
    demo.add_argument(
        "--speed",
        type=arguments.speed,
        default=400.0,
        help=f"simulated seconds per wall second, 1 to {arguments.MAX_SPEED:g} (default 400)",
    )
    demo.add_argument("--seed", type=int, default=1)
    demo.set_defaults(run=lambda a: run_demo(a.scenario, a.hours, a.speed, a.seed))
