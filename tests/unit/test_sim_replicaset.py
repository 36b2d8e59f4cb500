"""The ReplicaSet's scale-down ranking as kube-controller-manager v1.33 sorts (with
LogarithmicScaleDown): unassigned, not ready, doubled up, then younger by logarithmic age class,
then a pseudo-random order within a class."""

from __future__ import annotations

from tuner.sim.replicaset import age_class, deletion_order, uid_order
from tuner.sim.state import SimPod
from tuner.sim.workloads import Service

WEB = Service("web", 100, 2**27, namespace="shop")
NOW = 1000.0


def pod(uid: int, node: str | None, ready_at: float | None) -> SimPod:
    return SimPod(uid, f"web-{uid}", WEB, 0.0, node, 0.0 if ready_at is None else ready_at)


def order(pods: list[SimPod]) -> list[int]:
    ready = {p.uid: p.bound_at for p in pods if p.node is not None and p.bound_at > 0}
    return [p.uid for p in deletion_order(pods, NOW, lambda p: ready.get(p.uid))]


def test_age_classes_are_powers_of_two_of_nanoseconds() -> None:
    assert age_class(600.0) == age_class(1000.0) == 39  # 2**39 ns = 549.8 s
    assert age_class(1100.0) == 40
    assert age_class(0.0) == -1


def test_unassigned_then_not_ready_then_doubled_up_go_first() -> None:
    pods = [
        pod(1, "a", 100.0),
        pod(2, "b", 100.0),
        pod(3, "b", 100.0),
        pod(4, "c", None),
        pod(5, None, None),
    ]
    assert order(pods)[:2] == [5, 4]
    assert set(order(pods)[2:4]) == {2, 3}
    assert order(pods)[4] == 1


def test_a_younger_class_goes_first_but_within_a_class_age_does_not_decide() -> None:
    # Ready 900 s and 400 s ago: classes 39 and 38, the younger goes first whatever the uids.
    for old, young in ((1, 2), (2, 1)):
        assert order([pod(old, "a", 100.0), pod(young, "b", 600.0)]) == [young, old]
    # Ready 900 s and 600 s ago, both class 39: the order of the scrambled uids, so the older
    # pod goes first for some pair (a newest-first ranking would never do that).
    pairs = [(u, u + 1) for u in range(1, 20)]
    older_first = [
        (older, newer)
        for older, newer in pairs
        if order([pod(older, "a", 100.0), pod(newer, "b", 400.0)])[0] == older
    ]
    assert older_first
    assert all(uid_order(o) < uid_order(n) for o, n in older_first)
