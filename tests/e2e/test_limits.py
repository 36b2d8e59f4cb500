"""The limits on ``tuner run`` end to end, on the real control plane with the real Prometheus and
Neo4j: the eviction budget, a maintenance window computed from now, the pause switch flipped
with kubectl, and shadow mode with its report. As in test_daemon, the cluster and the API
server's audit log say what the tuner did; its log and /metrics say what it decided."""

# ruff: noqa: F811 (test_daemon's ``scene`` fixture, imported, is each test's parameter)

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from kubernetes import client

from tests.e2e.harness import ROOT, add_nodes, applied, audit_events, wait_for
from tests.e2e.test_daemon import USER, Scene, scene, three_nodes_one_pod_each  # noqa: F401
from tests.unit.test_deploy import NAMESPACE

LEDGER = "tuner-dev-evictions"
PAUSED = "tuner.dev/paused"


def _delete_config_map(scene: Scene, name: str) -> None:
    try:
        scene.kube.core.delete_namespaced_config_map(name, NAMESPACE)
    except client.ApiException as err:
        if err.status != 404:
            raise


@pytest.fixture
def ledger(scene: Scene) -> Iterator[str]:
    """The eviction ledger, emptied (earlier tests' transitions wrote to it)."""
    _delete_config_map(scene, LEDGER)
    yield LEDGER
    _delete_config_map(scene, LEDGER)


@pytest.fixture
def switch(scene: Scene) -> Iterator[str]:
    """A ConfigMap of this test only to pause the tuner with."""
    name = f"pause-{uuid.uuid4().hex[:8]}"
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"x": "{}"})
    scene.kube.core.create_namespaced_config_map(NAMESPACE, body)
    yield name
    _delete_config_map(scene, name)


def annotate(scene: Scene, name: str, paused: bool) -> None:
    """What an on-call engineer types."""
    change = f"{PAUSED}=true" if paused else f"{PAUSED}-"
    applied(scene.kube, "-n", NAMESPACE, "annotate", "configmap", name, change, "--overwrite")


def evictions(scene: Scene) -> list[str]:
    return [m for m in scene.mutations() if m.startswith("create pods/eviction")]


def lease_notes(scene: Scene, reason: str) -> list[str]:
    """The notes of the tuner's cycle Events of one reason."""
    events = scene.kube.core.list_namespaced_event(
        NAMESPACE, field_selector="involvedObject.kind=Lease"
    ).items
    return [e.message or "" for e in events if e.reason == reason]


def test_the_eviction_budget_cuts_a_plan_then_holds_the_next(scene: Scene, ledger: str) -> None:
    three_nodes_one_pod_each(scene)
    # Free, the tuner would remove two nodes at once (two migrations); one eviction an hour
    # lets it remove one, and then no other.
    tuner = scene.tuner(max_parallel_removals=2, limits={"evictions_per_hour": 1})
    wait_for("a node removed", lambda: len(scene.state().nodes) == 2 or None, 150)
    wait_for("a held cycle", lambda: tuner.cycles("held") >= 1 or None, 120)
    assert len(scene.state().nodes) == 2
    assert len(evictions(scene)) == 1
    scene.settled(3)
    assert tuner.stop() == 0
    data = scene.kube.core.read_namespaced_config_map(ledger, NAMESPACE).data or {}
    (entry,) = json.loads(data["evictions"])
    assert entry["namespaces"] == {scene.kube.namespace: 1}
    assert time.time() - entry["at"] < 300
    output = tuner.output()
    assert "no more within the eviction budget" in output, output
    assert "1 evictions would exceed limits.evictions_per_hour 1 (1 in the last hour)" in output


