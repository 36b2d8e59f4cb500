"""A plan computed by ``tuner plan --live`` on the real control plane, carried out."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from testkit.cluster_fixture import REPO_ROOT, ClusterHarness
from tests.cluster.conftest import make_actuator
from tuner.analyse.decision import analyse
from tuner.model.constraints import ZONE_KEY
from tuner.monitor.kube import read_cluster
from tuner.report.build import build_report
from tuner.settings import load_settings


def _settings(kube: ClusterHarness, tmp_path: Path) -> Path:
    """Settings for the test cluster (no candidate delay)."""
    document = kube.settings_doc()
    document["analyse"] = {"candidate_delay_s": 0, "excluded_namespaces": ["kube-system"]}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(document), encoding="utf-8")
    return settings


def _plan_live(kube: ClusterHarness, tmp_path: Path, *args: str) -> str:
    """``tuner plan --live ARGS`` on the test cluster (no candidate delay): its stdout."""
    settings = _settings(kube, tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli", "plan", "--live", "--settings", str(settings), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_a_live_plan_empties_a_node_and_removes_it(kube: ClusterHarness, tmp_path: Path) -> None:
    nodes = [kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2, 3)]
    kube.deployment("web", 3)
    plan = json.loads(_plan_live(kube, tmp_path, "--format", "json"))
    assert plan["decision"] == "remove_nodes"
    (removed,) = plan["removed_nodes"]
    assert {a["op"] for a in plan["actions"]} >= {"migrate", "remove_node"}
    # The same plan in process (the tuner has no command that reads a plan back): its actions.
    settings = load_settings(_settings(kube, tmp_path))
    cluster = read_cluster(kube.api)
    report = build_report(
        cluster, settings, analyse(cluster, settings, [], random.Random(settings.analyse.seed))
    )
    assert report.to_json()["actions"] == plan["actions"]
    actions = list(report.actions)

    result = make_actuator(kube).carry_out(actions)

    assert result.completed, result.reason
    assert len(result.done) == len(actions)
    assert removed not in {n.metadata.name for n in kube.core.list_node().items}
    kube.wait_available("web", 3)
    assert set(kube.placement("app=web").values()) <= set(nodes) - {removed}
    assert kube.leftovers() == []


def test_a_live_plan_says_which_moves_are_eviction_only(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    """The pods start on one big node; a smaller one joins: removing the big one saves most."""
    big = kube.add_node(f"{kube.namespace}-big", cpu="8", memory="16Gi")
    kube.deployment("web", 1)
    kube.deployment("plain", 1, onboarded=False)
    kube.add_node(f"{kube.namespace}-small")

    plan = json.loads(_plan_live(kube, tmp_path, "--format", "json"))
    table = _plan_live(kube, tmp_path).splitlines()

    assert plan["removed_nodes"] == [big]
    placements = {
        a["workload"].rsplit("/", 1)[1]: a["placement"]
        for a in plan["actions"]
        if a["op"] == "migrate"
    }
    assert placements == {
        "web": "node label",
        "plain": "not controlled (not onboarded): lands where the scheduler puts it",
    }
    (plain,) = [row for row in table if "/plain-" in row]
    (web,) = [row for row in table if "/web-" in row]
    assert plain.endswith("not controlled (not onboarded): lands where the scheduler puts it")
    assert "onboarded" not in web


def test_a_live_plan_makes_room_for_a_zone_bound_pod_and_carries_it_out(
    kube: ClusterHarness, tmp_path: Path
) -> None:
    """``front`` runs only in zone a. Removing its node needs the other zone-a node's room,
    which ``filler`` takes: the plan (``analyse.make_room``, the default) moves ``filler`` to
    zone b first, then ``front`` into the room it left, and the executor does it in that
    order, each move verified, the node deleted."""
    zone_a = {ZONE_KEY: "a"}
    drained = kube.add_node(f"{kube.namespace}-a1", labels=zone_a)
    kube.deployment("front", 1, cpu="3000m", node_selector=zone_a)
    host = kube.add_node(f"{kube.namespace}-a2", labels=zone_a)
    kube.bare_pod("pinned-a", host)  # bare pods keep a2 and b1 from being candidates
    kube.deployment("filler", 1, cpu="1100m")  # a1 has 1000m left: it lands on a2
    other = kube.add_node(f"{kube.namespace}-b1", labels={ZONE_KEY: "b"})
    kube.bare_pod("pinned-b", other)
    assert set(kube.placement("app=front").values()) == {drained}
    assert set(kube.placement("app=filler").values()) == {host}

    plan = json.loads(_plan_live(kube, tmp_path, "--format", "json"))
    assert plan["removed_nodes"] == [drained], plan["reason"]
    moves = [
        (a["workload"].rsplit("/", 1)[1], a["to"]) for a in plan["actions"] if a["op"] == "migrate"
    ]
    assert moves == [("filler", other), ("front", host)]
    settings = load_settings(_settings(kube, tmp_path))
    cluster = read_cluster(kube.api)
    report = build_report(cluster, settings, analyse(cluster, settings, [], random.Random(0)))
    assert report.to_json()["actions"] == plan["actions"]

    result = make_actuator(kube).carry_out(list(report.actions))

    assert result.completed, result.reason
    assert drained not in {n.metadata.name for n in kube.core.list_node().items}
    kube.wait_available("front", 1)
    kube.wait_available("filler", 1)
    assert set(kube.placement("app=front").values()) == {host}
    assert set(kube.placement("app=filler").values()) == {other}
    assert kube.leftovers() == []
