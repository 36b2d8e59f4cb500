"""The daemon cycle's ports (:class:`tuner.cycle.Ports`) over a simulation, so that the tuner's
real cycle (:func:`tuner.cycle.run_cycle`) runs unchanged against the simulated cluster: in the
evaluation (``strategies.tuner``) and in ``tuner demo`` (through the moderator).

- :class:`SimObserver` (the monitor): advances the simulation to the window's end if it is not
  there yet and judges the window and its warm-up as the monitor does: the whole cluster (node
  set and per-workload pod counts unchanged, no pending pod), and what changed — the nodes and
  workloads to keep out of the plan, the cluster-wide blockers (a pod pending, a node joining or
  leaving but one the tuner left to the autoscaler) — by ``windows.scope``; the nodes it saw
  (up to the last tick observed, as a scrape lags the cluster); the load is the mean load
  served over the window.
- :class:`SimActuator`: reads the simulated cluster and carries actions out through the
  simulated executor, verified, stopping at the first failure.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.cycle import TransitionResult
from tuner.model.cluster import Cluster
from tuner.model.load import Load
from tuner.model.window_report import Scope, Unsettled, Verdict, WindowReport
from tuner.plan.actions import Action
from tuner.plan.take_back import needed_back
from tuner.settings import Execute, Windows
from tuner.sim.engine import Simulation
from tuner.sim.state import PLACEHOLDER_LABEL

SOURCE = "simulator"


class SimObserver:
    """The monitor port over a simulation."""

    def __init__(self, sim: Simulation, windows: Windows | None = None) -> None:
        self.sim = sim
        self.windows = windows or Windows()

    def observe(self, start: float, end: float) -> WindowReport:
        """Stable when the node set and pod counts did not change over the warm-up and
        [start, end]; otherwise what changed, judged by the scope."""
        if end > self.sim.now:
            self.sim.advance(end - self.sim.now)
        warmup = self.windows.warmup_s
        window = self.sim.window(end - start, warmup)
        if window.stable:
            verdict, unsettled = Verdict.STABLE, Unsettled()
            reason = (
                f"nodes and pod counts unchanged for {end - start + warmup:.0f} s, no pod pending"
            )
        else:
            verdict = Verdict.UNSTABLE
            reason = (
                f"{window.pending} pods pending"
                if window.pending
                else f"nodes or pod counts changed {end - window.changed:.0f} s before its end"
            )
            unsettled = Unsettled(
                window.nodes,
                window.workloads,
                window.blockers,
                window.shrinking,
                window.emptied,
                window.only_leaving,
            )
        return WindowReport(
            verdict,
            reason,
            Load.scalar(window.load),
            start,
            end,
            start - warmup,
            source=SOURCE,
            scope=Scope(self.windows.scope),
            unsettled=unsettled,
            observed_nodes=window.observed,
        )


class SimActuator:
    """The actuator port over a simulation."""

    def __init__(
        self,
        sim: Simulation,
        node_removal: str,
        max_moves_at_once: int = Execute.max_moves_at_once,
        surge_lone_pods: bool = Execute.surge_lone_pods,
    ) -> None:
        self.sim = sim
        self.node_removal = node_removal
        self.max_moves_at_once = max_moves_at_once
        """``execute.max_moves_at_once``."""
        self.surge_lone_pods = surge_lone_pods
        """``execute.surge_lone_pods``."""
        self.actions = 0
        """Actions carried out and verified."""

    def read(self) -> Cluster:
        """The simulated cluster now."""
        return self.sim.cluster()

    def check(self, actions: Sequence[Action]) -> TransitionResult:
        """A dry run checks nothing in the simulation."""
        return TransitionResult((), True, "dry run")

    def carry_out(self, actions: Sequence[Action]) -> TransitionResult:
        """Run the actions through the simulated executor (verified, stopping at a failure),
        in simulated time."""
        began = self.sim.now
        results = self.sim.apply(
            actions,
            self.node_removal,
            max_moves_at_once=self.max_moves_at_once,
            surge_lone_pods=self.surge_lone_pods,
        )
        done = tuple(r.action for r in results if r.verified)
        self.actions += len(done)
        failed = next((r for r in results if not r.verified), None)
        took = self.sim.now - began
        if failed is not None:
            return TransitionResult(done, False, failed.detail, took_s=took)
        return TransitionResult(done, True, took_s=took)

    def reclaim_unremoved(self, now: float) -> tuple[str, ...]:
        """None: the simulated Cluster Autoscaler always removes what it is left."""
        return ()

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        """Uncordon the nodes left to the autoscaler that pending pods would run on (those it
        has not started deleting; the tuner's own placeholders, which ask for new room, do not
        count, as in the daemon); their names."""
        sim = self.sim
        taken = (
            needed_back(sim.cluster(), sim.handed_over, lambda p: PLACEHOLDER_LABEL in p.labels)
            if sim.handed_over
            else ()
        )
        for name in taken:
            sim.controls.take_back(name)
        return taken
