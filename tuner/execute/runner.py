"""The transition runner: a plan's actions in order, each verified; the first failure stops
the transition (the failing action has already undone its temporary changes, and the nodes the
transition cordoned to empty them are given back: :mod:`.drain`). Each action carried out or
failed is recorded as a Kubernetes Event (:mod:`.action_events`).

Consecutive migrations move at once, a **wave** (:func:`tuner.plan.waves.wave`, at most
``execute.max_moves_at_once``, each workload's within its allowance read fresh when the wave
starts: :mod:`.allowance`): every member is checked before any starts, then all are evicted one
after the other and their replacements awaited together (:func:`.actions.together`). A member
that fails stops the transition once every started member finished (its replacement verified
or failed, every mark undone): nothing is left half-done. The members verified are done. A
member moved by a surge of its rollout (:mod:`.surge`: no eviction) moves after the evictions
were awaited, and not at all once a member failed.

A set stop flag (SIGTERM) is checked between actions (and waves) and inside every wait: the
action or wave in flight finishes or rolls back, and no further action starts.

A ``provision_node`` binds its provisional node name (``general-8+1``) to the node it obtained;
every later action of the transition names the real node instead (its checks, its Event).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tuner.cycle import TransitionResult
from tuner.execute.action_events import action_event, identified, subject
from tuner.execute.actions import Migration, check, together
from tuner.execute.allowance import allowance
from tuner.execute.drain import Drain, DrainFailed, would
from tuner.execute.events import Ref, Sink
from tuner.execute.journal import Journal
from tuner.execute.port import KubePort
from tuner.execute.provision import Provisioning
from tuner.execute.retry import ActionFailed, failure
from tuner.execute.step import Done, Step
from tuner.plan.actions import Action, ProvisionNode, RemoveNode, emptied, first_move, resolved
from tuner.plan.waves import wave
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

    def finished(action: Action, live: Action, outcome: Done) -> None:
        if isinstance(live, RemoveNode):
            drain.handed_over(live.node)
        if not outcome.steered:
            eviction_only.append(action)
        if outcome.elsewhere and outcome.landed is not None:
            elsewhere.append((action, outcome.landed))
        done.append(action)

    index = 0
    while index < len(actions):
        action = actions[index]
        label = _label(index, actions)
        if kube.stop_requested():
            return stopped(f"stop requested before {label}")
        rest = [resolved(a, bindings) for a in actions[index:]]
        size = wave(rest, allowance(kube), kube.settings.max_moves_at_once)
        if size > 1:
            moved = _wave(kube, actions, index, rest[:size], events, journal, drain)
            for member, live, outcome in moved.finished:
                finished(member, live, outcome)
            if moved.failure is not None:
                return stopped(moved.failure)
            index += size
            continue
        live = rest[0]
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
        finished(action, live, outcome)
        index += 1
    return TransitionResult(
        tuple(done),
        True,
        f"{len(done)} actions done and verified",
        tuple(eviction_only),
        tuple(elsewhere),
    )


def _label(index: int, actions: Sequence[Action]) -> str:
    return f"action {index + 1}/{len(actions)} ({describe(actions[index])})"


@dataclass(frozen=True)
class _Moved:
    """How a wave went: each member verified (the action, as bound, how it went), and why the
    transition stops (None: every member was verified)."""

    finished: tuple[tuple[Action, Action, Done], ...]
    failure: str | None


def _wave(
    kube: KubePort,
    actions: Sequence[Action],
    first: int,
    live: Sequence[Action],
    events: Sink,
    journal: Journal,
    drain: Drain,
) -> _Moved:
    """Carry out the migrations ``live`` (actions ``first``... as bound) together
    (:func:`~.actions.together`): each checked before any starts (a refusal fails the
    transition with nothing of the wave started), the drain's before the first, one Event per
    member; a failed member stops the transition once every started member finished."""
    labels = [_label(first + i, actions) for i in range(len(live))]
    draining = frozenset(drain.nodes)
    refs = [subject(action) for action in live]
    try:
        refs = [identified(kube, ref) for ref in refs]
        journal.step(first)
    except Exception as err:  # nothing started
        return _failed(live[0], refs[0], labels[0], failure(err), events)
    steps: list[Step] = []
    for action, ref, label in zip(live, refs, labels, strict=True):
        try:
            steps.append(check(kube, action, draining=draining))
        except Exception as err:  # a refusal or an unexpected answer: nothing started
            return _failed(action, ref, label, failure(err), events)
    try:
        drain.before(first)
    except DrainFailed as err:
        log.error("before %s: %s", labels[0], err)
        return _Moved((), f"before {labels[0]}: {err}")
    log.info("actions %d-%d move at once (a wave)", first + 1, first + len(live))
    migrations = [s for s in steps if isinstance(s, Migration)]
    try:
        moved = iter(together(kube, migrations))
    except Exception as err:  # a mark that failed: no member was evicted
        moved = iter([failure(err)])
    finished: list[tuple[Action, Action, Done]] = []
    stop: str | None = None
    for index, (action, step, ref, label) in enumerate(zip(live, steps, refs, labels, strict=True)):
        outcome = (
            next(moved, None) if isinstance(step, Migration) else _after(kube, events, step, stop)
        )
        if outcome is None:
            continue  # not started: an earlier member failed
        if isinstance(outcome, ActionFailed):
            failed = _failed(action, ref, label, outcome, events).failure
            stop = stop or failed
            continue
        log.info("%s done: %s", label, outcome.note)
        events.record(action_event(action, ref, outcome))
        finished.append((actions[first + index], action, outcome))
    return _Moved(tuple(finished), stop)


def _after(
    kube: KubePort, events: Sink, step: Step, stop: str | None
) -> Done | ActionFailed | None:
    """A wave's member that is no eviction (a surge move, one gone since the plan), carried out
    after the evictions were awaited: how it went, or None (not started) once a member failed."""
    if stop is not None:
        return None
    try:
        return step.apply(kube, events)
    except Exception as err:  # a refusal or an unexpected answer: this member failed
        return failure(err)


def _failed(action: Action, ref: Ref, label: str, err: ActionFailed, events: Sink) -> _Moved:
    """A wave's member failed: logged, its Event, the transition's reason to stop."""
    log.error("%s failed: %s", label, err)
    events.record(action_event(action, ref, str(err)))
    return _Moved((), f"{label} failed: {err}")


def _real(step: Step | None, regarding: Ref) -> Ref:
    """A provision's Event is about the placeholder pod or the node it obtained, once there."""
    if isinstance(step, Provisioning) and step.subject is not None:
        return step.subject
    return regarding


