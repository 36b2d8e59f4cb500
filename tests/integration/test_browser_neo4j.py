"""Neo4j Browser shows the knowledge graph as the styled onion (real server, real Chromium).

The screenshot is written under the test's tmp dir; with ``TUNER_UPDATE_DOCS=1`` it is also
copied to ``docs/images/neo4j-browser.png`` (docs/knowledge.md shows it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from knowledge.browser.queries import history_query
from knowledge.browser.style import label_colours, style_command
from testkit.neo4j_fixture import Neo4jServer
from tuner.model.execution import Execution, NodeState, WorkloadType

pytestmark = [pytest.mark.neo4j, pytest.mark.browser]

DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "neo4j-browser.png"
WEB = WorkloadType("shop/Deployment/web", 500, 2**30, True)
CART = WorkloadType("shop/Deployment/cart", 250, 2**29, True)
CACHE = WorkloadType("shop/Deployment/cache", 250, 2**30, True)
DB = WorkloadType("shop/StatefulSet/db", 1000, 4 * 2**30, False)
GiB16 = 16 * 2**30


def _execution(
    id: str, load: float, end: float, nodes: list[tuple[str, dict[str, int]]]
) -> Execution:
    types = {w.workload: w for w in (WEB, CART, CACHE, DB)}
    states = tuple(
        NodeState(name, 4000, GiB16, "e2-standard-4", 0.16, tuple(sorted(pods.items())))
        for name, pods in nodes
    )
    used = sorted({w for _, pods in nodes for w in pods})
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


HISTORY = [
    _execution(
        "e-1000",
        1000.0,
        1_717_000_000.0,
        [
            ("pool-a-1", {WEB.workload: 3, DB.workload: 1}),
            ("pool-a-2", {WEB.workload: 2, CART.workload: 2}),
            ("pool-b-1", {CART.workload: 1, CACHE.workload: 1}),
        ],
    ),
    _execution(
        "e-1040",
        1040.0,
        1_717_003_600.0,
        [
            ("pool-a-1", {WEB.workload: 3, DB.workload: 1, CART.workload: 1}),
            ("pool-a-3", {WEB.workload: 2, CART.workload: 2, CACHE.workload: 1}),
        ],
    ),
    _execution("e-2000", 2000.0, 1_717_007_200.0, [("pool-c-1", {WEB.workload: 6})]),
]
IN_BAND = HISTORY[:2]


def _require(ok: bool, message: str) -> None:
    if not ok:
        if os.environ.get("CI") or os.environ.get("TUNER_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)


def test_history_query_draws_the_styled_onion(neo4j: Neo4jServer, tmp_path: Path) -> None:
    try:
        from testkit.browser import chromium_executable, neo4j_browser
    except ImportError as err:  # playwright is in the dev extra
        _require(False, f"playwright missing: pip install -e '.[dev]' ({err})")
        raise
    chromium = Path(chromium_executable())
    _require(chromium.exists(), f"{chromium} missing: scripts/chromium.sh install")
    with neo4j.open() as kb:
        kb.record_many(HISTORY)
    node_names = {n.name for e in IN_BAND for n in e.nodes}
    pod_names = {w.ref.name for e in IN_BAND for w in e.workloads}
    vertices = len(IN_BAND) + sum(len(e.nodes) for e in IN_BAND) + len(pod_names)
    edges = sum(len(e.nodes) + sum(len(n.pods) for n in e.nodes) for e in IN_BAND)
    colours = label_colours()

    shot = tmp_path / "neo4j-browser.png"
    with neo4j_browser(neo4j.http) as browser:
        browser.connect(neo4j.uri, neo4j.user, neo4j.password)
        browser.apply_style(style_command())
        frame = browser.run(history_query(1000.0, 0.1))
        drawn = browser.wait_for_graph(frame, vertices)
        assert browser.relationships(frame) == edges
        frame.screenshot(path=str(shot))

    assert len(drawn) == vertices
    labels = []
    for vertex in drawn:
        if vertex.caption.startswith("load"):
            label = "Execution"
        elif vertex.caption in node_names:
            label = "Node"
        else:
            assert vertex.caption in pod_names, vertex
            label = "Pod"
        labels.append(label)
        assert vertex.fill == colours[label], (vertex, label)
    assert sorted(labels) == sorted(
        ["Execution"] * 2 + ["Node"] * (vertices - 2 - len(pod_names)) + ["Pod"] * len(pod_names)
    )
    captions = {" ".join(v.caption.split()) for v in drawn}
    assert {"load 1000.0 cost 0.48", "load 1040.0 cost 0.32"} <= captions, captions
    assert shot.stat().st_size > 10_000
    if os.environ.get("TUNER_UPDATE_DOCS") == "1":
        DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_IMAGE)
