"""The daemon's reserve keeper (tuner.execute.reserve) over the in-memory double of its
Kubernetes calls (``testkit/fake_kube.py``); ``tests/cluster/test_reserve.py`` runs it against
a real control plane, kube-scheduler preemption included."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from testkit.builders import cluster, node, pod
from testkit.fake_kube import FakeKube
from tuner.execute.events import Event
from tuner.execute.recover import recover
from tuner.execute.reserve import KubeReserveKeeper
from tuner.model.cluster import Cluster
from tuner.model.reserve import Reserve, ReservedNode
from tuner.model.resources import Resources
from tuner.settings import Settings, settings_from_dict

SMALL = {"cloud.google.com/gke-nodepool": "small"}
ONE = ReservedNode("small", Resources(1500, 1 << 30))


def _kube(**execute: object) -> FakeKube:
    kube = FakeKube()
    kube.settings = replace(kube.settings, **execute)  # type: ignore[arg-type]
    kube.priority_classes.add(kube.settings.placeholder_priority_class)
    kube.add_node("s1", SMALL)
    return kube


def _keeper(kube: FakeKube, settings: Settings | None = None) -> KubeReserveKeeper:
    model: Cluster = cluster([node("s1", labels=SMALL, instance_type="e2-standard-2")], [])
    return KubeReserveKeeper(
        kube, lambda: model, settings or settings_from_dict({"forecast": {"reserve_max_nodes": 3}})
    )  # type: ignore[arg-type]


def _placeholders(kube: FakeKube) -> dict[str, dict[str, Any]]:
    return {
        name: doc
        for (_, name), doc in kube.pod_docs.items()
        if kube.keys.reserve in doc["metadata"]["labels"]
    }


def test_placeholders_are_journaled_then_created_with_the_pools_selector_and_their_end() -> None:
    kube = _kube()
    keeper = _keeper(kube)
    outcome = keeper.hold(Reserve(0.0, 600.0, (ONE, ONE)), 0.0)
    held = _placeholders(kube)
    assert set(outcome.created) == set(held)
    assert len(held) == 2 and outcome.standing == 2 and outcome.failed is None
    doc = next(iter(held.values()))
    meta, spec = doc["metadata"], doc["spec"]
    assert meta["labels"][kube.keys.reserve] == "small"
    assert kube.keys.placeholder in meta["labels"]
    assert meta["annotations"][kube.keys.reserve_until] == "1970-01-01T00:10:00Z"
    assert spec["nodeSelector"] == SMALL
    assert spec["priorityClassName"] == kube.settings.placeholder_priority_class
    assert spec["preemptionPolicy"] == "Never"
    journal = kube.config_maps[(kube.settings.journal_namespace, f"{kube.keys.journal}-reserve")]
    assert set(journal["data"]) == set(held)
    assert json.loads(journal["data"][outcome.created[0]])["pool"] == "small"
    writes = [c for c, _ in kube.calls if c in ("put_config_map", "create_pod")]
    assert writes[:2] == ["put_config_map", "create_pod"]  # journaled before created


def test_the_same_reserve_again_changes_nothing_a_newer_one_extends_the_end() -> None:
    kube = _kube()
    keeper = _keeper(kube)
    keeper.hold(Reserve(0.0, 600.0, (ONE,)), 0.0)
    again = keeper.hold(Reserve(60.0, 660.0, (ONE,)), 60.0)
    assert again.created == () and again.removed == () and again.standing == 1
    doc = next(iter(_placeholders(kube).values()))
    assert doc["metadata"]["annotations"][kube.keys.reserve_until] == "1970-01-01T00:11:00Z"


def test_placeholders_go_when_no_reserve_asks_for_them_or_theirs_ended() -> None:
    kube = _kube()
    keeper = _keeper(kube)
    keeper.hold(Reserve(0.0, 600.0, (ONE, ONE)), 0.0)
    fewer = keeper.hold(Reserve(60.0, 660.0, (ONE,)), 60.0)
    assert len(fewer.removed) == 1 and fewer.standing == 1 and len(_placeholders(kube)) == 1
    ended = keeper.hold(Reserve(660.0, 660.0), 700.0)
    assert len(ended.removed) == 1 and ended.standing == 0 and _placeholders(kube) == {}
    assert (kube.settings.journal_namespace, f"{kube.keys.journal}-reserve") not in kube.config_maps


def test_a_preempted_placeholder_is_not_made_again_while_its_reserve_holds() -> None:
    kube = _kube()
    keeper = _keeper(kube)
    first = keeper.hold(Reserve(0.0, 600.0, (ONE,)), 0.0)
    kube.pod_docs.pop((kube.settings.journal_namespace, first.created[0]))  # the scheduler's
    later = keeper.hold(Reserve(60.0, 660.0, (ONE,)), 60.0)
    assert later.created == () and later.standing == 0
    after = keeper.hold(Reserve(600.0, 1200.0, (ONE,)), 600.0)  # the first reserve ended
    assert len(after.created) == 1


def test_never_more_than_the_cap_stand() -> None:
    kube = _kube()
    keeper = _keeper(kube, settings_from_dict({"forecast": {"reserve_max_nodes": 1}}))
    outcome = keeper.hold(Reserve(0.0, 600.0, (ONE, ONE, ONE)), 0.0)
    assert len(outcome.created) == 1 and len(_placeholders(kube)) == 1


def test_a_missing_priority_class_fails_the_hold_and_creates_nothing() -> None:
    kube = _kube()
    kube.priority_classes.clear()
    outcome = _keeper(kube).hold(Reserve(0.0, 600.0, (ONE,)), 0.0)
    assert outcome.failed is not None and "PriorityClass" in outcome.failed
    assert _placeholders(kube) == {}


def test_the_provision_command_runs_once_per_pending_placeholder(tmp_path: object) -> None:
    marker = f"{tmp_path}/ran"
    command = ("sh", "-c", f'echo "$TUNER_POOL $TUNER_NODE" >> {marker}')
    kube = _kube(node_provision="command", node_provision_command=command)
    keeper = _keeper(kube)
    keeper.hold(Reserve(0.0, 600.0, (ONE,)), 0.0)
    keeper.hold(Reserve(60.0, 660.0, (ONE,)), 60.0)
    with open(marker) as ran:
        assert ran.read().splitlines() == ["small small+reserve"]


def test_recovery_deletes_the_reserves_placeholders_and_drops_its_journal() -> None:
    kube = _kube()
    _keeper(kube).hold(Reserve(0.0, 600.0, (ONE, ONE)), 0.0)
    undone = recover(kube)  # type: ignore[arg-type]
    assert _placeholders(kube) == {}
    assert any("a reserve of 2 placeholder pod(s) was held" in line for line in undone)
    assert (kube.settings.journal_namespace, f"{kube.keys.journal}-reserve") not in kube.config_maps


def test_a_placeholder_another_keeper_made_going_away_does_not_fail_the_hold() -> None:
    kube = _kube()
    first = _keeper(kube).hold(Reserve(0.0, 600.0, (ONE,)), 0.0)
    kube.config_maps.clear()  # its journal dropped, as a recovery would
    later = _keeper(kube)
    assert later.hold(Reserve(60.0, 660.0, (ONE,)), 60.0).standing == 1  # adopted, not remade
    kube.pod_docs.pop((kube.settings.journal_namespace, first.created[0]))
    outcome = later.hold(Reserve(120.0, 720.0, (ONE,)), 120.0)
    assert outcome.failed is None and outcome.created == ()


class Events:
    """Collects the Events recorded."""

    def __init__(self) -> None:
        self.recorded: list[Event] = []

    def record(self, event: Event) -> None:
        self.recorded.append(event)


def _seen(kube: FakeKube) -> Cluster:
    """The cluster as the keeper's ``read`` sees it: every node of pool small, every pod."""
    nodes = [node(n, labels=SMALL, instance_type="e2-standard-2") for n in kube.nodes]
    pods = [
        pod(
            doc["metadata"]["name"],
            doc["spec"].get("nodeName"),
            cpu="100m",
            workload=doc["metadata"]["labels"].get("app", doc["metadata"]["name"]),
            kind="ReplicaSet" if doc["metadata"].get("ownerReferences") else "",
            labels=doc["metadata"]["labels"],
        )
        for doc in kube.pod_docs.values()
    ]
    return cluster(nodes, pods)


