"""The daemon's reserve keeper (tuner.execute.reserve) over the in-memory double of its
Kubernetes calls (``testkit/fake_kube.py``); ``tests/cluster/test_reserve.py`` runs it against
a real control plane, kube-scheduler preemption included."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from testkit.builders import cluster, node
from testkit.fake_kube import FakeKube
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
