"""The daemon's :class:`~tuner.cycle.ReserveKeeper`: the room a forecast rise asks for, held as
placeholder pods through the Kubernetes API.

Each reserved node is one placeholder pod in ``execute.journal_namespace``, built as a
provision's (:func:`~tuner.execute.provision.placeholder_pod`: the PriorityClass
``execute.placeholder_priority_class`` with ``preemptionPolicy: Never``, the pool's node
selector, tolerations of its template's taints, a required affinity that keeps it off every
node there is now, so only a new node takes it), labelled ``<prefix>/reserve: <pool>`` besides
``<prefix>/placeholder`` and annotated with its reserve's end (``<prefix>/reserve-until``).

Each :meth:`KubeReserveKeeper.hold`:

1. reads the placeholders standing; one this keeper made that is gone without it removing it
   was preempted by the scheduler (real pods took its room: what it was for) and is not made
   again for as long as the reserve that made it holds;
2. per pool, keeps as many standing placeholders as the reserve asks nodes of that pool (those
   bound first), extending their annotated end to the reserve's; removes the others (also
   those whose reserve ended and that no newer reserve asks for), each verified gone (watch);
3. creates the missing ones, each journaled first (:class:`~tuner.execute.journal.
   ReserveJournal`) and verified to exist (watch), never more than ``forecast.
   reserve_max_nodes`` standing;
4. with ``execute.node_provision: command``, runs the provision command once for each
   placeholder still pending: the node joins and the placeholder binds to it.

With ``execute.node_removal: command`` or ``delete-node``, a node a removed placeholder was
bound to that no real pod took (a false alarm; :func:`~tuner.plan.reserve.releases`) is
released at once rather than left to the autoscaler's unneeded time: its placeholders are
journaled as releasing it, the node is cordoned and tainted as a drain marks it
(:func:`~tuner.execute.drain.drained`), the placeholders deleted (verified gone), the node
verified empty but for DaemonSet pods and removed as a drained node is
(:class:`~tuner.execute.node_removal.NodeRemoval`: the command or the Node's deletion, verified
gone), with a ``Released`` Event on it. A real pod found there after the cordon gives the node
back (uncordoned). A placeholder no reserve asks for that is still pending waits for the node
it asked for (:func:`~tuner.plan.reserve.awaits_its_node`) and is released with it.

A failure stops the hold where it is and says why in the outcome (the next cycle tries again;
a node being released is uncordoned); the start-up recovery deletes every placeholder by its
label, undoes the marks on a node being released and drops the journal
(:func:`~tuner.execute.recover.recover`), so a crash leaves none behind.
"""

from __future__ import annotations

import calendar
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from tuner.errors import ServiceError
from tuner.execute.drain import drained, unmark
from tuner.execute.events import Event, Ref, Sink
from tuner.execute.journal import ReserveJournal
from tuner.execute.node_removal import NodeRemoval, check_remove_node
from tuner.execute.port import KubePort
from tuner.execute.provision import (
    delete_placeholder,
    missing_priority_class,
    placeholder_name,
    placeholder_pod,
    provision_command,
    selector_refusal,
)
from tuner.execute.retry import ActionFailed
from tuner.execute.watch import Check, Verification
from tuner.model.cluster import Cluster
from tuner.model.pools import NodePool, Pools, discover
from tuner.model.reserve import Placeholder, Reserve, ReservedNode, ReserveOutcome
from tuner.plan.actions import ProvisionNode, RemoveNode
from tuner.plan.reserve import awaits_its_node, matched, releases, still_wanted
from tuner.settings import Settings

log = logging.getLogger(__name__)

_ISO = "%Y-%m-%dT%H:%M:%SZ"


def held_of(pod: Any, reserve_label: str, until_annotation: str) -> Placeholder:
    """The placeholder a pod is (an unreadable end: ended)."""
    annotations = pod.metadata.annotations or {}
    try:
        until = float(calendar.timegm(time.strptime(annotations.get(until_annotation, ""), _ISO)))
    except ValueError:
        until = 0.0
    pool = (pod.metadata.labels or {}).get(reserve_label, "")
    return Placeholder(pod.metadata.name, pool, until, pod.spec.node_name or None)


def iso(seconds: float) -> str:
    """Epoch seconds as the annotation writes them."""
    return time.strftime(_ISO, time.gmtime(seconds))


def _exists(name: str) -> Check:
    """Check: the placeholder pod exists (not being deleted)."""

    def check(pods: Mapping[str, Any]) -> Verification | None:
        pod = next((p for p in pods.values() if p.metadata.name == name), None)
        if pod is None or pod.metadata.deletion_timestamp:
            return None
        return Verification(True, f"placeholder pod {name} exists")

    return check