WAVE = (
    "a wave: each pod evicted one after the other, then their replacements awaited together; "
    "each workload's moves within its rollout's maxUnavailable and its PodDisruptionBudget now"
)


def check_transition(
    kube: KubePort, actions: Sequence[Action], echo: Callable[[str], None]
) -> TransitionResult:
    """The dry run: check every action and say what applying it would do (reads only), the
    drain of the nodes the plan empties before its first move, and which actions would move
    at once (a wave)."""
    refused = 0
    nodes = emptied(actions)
    draining, first = frozenset(nodes), first_move(actions)
    wave_end = 0
    for index, action in enumerate(actions):
        label = f"dry run: action {index + 1}/{len(actions)} ({describe(action)})"
        if nodes and index == first:
            try:
                echo(f"dry run: before action {index + 1}: {would(kube, nodes)}")
            except ActionFailed as err:
                refused += 1
                echo(f"dry run: before action {index + 1}: would fail: {err}")
        if index >= wave_end:
            size = wave(actions[index:], allowance(kube), kube.settings.max_moves_at_once)
            wave_end = index + size
            if size > 1:
                echo(f"dry run: actions {index + 1}-{wave_end} would move at once ({WAVE})")
        try:
            echo(f"{label}: {check(kube, action, draining=draining).would()}")
        except ActionFailed as err:
            refused += 1
            echo(f"{label}: would fail: {err}")
    reason = f"dry run: {len(actions)} actions described, none carried out"
    if refused:
        reason += f"; {refused} would fail now"
    return TransitionResult((), refused == 0, reason)
