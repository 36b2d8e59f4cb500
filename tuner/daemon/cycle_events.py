"""The Kubernetes Event of each cycle: what the daemon decided and why, "do nothing" included.

The Event is about the tuner's Lease (``daemon.leader_election.namespace`` / ``name``), the one
object that stands for the tuner: a fixed name in the tuner's namespace, the same for every
replica and restart. The reference need not exist (it does with leader election on), but its
namespace must, else each cycle's Event is skipped with a warning. Read them with
``kubectl -n tuner-system events --for lease/deployment-tuner``. The actions' own Events are
about the pods and nodes they act on (:mod:`tuner.execute.action_events`).
"""

from __future__ import annotations

from tuner.cycle import CycleReport, Outcome
from tuner.execute.events import Event, Ref
from tuner.report.options import SHOWN
from tuner.settings import LeaderElectionSettings

ACTION = "Decide"
REASONS: dict[Outcome, str] = {
    Outcome.WAITING: "Waiting",
    Outcome.UNSTABLE: "Unstable",
    Outcome.UNKNOWN: "Unknown",
    Outcome.STAYED: "Stayed",
    Outcome.ACTED: "Acted",
    Outcome.PLANNED: "Planned",
    Outcome.FAILED: "TransitionFailed",
    Outcome.SKIPPED: "Skipped",
    Outcome.HELD: "Held",
    Outcome.ERROR: "CycleFailed",
}
WARNINGS = frozenset({Outcome.UNKNOWN, Outcome.FAILED, Outcome.SKIPPED, Outcome.ERROR})
"""Outcomes someone may have to look into."""


def cycle_event(report: CycleReport, lease: LeaderElectionSettings) -> Event:
    """The Event on one cycle: its outcome (or, when it acted, the decision) and why."""
    plan = report.plan
    reason = REASONS[report.outcome]
    notes = [report.reason]
    if report.outcome is Outcome.ACTED and plan is not None and plan.analysis.chosen:
        reason = SHOWN[plan.analysis.chosen.option].event  # names what the cycle did
    if report.outcome is Outcome.ACTED and report.result is not None:
        notes.append(report.result.reason)
    if plan is not None:
        analysis = plan.analysis
        notes.append(
            f"cost {analysis.cost_current:.4f} -> {analysis.cost_after:.4f} {plan.currency}/h"
        )
    regarding = Ref("coordination.k8s.io/v1", "Lease", lease.name, lease.namespace)
    return Event(regarding, ACTION, reason, "; ".join(notes), warning=report.outcome in WARNINGS)
