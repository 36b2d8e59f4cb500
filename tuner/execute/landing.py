"""Where a migrated or added pod is aimed and where it must not land (:class:`Landing`), the
marks that steer it there for the move (:func:`marked`: the destination's workload label, the
source's cordon, undone whatever happens) and the verdict on where it really landed
(:func:`verified`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from tuner.execute import checks
from tuner.execute.drain import drained, mark, unmark
from tuner.execute.marks import label_node
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.execute.step import Done
from tuner.execute.watch import Check, Verification

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Landing:
    """Where a migrated or added pod is aimed and where it must not land: the workload's pods
    (namespace and label selector), the planned destination and the workload's node label,
    whether the workload is onboarded (then the destination is labelled: a preferred affinity
    steers the pod there), and the nodes the pod must not land on, each with what it is (its
    source, a node the transition empties)."""

    namespace: str
    selector: str
    target: str
    label: str
    onboarded: bool
    avoid: Mapping[str, str]

    def check(self, before: frozenset[str]) -> Check:
        """The verification: a pod not in ``before`` Ready off the nodes to avoid."""
        return checks.new_pod_on(before, self.avoid)

    def wait(self) -> str:
        """What the verification waits for, as the dry run says it."""
        off = ", ".join(sorted(self.avoid))
        ready = f"Ready on a node other than {off}" if off else "Ready"
        return f"{ready} (aimed at {self.target})" if self.onboarded else ready


@contextmanager
def marked(
    kube: KubePort, landings: Iterable[Landing], cordons: Iterable[str | None]
) -> Iterator[None]:
    """Label the destination of each onboarded landing with its workload's label, and cordon
    and taint each node of ``cordons`` for the move, each once; undo them all whatever
    happens."""
    steered: dict[str, None] = {}
    try:
        for target, label in dict.fromkeys((w.target, w.label) for w in landings if w.onboarded):
            mark(kube, target, partial(label_node, keys=kube.keys, label=label))
            steered[target] = None
        since = time.time()
        for node in dict.fromkeys(c for c in cordons if c is not None):
            drained(kube, node, since)
            steered[node] = None
        yield
    finally:
        for node in steered:
            unmark(kube, node)


def onto(
    kube: KubePort,
    landing: Landing,
    before: frozenset[str],
    start: Callable[[], None],
    what: str,
) -> Verification:
    """Steer a new pod: label the destination (onboarded workloads); ``start`` the pod (scale
    up); wait until a pod not in ``before`` is verified (:meth:`Landing.check`); undo the
    label whatever happens."""
    with marked(kube, [landing], []):
        start()
        return kube.wait_pods(landing.namespace, landing.selector, landing.check(before), what=what)


def verified(verdict: Verification, landing: Landing, workload: str) -> Done:
    """The outcome of a verified migrate or add, naming where the pod really landed: for an
    onboarded workload off its destination, both nodes (logged, and the Event's note)."""
    if not verdict.ok:
        raise ActionFailed(verdict.reason)
    elsewhere = landing.onboarded and verdict.node not in (None, landing.target)
    note = verdict.reason + not_onboarded(landing.onboarded, workload)
    if elsewhere:
        note += (
            f", not on its destination {landing.target}: landed elsewhere (the scheduler's "
            "other scores outweighed the destination's label, a preferred affinity)"
        )
        log.warning("workload %s: %s", workload, note)
    return Done(note, landed=verdict.node, steered=landing.onboarded, elsewhere=elsewhere)


def marks_said(landing: Landing, cordon: str | None) -> tuple[str, str]:
    """How a dry run says the marks of a move (:func:`marked`): what comes before it (``label
    node ..., cordon and taint node ... for the move, ``) and their undoing after it."""
    first: list[str] = []
    last: list[str] = []
    if landing.onboarded:
        first.append(f"label node {landing.target} {landing.label}")
        last.append("unlabel")
    if cordon is not None:
        first.append(f"cordon and taint node {cordon} for the move")
        last.append("undo the cordon")
    return "".join(f"{step}, " for step in first), "".join(f", {step}" for step in last)


def not_onboarded(onboarded: bool, workload: str) -> str:
    if onboarded:
        return ""
    return (
        f" (workload {workload} is not onboarded: placement not controlled, its pod lands where "
        "the scheduler puts it)"
    )


DRAINING = "a node this transition empties"


def avoided(draining: frozenset[str], source: str | None = None) -> dict[str, str]:
    avoid = dict.fromkeys(sorted(draining), DRAINING)
    if source:
        avoid[source] = "its source"
    return avoid