def test_outside_its_maintenance_window_it_only_plans_and_acts_once_the_window_opens(
    scene: Scene,
) -> None:
    three_nodes_one_pod_each(scene)
    # The window opens on a whole minute 75 to 135 s from now, in a zone half an hour off UTC.
    opens = math.ceil((time.time() + 75) / 60) * 60
    local = datetime.fromtimestamp(opens, UTC).astimezone(ZoneInfo("Asia/Kolkata"))
    window = {"schedule": f"{local.minute} {local.hour} * * *", "duration_s": 900}
    tuner = scene.tuner(
        thresholds={"cpu": 0.7},
        limits={"maintenance_windows": [{**window, "time_zone": "Asia/Kolkata"}]},
    )
    wait_for("a held cycle", lambda: tuner.cycles("held") >= 1 or None, opens - time.time() - 5)
    assert evictions(scene) == [] and len(scene.state().nodes) == 3
    next_at = f"outside maintenance window, next at {local:%Y-%m-%d %H:%M} IST (Asia/Kolkata)"
    assert next_at in tuner.output(), tuner.output()
    wait_for(
        "the held cycle's Event",
        lambda: any(next_at in note for note in lease_notes(scene, "Held")) or None,
        30,
    )
    wait_for("a node removed", lambda: len(scene.state().nodes) == 2 or None, 240)
    first = min(
        datetime.fromisoformat(e["requestReceivedTimestamp"]).timestamp()
        for e in audit_events(scene.kube, USER, scene.audit_from)
        if e["verb"] == "create" and e["objectRef"].get("subresource") == "eviction"
    )
    assert first >= opens
    assert tuner.stop() == 0


def test_the_pause_switch_holds_every_change_from_the_next_cycle_until_it_is_removed(
    scene: Scene, switch: str
) -> None:
    three_nodes_one_pod_each(scene)
    annotate(scene, switch, paused=True)
    tuner = scene.tuner(thresholds={"cpu": 0.7}, limits={"pause_config_map": switch})
    wait_for("a held cycle", lambda: tuner.cycles("held") >= 1 or None, 120)
    assert tuner.metric("tuner_paused") == 1
    assert evictions(scene) == [] and len(scene.state().nodes) == 3
    annotate(scene, switch, paused=False)
    wait_for("a node removed", lambda: len(scene.state().nodes) == 2 or None, 150)
    assert tuner.metric("tuner_paused") == 0
    scene.settled(3)
    # Paused again: an empty node joins, which the tuner would remove; the cycles hold it.
    annotate(scene, switch, paused=True)
    held = tuner.cycles("held")
    add_nodes(scene.kube, ["node-d"])
    wait_for("another held cycle", lambda: tuner.cycles("held") > held or None, 150)
    assert "node-d" in scene.state().nodes
    assert tuner.metric("tuner_paused") == 1
    assert tuner.stop() == 0
    output = tuner.output()
    assert f"paused by annotation {PAUSED}='true' on ConfigMap {NAMESPACE}/{switch}" in output, (
        output
    )
    assert "resumed: the pause annotation is gone" in output
    assert "Held" in scene.event_reasons(NAMESPACE, "Lease")


def test_shadow_mode_changes_nothing_and_its_report_gives_the_sum_of_its_logged_plans(
    scene: Scene,
) -> None:
    before = three_nodes_one_pod_each(scene)
    tuner = scene.tuner("--shadow")
    wait_for(
        "three shadow cycles",
        lambda: tuner.output().count("shadow: would save") >= 3 or None,
        180,
    )
    assert (tuner.metric("tuner_would_save_usd_total") or 0) > 0
    assert tuner.stop() == 0
    logged = [float(x) for x in re.findall(r"shadow: would save (\d+\.\d+) USD", tuner.output())]
    assert sum(logged) > 0
    assert scene.mutations() == []  # nothing in the cluster changed
    after = scene.state()
    assert sorted(after.nodes) == sorted(before.nodes) and after.pods == before.pods
    assert scene.executions() == []  # its account is all it writes to the knowledge base
    shadow = scene.neo4j.run("MATCH (s:ShadowCycle) RETURN count(s) AS n")
    assert shadow == [{"n": len(logged)}]
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "report", "--settings", str(tuner.settings),
         "--since", "1h", "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, **tuner.env},
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["saving"] == pytest.approx(sum(logged), abs=1e-6 * len(logged))
    assert report["cycles"] == report["acting_cycles"] == len(logged)
    # One node to remove, the same plan each cycle on a cluster that stands still: one change.
    assert report["plans"] == 1
    assert report["actions"] == {"migrate": 1, "remove_node": 1}
    assert report["evictions"] == 1
    assert report["cluster_changed"] == 0
    assert report["compared"] == len(logged) - 1
