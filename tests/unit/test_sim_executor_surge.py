"""Surge moves in the simulated executor (``execute.surge_lone_pods``): a one-replica
Deployment's pod is replaced by restarting its rollout, the new pod first, the old one deleted
once the new one is Ready (:mod:`tuner.plan.rollout`), so the workload is served throughout."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from tests.unit.test_sim_engine import API, WEB, migrate_api, small
from tuner.plan.actions import Migrate
from tuner.settings import Execute
from tuner.sim.engine import Simulation
from tuner.sim.state import SimPod
from tuner.sim.workloads import Service


def running(startup: float = small().startup) -> Simulation:
    """small() (with this pod start-up) once its pods are Ready."""
    sim = Simulation(replace(small(), startup=startup), 1)
    sim.advance(60 + startup + 60)
    return sim


def watched(sim: Simulation) -> list[tuple[int, int]]:
    """(Ready api pods, api pods) at each tick from now on."""
    seen: list[tuple[int, int]] = []
    ready, state = sim.controllers.ready_counts, sim.cluster_state
    sim.watchers.append(lambda: seen.append((ready().get(API, 0), state.count(API))))
    return seen


def api_pods(sim: Simulation) -> list[SimPod]:
    return sim.cluster_state.pods_of(API)


def test_a_surge_move_keeps_the_lone_pod_serving_until_its_successor_is_ready() -> None:
    sim = running()
    seen = watched(sim)
    pod, target, result = migrate_api(sim)
    sim.advance(sim.tick)  # a tick after the handover
    assert result.verified, result.detail
    assert len(seen) >= 2 and all(ready >= 1 for ready, _ in seen)
    assert max(count for _, count in seen) == 2  # both pods while the new one starts
    assert seen[-1] == (1, 1)
    (moved,) = api_pods(sim)
    assert moved.name != pod.name and moved.node == target
    assert sum(sim.series.short) == 0


def test_without_surge_moves_the_lone_pod_is_evicted_first() -> None:
    """What a surge move avoids: no Ready api pod until the replacement has started."""
    sim = running()
    seen = watched(sim)
    _, target, result = migrate_api(sim, surge_lone_pods=False)
    assert result.verified, result.detail
    assert any(ready == 0 for ready, _ in seen) and max(count for _, count in seen) == 1
    assert sum(sim.series.short) > 0
    assert [p.node for p in api_pods(sim)] == [target]


@pytest.mark.parametrize(
    "service",
    [replace(API, replicas=2, hpa=None), Service("redis", 200, 2**27, kind="StatefulSet")],
    ids=["two replicas", "statefulset"],
)
def test_other_pods_are_evicted_as_before(service: Service) -> None:
    """Two replicas surge nothing (their rollout takes one out of service at once); a
    StatefulSet's rollout never surges."""
    sim = Simulation(replace(small(4), services=(WEB, service)), 1)
    sim.advance(120)
    state = sim.cluster_state
    old = state.pods_of(service)[0]
    held = {p.node for p in state.pods_of(service)}
    pod = next(p for p in sim.cluster().pods if p.name == old.name)
    target = next(n.name for n in sim.cluster().nodes if n.name not in held)
    counts: list[int] = []
    sim.watchers.append(lambda: counts.append(state.count(service)))

    (result,) = sim.apply([Migrate(pod, target)])

    assert result.verified, result.detail
    assert counts and max(counts) == service.replicas
    assert state.evictions == 1 and old.uid not in state.pods
    assert len(state.pods_of(service)) == service.replicas


def unschedulable() -> Simulation:
    """small() with every node but the api pod's source full."""
    sim = running()
    cluster, state = sim.cluster(), sim.cluster_state
    for node in cluster.nodes:
        if node.name != api_pods(sim)[0].node:
            hog = Service("hog", node.allocatable.cpu - cluster.requested(node.name).cpu, 0)
            state.bind(state.create_pod(hog, sim.now), state.nodes[node.name], sim.now)
    return sim


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda: running(startup=Execute.verify_timeout_s + 60), "not Ready"),
        (unschedulable, "landed nowhere (pending)"),
    ],
    ids=["not ready in time", "unschedulable"],
)
def test_a_failed_surge_deletes_the_new_pod_and_keeps_the_old(
    make: Callable[[], Simulation], why: str
) -> None:
    sim = make()
    (old,) = api_pods(sim)
    source = old.node
    _, _, result = migrate_api(sim)
    assert not result.verified and why in result.detail
    sim.advance(60)
    assert api_pods(sim) == [old] and old.node == source
    assert sim.cluster_state.evictions == 0 and not sim.cluster_state.surges
    assert not any(n.unschedulable for n in sim.cluster_state.nodes.values())


def test_the_old_pods_deletion_counts_as_one_eviction_at_the_handover() -> None:
    sim = running()
    _, _, result = migrate_api(sim)
    assert result.verified, result.detail
    sim.advance(sim.tick)
    assert sim.cluster_state.evictions == 1
    assert sum(sim.series.evictions) == 1 and sim.series.evictions[-1] == 1


def test_the_replicaset_does_not_count_the_surge_pod_until_the_handover() -> None:
    """While both pods exist the workload's ReplicaSet keeps its one pod and adds none; after
    the handover the new pod is the workload's one pod: none lost, none added."""
    sim = running()
    controls = sim.controls
    (old,) = api_pods(sim)
    new = controls.start_surge(old)
    sim.advance(sim.scenario.startup)
    assert api_pods(sim) == [old, new] and sim.controllers.ready(new)
    controls.end_surge(old, new, keep=True)
    sim.advance(60)
    assert api_pods(sim) == [new] and not sim.cluster_state.surges


def test_a_scale_in_during_a_surge_deletes_the_old_replicasets_pods_only() -> None:
    """The HPA scaled the workload up while its new pod starts, then in again: the ReplicaSet
    deletes one of its own Ready pods, not the unready surge pod it would rank first."""
    sim = running()
    state = sim.cluster_state
    (old,) = api_pods(sim)
    new = sim.controls.start_surge(old)
    extra = state.create_pod(API, sim.now)  # the scale-up's pod, Ready
    state.bind(extra, state.nodes[old.node or ""], sim.now - 60)
    sim.replicas[API] = 1
    sim.controllers.reconcile()
    assert new in api_pods(sim) and len(api_pods(sim)) == 2
