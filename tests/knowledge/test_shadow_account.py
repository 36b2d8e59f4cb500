"""The shadow account, the same in every knowledge backend (embedded, in memory, Neo4j)."""

from __future__ import annotations

from dataclasses import replace

from knowledge.base import KnowledgeBase
from tuner.model.account import ShadowCycle


def cycle(at: float, **fields: object) -> ShadowCycle:
    base = ShadowCycle(
        at=at,
        interval_s=600.0,
        decision="remove_nodes",
        reason="n-3 can be removed; their pods fit elsewhere",
        cost_before=1.25,
        cost_after=0.75,
        currency="EUR",
        actions=(("migrate", 2), ("remove_node", 1)),
        evictions=(("shop", 1), ("web", 1)),
        plan="0123456789abcdef",
        touched=("shop/cart-1", "web/front-2"),
        premise="fedcba9876543210",
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def test_cycles_come_back_whole_oldest_first_within_the_period(kb: KnowledgeBase) -> None:
    held = cycle(2000.5, held="outside maintenance window, next at ...", changed=True)
    stayed = cycle(1000.0, decision="stay", actions=(), evictions=(), plan="", touched=())
    unchanged = cycle(3000.0, changed=False)
    for c in (unchanged, held, stayed, cycle(999.0), cycle(3000.5)):
        kb.record_shadow(c)
    assert kb.shadow_cycles(1000.0, 3000.0) == [stayed, held, unchanged]
    assert kb.shadow_cycles(4000.0, 5000.0) == []


def test_recording_a_cycle_twice_keeps_one(kb: KnowledgeBase) -> None:
    kb.record_shadow(cycle(1000.0))
    kb.record_shadow(cycle(1000.0))
    assert len(kb.shadow_cycles(0.0, 2000.0)) == 1


def test_the_account_is_apart_from_the_stable_deployments(kb: KnowledgeBase) -> None:
    kb.record_shadow(cycle(1000.0))
    assert kb.list() == []
    assert kb.find_by_load(100.0, 1.0) == []
    assert kb.prune(older_than=10**9) == 0
    assert kb.shadow_cycles(0.0, 2000.0) == [cycle(1000.0)]
