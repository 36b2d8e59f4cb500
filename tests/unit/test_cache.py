"""The pure parts of the watch-backed cache: pruning, event application, the parsed stores
(the cluster they give is the one :func:`cluster_from_objects` gives for the same objects),
relisting.

The cache's threads against a real API server are tested in ``tests/cluster/test_cache.py``;
the last test here drives them with a scripted list/watch double (fast, and certain to send
the 410 Gone the real-server test provokes).
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from testkit.synthetic import random_cluster
from tuner.errors import InputError, ServiceError
from tuner.model.cluster import Cluster, Pod
from tuner.monitor import cache as cache_module
from tuner.monitor.cache import (
    ClusterCache,
    Expired,
    Store,
    apply_event,
    cluster_of,
    entry,
    object_key,
)
from tuner.monitor.dump import cluster_from_objects
from tuner.monitor.kube import KINDS, Listing, _released
from tuner.monitor.prune import PRUNERS, pruned

EXAMPLE = Path(__file__).parents[2] / "examples" / "cluster-dump.json"

MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:x": {}}}]


def _live_pod(name: str, node: str = "n1", uid: str | None = None) -> dict[str, Any]:
    """A pod as the API serves it: the fields the parsers read among many they do not."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": uid or f"uid-{name}",
            "resourceVersion": "7",
            "labels": {"app": "web"},
            "annotations": {"note": "x"},
            "managedFields": MANAGED,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "fake",
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
                }
            ],
            "initContainers": [
                {
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                },
                {"name": "setup", "resources": {"requests": {"cpu": "1", "memory": "16Mi"}}},
            ],
            "overhead": {"cpu": "10m"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web"}],
            "nodeSelector": {"disk": "ssd"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "web"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                },
            },
            "volumes": [{"name": "token", "projected": {"sources": []}}],
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-23T00:00:00Z"},
            ],
            "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0}],
        },
    }


def _live_node(name: str = "n1") -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {"kubernetes.io/hostname": name, "zone": "a", "disk": "ssd"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "managedFields": MANAGED,
        },
        "spec": {
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "podCIDR": "10.0.0.0/24",
        },
        "status": {
            "capacity": capacity,
            "allocatable": {**capacity, "cpu": "3900m"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "images": [{"names": ["fake"], "sizeBytes": 1}],
            "nodeInfo": {"kubeletVersion": "fake"},
        },
    }


def _prune_all(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [pruned(item["kind"], item) for item in items if item["kind"] in PRUNERS]


def test_a_pruned_dump_parses_to_the_same_cluster() -> None:
    items = json.loads(EXAMPLE.read_text())["items"]
    assert cluster_from_objects(_prune_all(items)) == cluster_from_objects(items)


def test_a_pruned_live_pod_and_node_parse_to_the_same_values() -> None:
    live = [
        _live_node(),
        _live_pod("web-a"),
        {
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-1",
                "namespace": "shop",
                "managedFields": MANAGED,
                "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}],
            },
            "spec": {"replicas": 1, "template": {"spec": {"affinity": {"nodeAffinity": {}}}}},
            "status": {"replicas": 1},
        },
    ]
    full = cluster_from_objects(live)
    small = cluster_from_objects(_prune_all(copy.deepcopy(live)))
    assert small == full
    pod = full.pods[0]
    assert pod.constraints.anti_affinity and pod.constraints.node_affinity and pod.ready
    assert pod.requests.cpu == 1060  # init step 50m + 1 CPU beats 300m; plus 10m overhead


