"""Leader election through a real Lease on a real API server: one leader, takeover after expiry."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from testkit.cluster_fixture import ClusterHarness
from tuner.daemon.leader import LeaderElection

DURATION_S = 3
NAMESPACE = "default"


@pytest.fixture
def lease_name() -> str:
    return f"tuner-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def electors(kube_harness: ClusterHarness, lease_name: str) -> Iterator[list[LeaderElection]]:
    made: list[LeaderElection] = []
    apis: list[Any] = []
    for identity in ("replica-a", "replica-b"):
        api = kube_harness.new_api()
        apis.append(api)
        made.append(LeaderElection(api, NAMESPACE, lease_name, identity, DURATION_S))
    yield made
    for api in apis:
        api.close()


def holder(kube_harness: ClusterHarness, name: str) -> client.V1Lease:
    with kube_harness.new_api() as api:
        lease: client.V1Lease = client.CoordinationV1Api(api).read_namespaced_lease(name, NAMESPACE)
        return lease


def acquire_within(elector: LeaderElection, seconds: float) -> float | None:
    """Try every 0.2 s; the monotonic time of success, or None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if elector.try_acquire():
            return time.monotonic()
        time.sleep(0.2)
    return None


def test_only_one_replica_leads(
    kube_harness: ClusterHarness, electors: list[LeaderElection], lease_name: str
) -> None:
    a, b = electors
    assert a.try_acquire()
    assert not b.try_acquire()
    assert a.is_leader() and not b.is_leader()
    assert a.try_acquire(), "the holder renews"
    assert not b.try_acquire()
    assert holder(kube_harness, lease_name).spec.holder_identity == "replica-a"


def test_the_other_takes_over_only_after_the_leader_stopped_renewing(
    kube_harness: ClusterHarness, electors: list[LeaderElection], lease_name: str
) -> None:
    a, b = electors
    assert a.try_acquire()
    assert not b.try_acquire()  # b starts watching the lease's renew time from here
    watched_from = time.monotonic()
    taken = acquire_within(b, 4 * DURATION_S)  # a never renews again
    assert taken is not None
    assert taken - watched_from >= DURATION_S
    lease = holder(kube_harness, lease_name)
    assert lease.spec.holder_identity == "replica-b"
    assert lease.spec.lease_transitions == 1
    assert not a.is_leader()  # its renew deadline (2/3 of the duration) has passed
    assert not a.try_acquire()


def test_a_renewing_leader_keeps_the_lease_and_a_release_hands_it_over(
    kube_harness: ClusterHarness, electors: list[LeaderElection], lease_name: str
) -> None:
    a, b = electors
    lost: list[str] = []
    assert a.try_acquire()
    a.keep_renewing(lost.append)
    assert acquire_within(b, 2 * DURATION_S) is None
    assert lost == [] and a.is_leader()
    a.release()
    assert holder(kube_harness, lease_name).spec.holder_identity is None
    assert b.try_acquire(), "a released lease is free at once"


def test_a_leader_whose_lease_is_taken_reports_the_loss(
    kube_harness: ClusterHarness, electors: list[LeaderElection], lease_name: str
) -> None:
    a = electors[0]
    lost = threading.Event()
    assert a.try_acquire()
    a.keep_renewing(lambda _why: lost.set())
    # Another replica that thinks the lease expired (say, after a network partition) writes it.
    with kube_harness.new_api() as api:
        leases = client.CoordinationV1Api(api)
        lease = leases.read_namespaced_lease(lease_name, NAMESPACE)
        lease.spec.holder_identity = "replica-b"
        leases.replace_namespaced_lease(lease_name, NAMESPACE, lease)
    assert lost.wait(2 * DURATION_S)
    assert not a.is_leader()
    a.release()
    assert holder(kube_harness, lease_name).spec.holder_identity == "replica-b"


def test_two_replicas_racing_for_one_lease_cannot_both_win(
    kube_harness: ClusterHarness, electors: list[LeaderElection], lease_name: str
) -> None:
    a, b = electors
    assert a.try_acquire()
    a.release()
    # Both read the free lease at the same resourceVersion; both write.
    with kube_harness.new_api() as api:
        seen = client.CoordinationV1Api(api).read_namespaced_lease(lease_name, NAMESPACE)
        copy = client.CoordinationV1Api(api).read_namespaced_lease(lease_name, NAMESPACE)
    won = [b._write(seen), a._write(copy)]
    assert won == [True, False]
    assert holder(kube_harness, lease_name).spec.holder_identity == "replica-b"
