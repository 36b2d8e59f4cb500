"""Leader election through a ``coordination.k8s.io/v1`` Lease, so two replicas never act at once.

The holder renews the lease every ``duration / 3``; another replica takes it over only after it
expired: the holder and renew time it read stayed the same for a whole duration by its own
clock (client-go's rule, immune to clock skew between replicas). Every write carries the
resourceVersion it read, so two replicas racing for an expired lease cannot both win: the API
server rejects the loser's write with 409 Conflict. The holder counts itself leader only until
two thirds of the duration after its last successful renewal (client-go's renew deadline), so
it stops acting before anyone else may take over; a failed renewal is retried until then,
another holder ends it at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


class LeaderElection:
    """Holds (or waits for) one Lease."""

    def __init__(
        self, api: ApiClient, namespace: str, name: str, identity: str, duration_s: int = 30
    ) -> None:
        self.leases = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration_s = duration_s
        self._leader_until = 0.0
        self.last_error = ""
        """Why the last acquire or renewal failed."""
        self._observed: tuple[object, object] = (None, None)
        self._observed_at = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_leader(self) -> bool:
        """True while this replica holds an unexpired lease."""
        return time.monotonic() < self._leader_until

    def try_acquire(self) -> bool:
        """Acquire or renew the lease once; True when this replica holds it afterwards."""
        try:
            lease: Any = self.leases.read_namespaced_lease(self.name, self.namespace)
        except ApiException as err:
            if err.status != 404:
                return self._failed(f"cannot read lease: {err.status} {err.reason}")
            return self._write(None)
        except HTTPError as err:
            return self._failed(f"cannot read lease: {err}")
        spec = lease.spec
        holder = spec.holder_identity
        record = (holder, spec.renew_time or spec.acquire_time)
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        unchanged_s = time.monotonic() - self._observed_at
        expired = unchanged_s > (spec.lease_duration_seconds or self.duration_s)
        if holder in (self.identity, None, "") or expired:
            return self._write(lease)
        return self._lost(f"lease held by {holder}")

    def release(self) -> None:
        """Give the lease up (on shutdown) so another replica need not wait for expiry."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self.is_leader():
            return
        try:
            held: Any = self.leases.read_namespaced_lease(self.name, self.namespace)
            if held.spec.holder_identity == self.identity:
                held.spec.holder_identity = None
                held.spec.renew_time = None
                self.leases.replace_namespaced_lease(self.name, self.namespace, held)
        except ApiException as err:
            log.warning("could not release lease %s: %s %s", self.name, err.status, err.reason)
        self._leader_until = 0.0

    def keep_renewing(self, on_lost: Callable[[str], None] = lambda _why: None) -> None:
        """Renew every duration / 3 in a background thread; call ``on_lost`` (once, from that
        thread) when the lease is lost, and stop renewing."""

        def loop() -> None:
            while not self._stop.wait(self.duration_s / 3):
                if not self.try_acquire() and not self.is_leader():
                    on_lost(self.last_error)
                    return

        self._thread = threading.Thread(target=loop, daemon=True, name="leader-election")
        self._thread.start()

    def _write(self, lease: Any) -> bool:
        now = _now()
        started = time.monotonic()
        if lease is None:
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                spec=client.V1LeaseSpec(
                    holder_identity=self.identity,
                    lease_duration_seconds=self.duration_s,
                    acquire_time=now,
                    renew_time=now,
                    lease_transitions=0,
                ),
            )
            call = lambda: self.leases.create_namespaced_lease(self.namespace, body)  # noqa: E731
        else:
            spec = lease.spec
            if spec.holder_identity != self.identity:
                spec.lease_transitions = (spec.lease_transitions or 0) + 1
                spec.acquire_time = now
                log.info(
                    "taking over lease %s from %s", self.name, spec.holder_identity or "nobody"
                )
            spec.holder_identity = self.identity
            spec.lease_duration_seconds = self.duration_s
            spec.renew_time = now
            call = lambda: self.leases.replace_namespaced_lease(self.name, self.namespace, lease)  # noqa: E731
        try:
            call()
        except ApiException as err:
            if err.status in (409, 422):
                return self._lost(f"{err.status}: another replica won the lease")
            return self._failed(f"cannot write lease: {err.status} {err.reason}")
        except HTTPError as err:
            return self._failed(f"cannot write lease: {err}")
        self._leader_until = started + self.duration_s * 2 / 3
        self.last_error = ""
        return True

    def _lost(self, why: str) -> bool:
        """Someone else holds the lease: not leader from now on."""
        if self.is_leader():
            log.warning("lost leadership: %s", why)
        self._leader_until = 0.0
        self.last_error = why
        return False

    def _failed(self, why: str) -> bool:
        """The API server did not answer as hoped: still leader until the renew deadline."""
        log.warning("lease %s: %s", self.name, why)
        self.last_error = why
        return False
