"""The transition runner: a plan's actions in order, each verified; the first failure stops
the transition (the failing action has already undone its temporary changes, and the nodes the
transition cordoned to empty them are given back: :mod:`.drain`). Each action carried out or
failed is recorded as a Kubernetes Event (:mod:`.action_events`).

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
from tuner.execute.actions import check
from tuner.execute.drain import Drain, DrainFailed, would
from tuner.execute.events import Ref, Sink
from tuner.execute.journal import Journal
from tuner.execute.port import KubePort
from tuner.execute.provision import Provisioning
from tuner.execute.retry import ActionFailed
from tuner.execute.step import Step
from tuner.plan.actions import Action, ProvisionNode, RemoveNode, emptied, first_move, resolved
from tuner.report.text import describe

log = logging.getLogger(__name__)


def run_transition(kube: KubePort, actions: Sequence[Action], events: Sink) -> TransitionResult:
    """Check and apply each action, journaled; never raises for a failed action. The nodes the
    plan empties are drained before its first move (:class:`~.drain.Drain`) and given back
    when the transition stops before removing them."""
    journal = Journal(kube)
    try:
        journal.begin(actions)
    except ActionFailed as err:
        return TransitionResult((), False, f"journal not written, nothing done: {err}")
    drain = Drain(kube, events, actions)
    result = TransitionResult((), False, "the transition was interrupted")
    try:
        result = _carry_out(kube, actions, events, journal, drain)
    finally:
        drain.release(f"the transition stopped before removing it ({result.reason})")
        try:
            journal.end()
        except ActionFailed as err:
            log.error("journal not removed (the next recovery will): %s", err)
    return result


def _carry_out(
    kube: KubePort, actions: Sequence[Action], events: Sink, journal: Journal, drain: Drain
) -> TransitionResult:
    done: list[Action] = []
    eviction_only: list[Action] = []
    elsewhere: list[tuple[Action, str]] = []
    bindings: dict[str, str] = {}
    draining = frozenset(drain.nodes)

    def stopped(reason: str) -> TransitionResult:
        return TransitionResult(tuple(done), False, reason, tuple(eviction_only), tuple(elsewhere))

    for index, action in enumerate(actions):
        label = f"action {index + 1}/{len(actions)} ({describe(action)})"
        if kube.stop_requested():
            return stopped(f"stop requested before {label}")
        live = resolved(action, bindings)
        regarding = journal.ref if isinstance(live, ProvisionNode) else subject(live)
        step: Step | None = None
        try:
            regarding = identified(kube, regarding)
            journal.step(index)
            step = check(kube, live, bindings, draining)
            drain.before(index)  # after the first move's checks: a refused plan drains nothing
            outcome = step.apply(kube, events)
        except DrainFailed as err:
            log.error("before %s: %s", label, err)
            return stopped(f"before {label}: {err}")
        except ActionFailed as err:
            log.error("%s failed: %s", label, err)
            events.record(action_event(live, _real(step, regarding), str(err)))
            return stopped(f"{label} failed: {err}")
        except Exception as err:  # a bug or an unexpected answer: fail, never crash
            log.exception("%s failed unexpectedly", label)
            reason = f"{type(err).__name__}: {err}"
            events.record(action_event(live, _real(step, regarding), reason))
            return stopped(f"{label} failed: {reason}")
        log.info("%s done: %s", label, outcome.note)
        events.record(action_event(live, _real(step, regarding), outcome))
        if isinstance(live, RemoveNode):
            drain.handed_over(live.node)
        if not outcome.steered:
            eviction_only.append(action)
        if outcome.elsewhere and outcome.landed is not None:
            elsewhere.append((action, outcome.landed))
        done.append(action)
    return TransitionResult(
        tuple(done),
        True,
        f"{len(done)} actions done and verified",
        tuple(eviction_only),
        tuple(elsewhere),
    )


def _real(step: Step | None, regarding: Ref) -> Ref:
    """A provision's Event is about the placeholder pod or the node it obtained, once there."""
    if isinstance(step, Provisioning) and step.subject is not None:
        return step.subject
    return regarding


def check_transition(
    kube: KubePort, actions: Sequence[Action], echo: Callable[[str], None]
) -> TransitionResult:
    """The dry run: check every action and say what applying it would do (reads only), the
    drain of the nodes the plan empties before its first move."""
    refused = 0
    nodes = emptied(actions)
    draining, first = frozenset(nodes), first_move(actions)
    for index, action in enumerate(actions):
        label = f"dry run: action {index + 1}/{len(actions)} ({describe(action)})"
        if nodes and index == first:
            try:
                echo(f"dry run: before action {index + 1}: {would(kube, nodes)}")
            except ActionFailed as err:
                refused += 1
                echo(f"dry run: before action {index + 1}: would fail: {err}")
        try:
            echo(f"{label}: {check(kube, action, draining=draining).would()}")
        except ActionFailed as err:
            refused += 1
            echo(f"{label}: would fail: {err}")
    reason = f"dry run: {len(actions)} actions described, none carried out"
    if refused:
        reason += f"; {refused} would fail now"
    return TransitionResult((), refused == 0, reason)
