"""The transition runner: a plan's actions in order, each verified; the first failure stops
the transition (the failing action has already undone its temporary changes). Each action
carried out or failed is recorded as a Kubernetes Event (:mod:`.action_events`).

A set stop flag (SIGTERM) is checked between actions and inside every wait: the action in
flight finishes or rolls back, and no further action starts.

A ``provision_node`` binds its provisional node name (``general-8+1``) to the node it obtained;
every later action of the transition names the real node instead (its checks, its Event).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from tuner.cycle import TransitionResult
from tuner.execute.action_events import action_event, identified, subject
from tuner.execute.actions import Step, check
from tuner.execute.events import Recorder, Ref
from tuner.execute.journal import Journal
from tuner.execute.port import KubePort
from tuner.execute.provision import Provisioning
from tuner.execute.retry import ActionFailed
from tuner.plan.actions import Action, ProvisionNode, resolved
from tuner.report.text import describe

log = logging.getLogger(__name__)


def run_transition(kube: KubePort, actions: Sequence[Action], events: Recorder) -> TransitionResult:
    """Check and apply each action, journaled; never raises for a failed action."""
    journal = Journal(kube)
    done: list[Action] = []
    bindings: dict[str, str] = {}
    try:
        journal.begin(actions)
    except ActionFailed as err:
        return TransitionResult((), False, f"journal not written, nothing done: {err}")
    try:
        for index, action in enumerate(actions):
            label = f"action {index + 1}/{len(actions)} ({describe(action)})"
            if kube.stop_requested():
                return TransitionResult(tuple(done), False, f"stop requested before {label}")
            live = resolved(action, bindings)
            regarding = journal.ref if isinstance(live, ProvisionNode) else subject(live)
            step: Step | None = None
            try:
                regarding = identified(kube, regarding)
                journal.step(index)
                step = check(kube, live, bindings)
                outcome = step.apply(kube)
            except ActionFailed as err:
                log.error("%s failed: %s", label, err)
                regarding = _real(step, regarding)
                events.record(action_event(live, regarding, str(err), ok=False))
                return TransitionResult(tuple(done), False, f"{label} failed: {err}")
            except Exception as err:  # a bug or an unexpected answer: fail, never crash
                log.exception("%s failed unexpectedly", label)
                reason = f"{type(err).__name__}: {err}"
                events.record(action_event(live, _real(step, regarding), reason, ok=False))
                return TransitionResult(tuple(done), False, f"{label} failed: {reason}")
            log.info("%s done: %s", label, outcome)
            events.record(action_event(live, _real(step, regarding), outcome, ok=True))
            done.append(action)
        return TransitionResult(tuple(done), True, f"{len(done)} actions done and verified")
    finally:
        try:
            journal.end()
        except ActionFailed as err:
            log.error("journal not removed (the next recovery will): %s", err)


def _real(step: Step | None, regarding: Ref) -> Ref:
    """A provision's Event is about the placeholder pod or the node it obtained, once there."""
    if isinstance(step, Provisioning) and step.subject is not None:
        return step.subject
    return regarding


def check_transition(
    kube: KubePort, actions: Sequence[Action], echo: Callable[[str], None]
) -> TransitionResult:
    """The dry run: check every action and say what applying it would do (reads only)."""
    refused = 0
    for index, action in enumerate(actions):
        label = f"dry run: action {index + 1}/{len(actions)} ({describe(action)})"
        try:
            echo(f"{label}: {check(kube, action).would()}")
        except ActionFailed as err:
            refused += 1
            echo(f"{label}: would fail: {err}")
    reason = f"dry run: {len(actions)} actions described, none carried out"
    if refused:
        reason += f"; {refused} would fail now"
    return TransitionResult((), refused == 0, reason)