def _releasing(removal: str = "delete-node") -> tuple[FakeKube, KubeReserveKeeper, Events]:
    """A keeper whose placeholder an autoscaler gave node r1 (bound), reading the cluster
    live, with ``execute.node_removal`` ``removal``."""
    kube = _kube(node_removal=removal)
    kube.grows = "r1"
    events = Events()
    settings = settings_from_dict({"forecast": {"reserve_max_nodes": 3}})
    keeper = KubeReserveKeeper(kube, lambda: _seen(kube), settings, events)  # type: ignore[arg-type]
    keeper.hold(Reserve(0.0, 600.0, (ONE,)), 0.0)
    kube.grows = None
    return kube, keeper, events


def test_a_reserve_node_no_pod_took_is_released_at_once_journaled_and_verified() -> None:
    kube, keeper, events = _releasing()
    (name,) = _placeholders(kube)
    kube.calls.clear()

    outcome = keeper.hold(Reserve(60.0, 660.0), 60.0)  # the forecast no longer holds it

    assert outcome.removed == (name,) and outcome.standing == 0 and outcome.failed is None
    assert "r1" not in kube.nodes and _placeholders(kube) == {}
    assert [c for c, _ in kube.mutations()] == [
        "patch_config_map",  # journaled as releasing r1 first
        "patch_node",  # cordoned and tainted
        "delete_pod",  # the placeholder, verified gone
        "delete_node",  # the node verified empty, then removed
        "patch_config_map",  # verified gone: its record dropped
        "delete_config_map",  # nothing is held any more
    ]
    assert ("wait_node_gone", "r1") in kube.calls
    assert (kube.settings.journal_namespace, f"{kube.keys.journal}-reserve") not in kube.config_maps
    (event,) = events.recorded
    assert event.reason == "Released" and "no pod took the reserve" in event.note


