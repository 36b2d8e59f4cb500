"""Neo4j Browser shows the knowledge graph as the styled onion (real server, real Chromium).

The screenshots are written under the test's tmp dir; with ``TUNER_UPDATE_DOCS=1`` they are
also copied to ``docs/images/neo4j-browser.png`` (the history) and
``neo4j-browser-deployment.png`` (one deployment), which docs/knowledge.md shows.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from knowledge.browser.captions import execution_caption, node_captions
from knowledge.browser.queries import deployment_query, history_query
from knowledge.browser.style import label_colours, style_command
from testkit.neo4j_fixture import Neo4jServer
from tuner.model.cluster import Workload
from tuner.model.execution import Execution, NodeState, WorkloadType, by_name

pytestmark = [pytest.mark.neo4j, pytest.mark.browser]

DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
WEB = WorkloadType(Workload("shop", "Deployment", "web"), 500, 2**30, True)
CART = WorkloadType(Workload("shop", "Deployment", "cart"), 250, 2**29, True)
CACHE = WorkloadType(Workload("shop", "Deployment", "cache"), 250, 2**30, True)
DB = WorkloadType(Workload("shop", "StatefulSet", "db"), 1000, 4 * 2**30, False)
GiB16 = 16 * 2**30


def _execution(
    id: str, load: float, end: float, nodes: list[tuple[str, dict[Workload, int]]]
) -> Execution:
    types = {w.workload: w for w in (WEB, CART, CACHE, DB)}
    states = tuple(
        NodeState(
            name, 4000, GiB16, "e2-standard-4", 0.16, tuple(sorted(pods.items(), key=by_name))
        )
        for name, pods in nodes
    )
    used = sorted({w for _, pods in nodes for w in pods}, key=str)
    return Execution(
        id,
        end - 600,
        end,
        load,
        round(0.16 * len(states), 2),
        0.5,
        states,
        tuple(types[w] for w in used),
    )


def _gke(node: str) -> str:
    """``a/x7q2`` named as GKE names a node: cluster, pool, instance group, instance."""
    pool, instance = node.split("/")
    group = {"a": "1f2e3d4c", "b": "9a8b7c6d", "c": "5e5e5e5e"}[pool]
    return f"gke-shop-pool-{pool}-{group}-{instance}"


RUNS: dict[str, tuple[float, dict[str, dict[WorkloadType, int]]]] = {
    "e-1000": (
        1000.123456,
        {"a/x7q2": {WEB: 3, DB: 1}, "a/k2m1": {WEB: 2, CART: 2}, "b/p0s9": {CART: 1, CACHE: 1}},
    ),
    "e-1040": (1040.0, {"a/x7q2": {WEB: 3, DB: 1, CART: 1}, "a/h4j8": {WEB: 2, CART: 2, CACHE: 1}}),
    "e-950": (
        950.987,
        {
            "a/x7q2": {WEB: 2, DB: 1},
            "a/k2m1": {WEB: 2, CART: 1},
            "a/h4j8": {CACHE: 1, CART: 1},
            "b/p0s9": {WEB: 1},
        },
    ),
    "e-1010": (1010.5, {"b/p0s9": {WEB: 4, DB: 1}, "b/z1y2": {CART: 3, CACHE: 1}}),
    "e-1090": (
        1090.0,
        {"a/k2m1": {WEB: 3, CART: 1}, "a/x7q2": {WEB: 2, DB: 1}, "b/z1y2": {CACHE: 1, CART: 2}},
    ),
    "e-2000": (2000.0, {"c/a1b2": {WEB: 6}}),
}
"""Execution id: its load and what each node ran (one per hour, in this order)."""
HISTORY = [
    _execution(
        id,
        load,
        1_717_000_000.0 + 3600 * hour,
        [(_gke(node), {w.workload: n for w, n in pods.items()}) for node, pods in nodes.items()],
    )
    for hour, (id, (load, nodes)) in enumerate(RUNS.items())
]
IN_BAND = HISTORY[:5]
CHEAPEST = min(IN_BAND, key=lambda e: e.rank)


def _require(ok: bool, message: str) -> None:
    if not ok:
        if os.environ.get("CI") or os.environ.get("TUNER_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)


def _captions(executions: list[Execution]) -> dict[str, str]:
    """Vertex caption -> label, as the store writes them."""
    labels = {}
    for e in executions:
        labels[execution_caption(e.load, e.cost)] = "Execution"
        for caption in node_captions([n.name for n in e.nodes]):
            labels[caption] = "Node"
    return labels


def test_the_history_and_a_deployment_are_drawn_readable(
    neo4j: Neo4jServer, tmp_path: Path
) -> None:
    """Five executions in the band: the history draws each with its nodes (no hairball of
    shared pod types), every caption whole (no "gke-shop-p…", the load rounded and the cost
    shown); the cheapest one is drawn as the onion with the workloads it ran."""
    try:
        from testkit.browser import chromium_executable, neo4j_browser
    except ImportError as err:  # playwright is in the dev extra
        _require(False, f"playwright missing: pip install -e '.[dev]' ({err})")
        raise
    chromium = Path(chromium_executable())
    _require(chromium.exists(), f"{chromium} missing: scripts/chromium.sh install")
    with neo4j.open() as kb:
        kb.record_many(HISTORY)
    colours = label_colours()
    expected = _captions(IN_BAND)
    assert {c for c, label in expected.items() if label == "Node"} == {
        "x7q2",
        "k2m1",
        "p0s9",
        "h4j8",
        "z1y2",
    }
    assert "load 1000 cost 0.4800/h" in expected

    history, deployment = tmp_path / "neo4j-browser.png", tmp_path / "neo4j-browser-deployment.png"
    with neo4j_browser(neo4j.http) as browser:
        browser.connect(neo4j.uri, neo4j.user, neo4j.password)
        browser.apply_style(style_command())
        vertices = len(IN_BAND) + sum(len(e.nodes) for e in IN_BAND)
        frame = browser.run(history_query(1000.0, 0.1))
        browser.toggle_fullscreen(frame)
        drawn = browser.wait_for_graph(frame, vertices)
        assert browser.relationships(frame) == vertices - len(IN_BAND)  # HAS_NODE only
        frame.screenshot(path=str(history))
        browser.toggle_fullscreen(frame)
        assert len(drawn) == vertices
        for vertex in drawn:
            caption = " ".join(vertex.caption.split())
            assert "…" not in caption and caption in expected, (vertex, expected)
            assert vertex.fill == colours[expected[caption]], vertex
        assert sum(" ".join(v.caption.split()).startswith("load") for v in drawn) == len(IN_BAND)

        pods = {w.workload.name: "Pod" for w in CHEAPEST.workloads}
        expected = {**_captions([CHEAPEST]), **pods}
        frame = browser.run(deployment_query(1000.0, 0.1))
        drawn = browser.wait_for_graph(frame, len(expected))
        assert browser.relationships(frame) == len(CHEAPEST.nodes) + sum(
            len(n.pods) for n in CHEAPEST.nodes
        )
        frame.screenshot(path=str(deployment))
    assert sorted(" ".join(v.caption.split()) for v in drawn) == sorted(expected)
    for vertex in drawn:
        assert vertex.fill == colours[expected[" ".join(vertex.caption.split())]], vertex
    for shot in (history, deployment):
        assert shot.stat().st_size > 10_000
        if os.environ.get("TUNER_UPDATE_DOCS") == "1":
            DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, DOCS_IMAGES / shot.name)