def test_pruning_drops_what_no_parser_reads() -> None:
    pod = pruned("Pod", _live_pod("web-a"))
    node = pruned("Node", _live_node())
    assert "managedFields" not in pod["metadata"] and "managedFields" not in node["metadata"]
    assert pod["status"] == {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    assert pod["spec"]["containers"] == [
        {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}
    ]
    assert "volumes" not in pod["spec"]
    assert set(node["status"]) == {"capacity", "allocatable"}
    assert set(node["spec"]) == {"taints"}


def test_pruning_leaves_malformed_fields_for_the_parser_to_report() -> None:
    broken = {"kind": "Pod", "metadata": {"name": "p"}, "spec": "not an object"}
    assert pruned("Pod", broken)["spec"] == "not an object"
    assert "metadata" not in pruned("Node", {"kind": "Node"})


def _store(kind: str, *objects: dict[str, Any]) -> Store:
    return dict(entry(kind, obj) for obj in objects)


def _pods(store: Store) -> dict[str, str | None]:
    return {p.value.name: p.value.node for p in store.values() if isinstance(p.value, Pod)}


def test_events_add_modify_and_delete_objects() -> None:
    store = _store("Pod", _live_pod("a"))
    moved = _live_pod("a", node="n2")
    moved["metadata"]["resourceVersion"] = "9"
    assert apply_event(store, "Pod", {"type": "MODIFIED", "object": moved}) == ("9", True)
    assert _pods(store) == {"a": "n2"}
    apply_event(store, "Pod", {"type": "ADDED", "object": _live_pod("b")})
    assert _pods(store) == {"a": "n2", "b": "n1"}
    apply_event(store, "Pod", {"type": "DELETED", "object": _live_pod("a")})
    assert _pods(store) == {"b": "n1"}


def test_an_update_of_fields_no_parser_reads_changes_nothing() -> None:
    store = _store("Node", _live_node())
    heartbeat = _live_node()
    heartbeat["metadata"]["resourceVersion"] = "12"
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-23T17:00:00Z"
    assert apply_event(store, "Node", {"type": "MODIFIED", "object": heartbeat}) == ("12", False)
    tainted = copy.deepcopy(heartbeat)
    tainted["spec"]["taints"] = []
    assert apply_event(store, "Node", {"type": "MODIFIED", "object": tainted}).changed


def test_a_pod_recreated_under_the_same_name_is_a_new_object() -> None:
    store = _store("Pod", _live_pod("a", uid="old"))
    apply_event(store, "Pod", {"type": "ADDED", "object": _live_pod("a", node="n2", uid="new")})
    apply_event(store, "Pod", {"type": "DELETED", "object": _live_pod("a", uid="old")})
    assert _pods(store) == {"a": "n2"}


def test_a_bookmark_moves_the_version_only() -> None:
    store = _store("Pod", _live_pod("a"))
    before = dict(store)
    bookmark = {
        "type": "BOOKMARK",
        "object": {"kind": "Pod", "metadata": {"resourceVersion": "42"}},
    }
    assert apply_event(store, "Pod", bookmark) == ("42", False)
    assert store == before


class _Mirror:
    """The parsed stores beside the API objects they were built from, kind by kind in the same
    order (a List's items carry no ``kind``: the stores get them without)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
        for item in items:
            if item["kind"] in KINDS:
                self.objects[item["kind"]][object_key(item)] = item
        self.stores = {
            kind: dict(entry(kind, {k: v for k, v in o.items() if k != "kind"}) for o in objs)
            for kind, objs in ((k, self.objects[k].values()) for k in KINDS)
        }

    def event(self, kind: str, what: str, obj: dict[str, Any]) -> None:
        obj = {**obj, "kind": kind}
        apply_event(self.stores[kind], kind, {"type": what, "object": obj})
        if what == "DELETED":
            self.objects[kind].pop(object_key(obj), None)
        else:
            self.objects[kind][object_key(obj)] = obj

    def dump(self) -> Cluster:
        items = [obj for kind in KINDS for obj in self.objects[kind].values()]
        return cluster_from_objects(items, strict=False)


def test_the_stores_give_the_cluster_a_dump_of_the_example_gives() -> None:
    mirror = _Mirror(json.loads(EXAMPLE.read_text())["items"])
    cluster = cluster_of(mirror.stores)
    assert (
        cluster == mirror.dump() == cluster_from_objects(json.loads(EXAMPLE.read_text())["items"])
    )
    assert cluster.pods and cluster.pdbs and cluster.hpas and cluster.preferred_labels


def test_the_stores_give_the_cluster_a_generated_dump_gives() -> None:
    mirror = _Mirror(random_cluster(20, seed=3)["items"])
    cluster = cluster_of(mirror.stores)
    assert cluster == mirror.dump()
    assert {p.workload.kind for p in cluster.pods} == {"Deployment", "DaemonSet"}


def _first(mirror: _Mirror, kind: str, **where: str) -> dict[str, Any]:
    return copy.deepcopy(
        next(
            o
            for o in mirror.objects[kind].values()
            if all(o["metadata"].get(k) == v for k, v in where.items())
        )
    )


def test_the_stores_follow_watch_events_as_a_dump_of_the_objects_would() -> None:
    mirror = _Mirror(random_cluster(20, seed=5)["items"])
    steps: list[tuple[str, str, dict[str, Any]]] = []

    pod = _first(mirror, "Pod")
    pod["spec"]["nodeName"] = "node-00003"
    steps.append(("Pod", "MODIFIED", pod))  # a pod moved
    steps.append(("Pod", "DELETED", _first(mirror, "Pod", namespace="team-2")))
    new = copy.deepcopy(pod)
    new["metadata"] |= {"name": "fresh", "uid": "uid-fresh"}
    steps.append(("Pod", "ADDED", new))
    twin = copy.deepcopy(new)
    twin["metadata"]["uid"] = "uid-twin"
    steps.append(("Pod", "ADDED", twin))  # a second pod of one name: refused
    broken = copy.deepcopy(new)
    broken["metadata"] |= {"name": "broken", "uid": "uid-broken"}
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    steps.append(("Pod", "ADDED", broken))  # unusable: skipped
    ghost = copy.deepcopy(new)
    ghost["metadata"] |= {"name": "ghost", "uid": "uid-ghost"}
    ghost["spec"]["nodeName"] = "node-99999"
    steps.append(("Pod", "ADDED", ghost))  # on an unknown node: skipped
    node = _first(mirror, "Node", name="node-00001")
    steps.append(("Node", "DELETED", node))  # its pods go too
    steps.append(("Node", "ADDED", node | {"metadata": {**node["metadata"], "uid": "uid-new"}}))
    spare = copy.deepcopy(node)
    spare["metadata"] |= {"name": "spare", "uid": "uid-spare"}
    steps.append(("Node", "ADDED", spare))
    replicaset = _first(mirror, "ReplicaSet")
    orphans = replicaset["metadata"]["name"]
    steps.append(("ReplicaSet", "DELETED", replicaset))  # its pods: workload the ReplicaSet
    deployment = _first(mirror, "Deployment")
    deployment["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]},
                }
            ]
        }
    }
    steps.append(("Deployment", "MODIFIED", deployment))
    budget = _first(mirror, "PodDisruptionBudget")
    budget["status"]["disruptionsAllowed"] = 0
    steps.append(("PodDisruptionBudget", "MODIFIED", budget))
    steps.append(("HorizontalPodAutoscaler", "DELETED", _first(mirror, "HorizontalPodAutoscaler")))
    steps.append(("ReplicaSet", "ADDED", replicaset))  # back: its pods' Deployment again

    kinds_seen = []
    for kind, what, obj in steps:
        mirror.event(kind, what, obj)
        cluster = cluster_of(mirror.stores)
        assert cluster == mirror.dump(), (kind, what)
        kinds_seen.append({p.owner_kind for p in cluster.pods if orphans in p.name})
    assert kinds_seen[9] == {"ReplicaSet"} and kinds_seen[-1] == {"Deployment"}
    keys = {p.key for p in cluster_of(mirror.stores).pods}
    assert "fresh" in {k.split("/")[1] for k in keys} and "ghost" not in keys


def test_the_stores_refuse_what_a_strict_dump_refuses() -> None:
    """Every object a live store skips is one a dump would fail on."""
    mirror = _Mirror(random_cluster(4, seed=1)["items"])
    pod = _first(mirror, "Pod")
    pod["spec"]["nodeName"] = "nowhere"
    mirror.event("Pod", "MODIFIED", pod)
    assert pod["metadata"]["name"] not in {p.name for p in cluster_of(mirror.stores).pods}
    with pytest.raises(InputError, match="on unknown node 'nowhere'"):
        cluster_from_objects([o for k in KINDS for o in mirror.objects[k].values()])


def test_error_events_say_gone_or_fail() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    with pytest.raises(Expired, match="too old"):
        apply_event({}, "Pod", gone)
    other = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "boom"}}
    with pytest.raises(ApiException):
        apply_event({}, "Pod", other)
    with pytest.raises(ValueError, match="without an object"):
        apply_event({}, "Pod", {"type": "ADDED"})


def test_an_unusable_object_is_skipped_and_warned_about_by_every_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mirror = _Mirror(random_cluster(4, seed=2)["items"])
    node = _first(mirror, "Node")
    node["metadata"]["annotations"] = {"tuner.dev/price-per-hour": "-5"}
    mirror.event("Node", "MODIFIED", node)
    for _read in range(2):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tuner.monitor.dump"):
            cluster = cluster_of(mirror.stores)
        text, name = caplog.text, node["metadata"]["name"]
        assert f"skipping node '{name}': annotation tuner.dev/price-per-hour" in text
        assert f"is on unknown node '{name}'" in text  # its pods
        assert name not in {n.name for n in cluster.nodes}
        assert cluster == mirror.dump()


class _Script:
    """Lists and watches scripted in order; the last watch blocks until the cache stops."""

    def __init__(self, lists: list[list[str]], watches: list[list[dict[str, Any]]]) -> None:
        self.lists = lists
        self.watches = watches
        self.parked = threading.Event()

    def list_kind(
        self, _api: object, kind: str, convert: Callable[[str, Any], Any], **_options: object
    ) -> Listing[Any]:
        names = self.lists.pop(0)
        pods = [convert(kind, _live_pod(n, node="")) for n in names]
        return Listing(pods, str(len(self.lists)))

    def stream(self, *_args: object) -> _Stream:
        return _Stream(self.watches.pop(0) if self.watches else None, self.parked)


class _Stream:
    def __init__(self, events: list[dict[str, Any]] | None, parked: threading.Event) -> None:
        self._events = events
        self._parked = parked
        self._closed = threading.Event()

    def events(self) -> Iterator[dict[str, Any]]:
        if self._events is None:
            self._parked.set()
            self._closed.wait()
            return
        yield from self._events

    def end(self) -> None:
        self._closed.set()


def test_a_410_gone_lists_again_and_the_list_replaces_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    script = _Script(
        lists=[["a", "b"], ["b", "c"]],
        watches=[[{"type": "ADDED", "object": _live_pod("x")}, gone]],
    )
    monkeypatch.setattr(cache_module, "list_kind", script.list_kind)
    monkeypatch.setattr(cache_module, "WatchStream", script.stream)
    cache = ClusterCache(None, ("Pod",))  # type: ignore[arg-type]
    cache.start()
    try:
        assert script.parked.wait(10)
        first = cache.cluster(timeout_s=10)
        names = sorted(p.name for p in first.pods)
        assert cache.cluster(timeout_s=10) is first  # nothing changed: not parsed again
    finally:
        cache.stop()
    assert names == ["b", "c"]  # "a" deleted and "x" gone while expired: the relist decides
    assert cache.counts()["Pod"][:2] == (2, 2)


def test_an_unsynced_cache_refuses_to_answer() -> None:
    cache = ClusterCache(None, ("Pod",))  # type: ignore[arg-type]  # never started
    with pytest.raises(ServiceError, match="not synced after 0 s: Pod not listed yet"):
        cache.cluster(timeout_s=0)


class _Response:
    """A raw response double that records what happened to its connection (a half-read
    stream is a fault a real server does not produce on demand)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def close(self) -> None:
        self.calls.append("close")

    def release_conn(self) -> None:
        self.calls.append("release")


def test_a_response_read_to_its_end_gives_its_connection_back() -> None:
    response = _Response()
    with _released(response):
        pass
    assert response.calls == ["release"]


def test_a_half_read_response_is_closed_before_its_connection_goes_back() -> None:
    response = _Response()
    with pytest.raises(OSError, match="read timed out"), _released(response):
        raise OSError("read timed out")
    assert response.calls == ["close", "release"]