class KubeReserveKeeper:
    """Holds reserves as placeholder pods (see the module); ``read`` is the cluster now (the
    pools, the nodes a placeholder must keep off)."""

    def __init__(
        self,
        kube: KubePort,
        read: Callable[[], Cluster],
        settings: Settings,
        events: Sink | None = None,
    ) -> None:
        self.kube = kube
        self.read = read
        self.settings = settings
        self.events: Sink = events or _Unrecorded()
        """Where the Events of a release go (the actuator's recorder in the daemon)."""
        self.made: dict[str, float] = {}
        """When this keeper made each placeholder standing."""
        self.journal = ReserveJournal(kube)
        self.namespace = kube.settings.journal_namespace
        self.standing: dict[str, Placeholder] = {}
        """The placeholders standing after the last hold."""
        self.taken: list[Placeholder] = []
        """Placeholders preempted while their reserve held (not made again until it ends)."""
        self.commanded: set[str] = set()
        """Placeholders the provision command ran for."""
        self.journaled: set[str] = set()
        """The placeholders this keeper journaled and has not seen gone (the start-up recovery
        dropped any earlier record)."""
        self.journal_written = False
        """Whether this keeper wrote the journal and has not dropped it."""

    def hold(self, reserve: Reserve, now: float) -> ReserveOutcome:
        """Make the placeholders standing match ``reserve`` (see the module)."""
        created: list[str] = []
        removed: list[str] = []
        try:
            standing = self._read_standing(now)
            wanted = still_wanted(reserve, self.taken, now)
            keep, drop, missing = matched(wanted, standing)
            removal = self.kube.settings.node_removal
            gone = [h for h in drop if reserve.last or not self._awaits(h, now, removal)]
            self._drop(gone, removal, removed)
            for held in keep:
                if held.until < reserve.until:
                    self._extend(held, reserve.until)
            cap = self.settings.forecast.reserve_max_nodes
            missing = missing[: max(cap - len(self.standing), 0)]
            command = self.kube.settings.node_provision == "command"
            if missing or (command and self.standing):
                cluster = self.read()
                pools = discover(cluster, self.settings)
                for node in missing:
                    created.append(self._create(pools, cluster, node, reserve.until, now))
                if command:
                    self._provide(pools)
            if not self.standing and self.journal_written:
                self.journal.end()
                self.journaled.clear()
                self.journal_written = False
        except (ActionFailed, ServiceError) as err:  # the cycle's log line says it
            return ReserveOutcome(tuple(created), tuple(removed), len(self.standing), str(err))
        return ReserveOutcome(tuple(created), tuple(removed), len(self.standing))

    def _read_standing(self, now: float) -> list[Placeholder]:
        """The placeholders standing now; those of the last hold that are gone were preempted."""
        keys = self.kube.keys
        pods = self.kube.labelled_pods(keys.reserve)
        found = {
            held.name: held
            for held in (
                held_of(p, keys.reserve, keys.reserve_until)
                for p in pods
                if not p.metadata.deletion_timestamp
            )
        }
        for name, held in self.standing.items():
            if name not in found:
                log.info(
                    "placeholder pod %s (pool %s) was preempted: real pods took its room",
                    name,
                    held.pool,
                )
                self.taken.append(held)
                self.made.pop(name, None)
                self._released(name)
        self.taken = [h for h in self.taken if h.until > now]
        self.standing = dict(found)
        return list(found.values())

    def _awaits(self, held: Placeholder, now: float, removal: str) -> bool:
        """Whether the placeholder waits for its node (:func:`~tuner.plan.reserve.
        awaits_its_node`)."""
        return awaits_its_node(held, self.made.get(held.name), now, self.settings, removal)

    def _drop(self, drop: list[Placeholder], removal: str, removed: list[str]) -> None:
        """Remove the placeholders no reserve asks for; release the nodes they held that no
        real pod took (see the module). Each name goes to ``removed`` once it is gone."""
        verdicts: dict[str, str | None] = {}
        if removal != "autoscaler" and any(h.node is not None for h in drop):
            cluster = self.read()
            verdicts = releases(
                drop, cluster, discover(cluster, self.settings), self.settings, removal
            )
        for node, refusal in verdicts.items():
            if refusal is not None:
                log.info("node %s of a placeholder no reserve asks for is kept: %s", node, refusal)
        released = [node for node, refusal in verdicts.items() if refusal is None]
        for held in drop:
            if held.node not in released:
                self._remove(held)
                removed.append(held.name)
        for node in released:
            self._release(node, [h for h in drop if h.node == node], removed)

    def _release(self, node: str, held: list[Placeholder], removed: list[str]) -> None:
        """Release the node the placeholders ``held`` stand on, journaled, verified (see the
        module); a real pod found on it gives it back."""
        kube = self.kube
        for h in held:
            self.journal.holding(h.name, {"pool": h.pool, "until": iso(h.until), "releasing": node})
            self.journaled.add(h.name)
        self.journal_written = True
        try:
            drained(kube, node, time.time())
            for h in held:
                self._delete(h.name)
                removed.append(h.name)
            removal = check_remove_node(kube, RemoveNode(node))
            if isinstance(removal, NodeRemoval) and removal.pods:
                unmark(kube, node)
                log.info(
                    "node %s kept: a real pod took it (%s)", node, removal.pods[0].metadata.name
                )
            else:
                done = removal.apply(kube, self.events)
                note = f"no pod took the reserve it was added for: {done.note}"
                log.info("node %s released: %s", node, note)
                self.events.record(Event(Ref.node(node), "Reserve", "Released", note))
        except ActionFailed:
            unmark(kube, node)
            raise
        for h in held:
            self._released(h.name)

    def _create(
        self, pools: Pools, cluster: Cluster, node: ReservedNode, until: float, now: float
    ) -> str:
        """Create one placeholder for ``node`` at ``now``, journaled first, verified; its
        name."""
        kube, keys = self.kube, self.kube.keys
        pool = pools.by_name.get(node.pool)
        if pool is None:
            raise ActionFailed(f"pool {node.pool} is not in the cluster any more")
        refusal = selector_refusal(pool)
        if refusal:
            raise ActionFailed(refusal)
        missing = missing_priority_class(kube)
        if missing:
            raise ActionFailed(missing)
        provisional = _provisional(pool)
        name = placeholder_name(keys, provisional)
        action = ProvisionNode(provisional, pool, node.requests)
        existing = tuple(sorted(n.name for n in cluster.nodes))
        body = placeholder_pod(keys, kube.settings, name, action, existing)
        body["metadata"]["labels"][keys.reserve] = pool.name
        body["metadata"]["annotations"][keys.reserve_until] = iso(until)
        requests = action.placeholder_requests
        record = {"pool": pool.name, "until": iso(until), "cpu_m": requests.cpu}
        self.journal.holding(name, {**record, "memory": requests.memory})
        self.journaled.add(name)
        self.journal_written = True
        kube.create_pod(self.namespace, body)
        verdict = kube.wait_pods(
            self.namespace,
            f"{keys.placeholder}={name}",
            _exists(name),
            f"placeholder pod {name} to exist",
        )
        if not verdict.ok:
            raise ActionFailed(verdict.reason)
        self.standing[name] = Placeholder(name, pool.name, until, None)
        self.made[name] = now
        log.info("placeholder pod %s holds a node of pool %s until %s", name, pool.name, iso(until))
        return name

    def _remove(self, held: Placeholder) -> None:
        """Delete a placeholder, verified gone, then drop its journal record."""
        self._delete(held.name)
        self._released(held.name)

    def _delete(self, name: str) -> None:
        """Delete a placeholder, verified gone, and forget it (its journal record stays)."""
        outcome = delete_placeholder(self.kube, self.namespace, name)
        if not outcome.ok:
            raise ActionFailed(outcome.reason)
        self.standing.pop(name, None)
        self.commanded.discard(name)
        self.made.pop(name, None)

    def _released(self, name: str) -> None:
        """The placeholder is gone: drop its journal record (if this keeper wrote one)."""
        if name in self.journaled:
            self.journal.released(name)
            self.journaled.discard(name)

    def _extend(self, held: Placeholder, until: float) -> None:
        """A newer reserve asks for the placeholder: it holds until that one ends."""
        annotation = {self.kube.keys.reserve_until: iso(until)}
        patched = self.kube.patch_pod(
            self.namespace, held.name, lambda _: {"metadata": {"annotations": annotation}}
        )
        if patched is not None:
            self.standing[held.name] = Placeholder(held.name, held.pool, until, held.node)

    def _provide(self, pools: Pools) -> None:
        """``node_provision: command``: run the provision command once per pending placeholder."""
        timeout = self.kube.settings.provision_timeout_s
        for held in sorted(self.standing.values(), key=lambda h: h.name):
            pool = pools.by_name.get(held.pool)
            if held.node is not None or held.name in self.commanded or pool is None:
                continue
            self.commanded.add(held.name)
            provision_command(self.kube.settings, pool, _provisional(pool), timeout)
            log.info("ran the provision command for placeholder pod %s", held.name)


def _provisional(pool: NodePool) -> str:
    """The provisional name a reserve's placeholder asks a node for."""
    return f"{pool.name}+reserve"


class _Unrecorded:
    """A sink that drops Events (a keeper without a recorder: tests, tools)."""

    def record(self, event: Event) -> None:
        """Drop the Event."""