def test_the_release_is_journaled_so_a_crash_midway_is_undone_by_recovery() -> None:
    kube, keeper, _ = _releasing()
    (name,) = _placeholders(kube)

    def killed(namespace: str, pod_name: str) -> None:
        raise KeyboardInterrupt  # the process dies between the cordon and the deletion

    kube.delete_pod = killed  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        keeper.hold(Reserve(60.0, 660.0), 60.0)
    journal = kube.config_maps[(kube.settings.journal_namespace, f"{kube.keys.journal}-reserve")]
    assert json.loads(journal["data"][name])["releasing"] == "r1"
    assert kube.nodes["r1"]["spec"]["unschedulable"] is True

    del kube.delete_pod  # the next start
    recover(kube)  # type: ignore[arg-type]

    assert _placeholders(kube) == {} and not kube.nodes["r1"]["spec"].get("unschedulable")
    assert not kube.nodes["r1"]["spec"].get("taints")
    assert (kube.settings.journal_namespace, f"{kube.keys.journal}-reserve") not in kube.config_maps


def test_with_node_removal_autoscaler_the_node_is_left_to_the_autoscaler() -> None:
    kube, keeper, events = _releasing("autoscaler")

    outcome = keeper.hold(Reserve(60.0, 660.0), 60.0)

    assert len(outcome.removed) == 1 and "r1" in kube.nodes
    assert not kube.nodes["r1"]["spec"].get("unschedulable") and events.recorded == []


def test_a_reserve_node_a_real_pod_took_is_kept() -> None:
    kube, keeper, events = _releasing()
    kube.add_deployment("default", "web", ["r1"])

    outcome = keeper.hold(Reserve(60.0, 660.0), 60.0)

    assert len(outcome.removed) == 1 and "r1" in kube.nodes and events.recorded == []
    assert "patch_node" not in [c for c, _ in kube.mutations()]


def test_a_real_pod_found_after_the_cordon_gives_the_node_back() -> None:
    kube, keeper, events = _releasing()
    stale = _seen(kube)  # read before the real pod landed
    kube.add_deployment("default", "web", ["r1"])
    keeper.read = lambda: stale

    outcome = keeper.hold(Reserve(60.0, 660.0), 60.0)

    assert len(outcome.removed) == 1 and outcome.failed is None and _placeholders(kube) == {}
    assert "r1" in kube.nodes and events.recorded == []
    assert not kube.nodes["r1"]["spec"].get("unschedulable")
    assert not kube.nodes["r1"]["spec"].get("taints")


def test_a_pending_placeholder_no_reserve_asks_for_waits_for_its_node_then_goes_with_it() -> None:
    kube = _kube(node_removal="delete-node")
    settings = settings_from_dict({"forecast": {"reserve_max_nodes": 3}})
    keeper = KubeReserveKeeper(kube, lambda: _seen(kube), settings)  # type: ignore[arg-type]
    (name,) = keeper.hold(Reserve(0.0, 600.0, (ONE,)), 0.0).created

    waiting = keeper.hold(Reserve(60.0, 660.0), 60.0)
    assert waiting.removed == () and waiting.standing == 1  # its node is on the way
    kube.add_node("r1", SMALL)  # the node joins, the placeholder binds to it
    kube.pod_docs[(kube.settings.journal_namespace, name)]["spec"]["nodeName"] = "r1"

    gone = keeper.hold(Reserve(120.0, 720.0), 120.0)

    assert gone.removed == (name,) and "r1" not in kube.nodes


def test_a_pending_placeholder_whose_node_does_not_come_goes_after_a_start_up() -> None:
    kube = _kube(node_removal="delete-node")
    settings = settings_from_dict({"forecast": {"reserve_max_nodes": 3}})
    keeper = KubeReserveKeeper(kube, lambda: _seen(kube), settings)  # type: ignore[arg-type]
    keeper.hold(Reserve(0.0, 600.0, (ONE,)), 0.0)
    late = settings.forecast.lead(settings.windows) + settings.windows.retry_s + 1

    gone = keeper.hold(Reserve(late, late + 600.0), late)

    assert len(gone.removed) == 1 and _placeholders(kube) == {}


def test_the_last_reserve_of_a_stopping_daemon_waits_for_no_node() -> None:
    kube = _kube(node_removal="delete-node")
    settings = settings_from_dict({"forecast": {"reserve_max_nodes": 3}})
    keeper = KubeReserveKeeper(kube, lambda: _seen(kube), settings)  # type: ignore[arg-type]
    keeper.hold(Reserve(0.0, 600.0, (ONE,)), 0.0)

    gone = keeper.hold(Reserve(60.0, 60.0, reason="the daemon stopped", last=True), 60.0)

    assert len(gone.removed) == 1 and gone.standing == 0 and _placeholders(kube) == {}
