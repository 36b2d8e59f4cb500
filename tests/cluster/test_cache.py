"""The daemon's watch-backed cluster cache on the real control plane.

Every probe compares the cache with a fresh list of the API server (the one-shot path of
``tuner plan --live``), so "converged" means "exactly what the API server says now".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from testkit.cluster_fixture import ClusterHarness, eventually
from tests.cluster.conftest import make_actuator
from tuner.model.cluster import Cluster
from tuner.monitor.cache import ClusterCache
from tuner.monitor.kube import KINDS, read_cluster

AGENT = "tuner-cache-test"


@pytest.fixture
def cache(kube: ClusterHarness) -> Iterator[ClusterCache]:
    """A started cache on its own client (user agent :data:`AGENT`), synced."""
    api = kube.new_api()
    api.user_agent = AGENT
    cache = ClusterCache(api, backoff_s=0.2)
    cache.start()
    assert cache.wait_synced(60), cache.why()
    try:
        yield cache
    finally:
        cache.stop()
        api.close()


def _view(cluster: Cluster) -> tuple[Any, ...]:
    """A cluster independent of the order objects were listed or cached in."""
    return (
        sorted(cluster.nodes, key=lambda n: n.name),
        sorted(cluster.pods, key=lambda p: p.key),
        sorted(cluster.pdbs, key=lambda p: (p.namespace, p.name)),
        sorted(cluster.hpas, key=lambda h: (h.namespace, h.name)),
        dict(cluster.preferred_labels),
    )


def _converged(kube: ClusterHarness, cache: ClusterCache) -> Cluster:
    """Wait until the cache holds exactly what a fresh list shows; that cluster."""

    def same() -> Cluster | None:
        now = read_cluster(kube.api)
        return now if _view(cache.cluster(timeout_s=30)) == _view(now) else None

    return eventually(same, 60, what="the cache to match a fresh list")


def _placement(cluster: Cluster, namespace: str) -> dict[str, str | None]:
    return {p.name: p.node for p in cluster.pods if p.namespace == namespace}


def test_the_cache_follows_pods_and_nodes(kube: ClusterHarness, cache: ClusterCache) -> None:
    first = kube.add_node(f"{kube.namespace}-n1")
    kube.deployment("web", 2)
    seen = _placement(_converged(kube, cache), kube.namespace)
    assert sorted(seen.values()) == [first, first]  # pods added

    second = kube.add_node(f"{kube.namespace}-n2")
    assert second in {n.name for n in _converged(kube, cache).nodes}  # node added

    kube.core.patch_node(first, {"spec": {"unschedulable": True}})
    moved = next(iter(seen))
    kube.core.delete_namespaced_pod(moved, kube.namespace, grace_period_seconds=0)
    kube.wait_available("web", 2)
    now = _placement(_converged(kube, cache), kube.namespace)
    assert moved not in now  # the pod was moved: deleted, and recreated on the other node
    assert sorted(now.values()) == sorted([first, second])

    kube.apps.patch_namespaced_deployment_scale("web", kube.namespace, {"spec": {"replicas": 1}})
    kube.wait_available("web", 1)
    assert len(_placement(_converged(kube, cache), kube.namespace)) == 1  # a pod deleted

    spare = kube.add_node(f"{kube.namespace}-n3")
    assert spare in {n.name for n in _converged(kube, cache).nodes}
    kube.core.delete_node(spare)
    kube.nodes.remove(spare)
    assert spare not in {n.name for n in _converged(kube, cache).nodes}  # node removed


def test_the_cache_converges_after_the_api_server_restarts(
    kube: ClusterHarness, cache: ClusterCache
) -> None:
    """A killed API server drops every watch; each resumes from its last resourceVersion or,
    when that is older than the restarted server's watch cache (410 Gone), lists again."""
    node = kube.add_node(f"{kube.namespace}-n1")
    kube.deployment("web", 1)
    _converged(kube, cache)
    lists_before = {kind: counts[1] for kind, counts in cache.counts().items()}

    kube.script("restart-apiserver", "--hard", timeout=300)
    eventually(
        lambda: kube.apps.patch_namespaced_deployment_scale(
            "web", kube.namespace, {"spec": {"replicas": 3}}
        ),
        what="the Deployment scaled after the restart",
    )
    kube.wait_available("web", 3)
    extra = kube.add_node(f"{kube.namespace}-n2")

    cluster = _converged(kube, cache)
    assert sorted(_placement(cluster, kube.namespace).values()) == [node] * 3
    assert extra in {n.name for n in cluster.nodes}
    relisted = {k for k, n in cache.counts().items() if n[1] > lists_before[k]}
    # Kinds nothing changed in resume from a version the new server no longer has: 410 Gone.
    assert relisted, f"no kind was listed again after the restart: {cache.counts()}"


def test_reads_through_the_actuator_come_from_the_cache_and_see_changes(
    kube: ClusterHarness, cache: ClusterCache
) -> None:
    """The daemon's read: no list per cycle, and a change made after a cycle is in the next."""
    node = kube.add_node(f"{kube.namespace}-n1")
    actuator = make_actuator(kube)
    actuator.cache = cache
    _converged(kube, cache)
    start = kube.audit_log.stat().st_size
    before = actuator.read()

    kube.deployment("web", 2)

    def two_pods() -> Cluster | None:
        cluster = actuator.read()
        return cluster if len(_placement(cluster, kube.namespace)) == 2 else None

    after = eventually(two_pods, 30, what="the actuator's read to show the new pods")

    assert _placement(before, kube.namespace) == {}
    assert sorted(_placement(after, kube.namespace).values()) == [node, node]
    client.CoreV1Api(cache.api).read_namespace(kube.namespace)  # a marker after the reads
    verbs = eventually(
        lambda: v if "get" in (v := _verbs(kube, start)) else None,
        10,
        what="the audit log to show the marker request",
    )
    assert "list" not in verbs, verbs  # the reads listed nothing: the cache answered


def _verbs(kube: ClusterHarness, offset: int) -> set[str]:
    """The verbs of the cache client's requests in the audit log since ``offset``."""
    with kube.audit_log.open(encoding="utf-8") as log:
        log.seek(offset)
        events = [json.loads(line) for line in log if AGENT in line]
    return {str(e["verb"]) for e in events if e.get("userAgent") == AGENT}


def test_every_kind_is_listed_once_and_then_watched(
    kube: ClusterHarness, cache: ClusterCache
) -> None:
    counts = cache.counts()
    assert set(counts) == set(KINDS)
    assert all(lists == 1 for _objects, lists, _events in counts.values()), counts
