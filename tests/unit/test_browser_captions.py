"""Captions short enough for Neo4j Browser's circles (the real drawing is checked in
tests/integration/test_browser_neo4j.py)."""

from __future__ import annotations

import pytest

from knowledge.browser.captions import execution_caption, node_captions


@pytest.mark.parametrize(
    ("names", "captions"),
    [
        (
            ["gke-shop-pool-a-1f2e3d4c-x7q2", "gke-shop-pool-b-9a8b7c6d-k2m1"],
            ["x7q2", "k2m1"],
        ),
        (["gke-shop-pool-a-1", "gke-shop-pool-a-2", "gke-shop-pool-b-1"], ["a-1", "a-2", "b-1"]),
        (
            [
                "ip-10-0-12-34.eu-west-1.compute.internal",
                "ip-10-0-7-201.eu-west-1.compute.internal",
            ],
            ["12-34", "201"],
        ),
        (["aks-nodepool1-12345678-vmss000001"], ["vmss000001"]),
        (["pool-c-1"], ["c-1"]),
        (["a-1", "x-a-1"], ["a-1", "x-a-1"]),
        (["node.one", "node.two"], ["node.one", "node.two"]),
        (["kwok-node-0", "kwok-node-1"], ["node-0", "node-1"]),
        ([None, 7], ["None", "7"]),
    ],
)
def test_node_captions_keep_what_tells_the_nodes_apart(
    names: list[object], captions: list[str]
) -> None:
    assert node_captions(names) == captions


def test_execution_captions_round_the_load_and_show_the_cost() -> None:
    assert execution_caption(238.10891027, 1.5488) == "load 238 cost 1.5488/h"
    assert execution_caption(7.4213, 0.134) == "load 7.42 cost 0.1340/h"
    assert execution_caption(123456.7, 12.0) == "load 123457 cost 12.0000/h"
    assert execution_caption("lots", None) == "load ? cost ?/h"  # another tool's data
