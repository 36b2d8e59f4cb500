"""The simulator's in-memory knowledge base keeps the knowledge-base contract that every real
backend is held to (the behavioural suite in ``tests/knowledge/test_contract.py``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

from knowledge.base import KnowledgeBase
from knowledge.memory import MemoryKnowledge
from tests.knowledge import test_contract

CHECKS = [
    function
    for name, function in inspect.getmembers(test_contract, inspect.isfunction)
    if name.startswith("test_") and list(inspect.signature(function).parameters) == ["kb"]
]


def test_the_whole_contract_is_collected() -> None:
    assert len(CHECKS) >= 7


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__)
def test_memory_knowledge_keeps_the_contract(check: Callable[[KnowledgeBase], None]) -> None:
    check(MemoryKnowledge())
