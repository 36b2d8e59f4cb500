"""The executor behind the daemon's :class:`tuner.cycle.Actuator` port, on a live cluster."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from kubernetes.client import ApiClient

from tuner.cycle import TransitionResult
from tuner.errors import ServiceError
from tuner.execute.events import Recorder, identity
from tuner.execute.journal import Journal
from tuner.execute.kube import Kube
from tuner.execute.reclaim import reclaim_unremoved, take_back_needed
from tuner.execute.recover import recover
from tuner.execute.retry import ActionFailed
from tuner.execute.runner import check_transition, run_transition
from tuner.model.cluster import Cluster
from tuner.monitor.cache import ClusterCache
from tuner.monitor.kube import read_cluster
from tuner.plan.actions import Action
from tuner.settings import Settings

log = logging.getLogger(__name__)


class KubeActuator:
    """Reads the cluster and carries out transitions through the Kubernetes API.

    Set :attr:`stop_requested` (e.g. on SIGTERM) to let the action in flight finish or roll
    back and start no other. Call :meth:`recover` once at start-up; :meth:`carry_out` also
    recovers first when a journal shows an interrupted transition. Each acting cycle calls
    :meth:`reclaim_unremoved` first. :attr:`events` records the Kubernetes
    Events of the actions carried out (never by :meth:`check`) and of the daemon's cycles.
    With a :attr:`cache` (the daemon's), :meth:`read` answers from it instead of listing.
    """

    def __init__(
        self,
        api: ApiClient,
        settings: Settings,
        stop_requested: threading.Event | None = None,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        self.stop_requested = stop_requested or threading.Event()
        self.kube = Kube(api, settings.execute, self.stop_requested)
        instance = identity(settings.daemon.leader_election.identity_env)
        self.events = Recorder(api, self.kube.keys.controller, instance)
        self.echo = echo or (lambda line: log.info("%s", line))
        self.cache: ClusterCache | None = None

    def read(self) -> Cluster:
        """The cluster now (reads only): from the cache once synced, else listed."""
        if self.cache is not None:
            return self.cache.cluster()
        return read_cluster(self.api)

    def check(self, actions: Sequence[Action]) -> TransitionResult:
        """The dry run: check each action and echo what it would do; nothing is changed."""
        return check_transition(self.kube, actions, self.echo)

    def carry_out(self, actions: Sequence[Action]) -> TransitionResult:
        """Run the actions in order, verifying each; stop at the first failure. What it took
        is measured from here (a recovery first included)."""
        began = time.monotonic()
        try:
            if Journal(self.kube).read() is not None:
                for line in recover(self.kube):
                    log.warning("recovered before the transition: %s", line)
        except ActionFailed as err:
            reason = f"cannot check for an interrupted transition: {err}"
            result = TransitionResult((), False, reason)
        else:
            result = run_transition(self.kube, actions, self.events)
        return replace(result, took_s=time.monotonic() - began)

    def reclaim_unremoved(self, now: float) -> tuple[str, ...]:
        """Take back the nodes left for an autoscaler that did not remove them within
        ``execute.autoscaler_grace_s``; their names (none when the API fails: logged)."""
        try:
            return reclaim_unremoved(self.kube, self.events, now)
        except ActionFailed as err:
            log.error("nodes left for the autoscaler not checked: %s", err)
            return ()

    def take_back_needed(self, now: float) -> tuple[str, ...]:
        """Take back the nodes left for an autoscaler that pending pods would run on; their
        names (none when the cluster cannot be read or the API fails: logged)."""
        try:
            return take_back_needed(self.kube, self.events, self.read())
        except (ActionFailed, ServiceError) as err:
            log.error("nodes left for the autoscaler not checked for pending pods: %s", err)
            return ()

    def recover(self) -> list[str]:
        """Undo what an earlier run left behind; one line per thing undone.

        An API server that stays unreachable is a :class:`~tuner.errors.ServiceError`.
        """
        try:
            return recover(self.kube)
        except ActionFailed as err:
            raise ServiceError(f"recovery of leftovers failed: {err}") from err
