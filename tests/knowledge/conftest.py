"""Backends the knowledge-base behavioural suite runs against: all three, so they cannot drift."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.base import KnowledgeBase
from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.memory import MemoryKnowledge

BACKENDS = ["embedded", "memory", "neo4j"]


@pytest.fixture(params=BACKENDS)
def kb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KnowledgeBase]:
    """An empty knowledge base of each backend (the Neo4j one on the emptied test server)."""
    store: KnowledgeBase
    if request.param == "neo4j":
        store = request.getfixturevalue("neo4j").open()
    elif request.param == "memory":
        store = MemoryKnowledge()
    else:
        store = EmbeddedKnowledgeBase(tmp_path / "kb.sqlite")
    yield store
    store.close()
