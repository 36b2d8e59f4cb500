"""The soak bench's helpers (bench/daemon_soak.py): its prefilled knowledge store, and what its
probe reports of a process's memory."""

from __future__ import annotations

import weakref
from pathlib import Path

from bench.daemon_soak import PREFILL, PREFILL_LOAD, prefill, theil_sen
from bench.daemon_soak_child import holder, memory
from knowledge.embedded import EmbeddedKnowledgeBase


def test_the_prefilled_store_outgrows_sqlites_page_cache_and_never_serves_the_bench(
    tmp_path: Path,
) -> None:
    prefill(tmp_path / "kb.sqlite", PREFILL)

    assert (tmp_path / "kb.sqlite").stat().st_size > 2_048_000 * 1.2  # the default cache's bound
    store = EmbeddedKnowledgeBase(tmp_path / "kb.sqlite", read_only=True)
    try:
        assert len(store.list()) == PREFILL
        assert store.find_by_load(100.0, 0.5) == []
        assert len(store.find_by_load(PREFILL_LOAD, 0.1, limit=2)) == 2
    finally:
        store.close()


def test_the_probe_says_where_the_memory_is(tmp_path: Path) -> None:
    found = memory(str(tmp_path / "scratch"))

    assert found["rss"] > 0
    assert abs(found["rss_heap"] + found["rss_anon"] + found["rss_file"] - found["rss"]) < 1
    assert found["malloc_in_use"] <= found["malloc_system"]
    assert found["pymalloc_arenas"] >= 1 and found["pymalloc_in_use"] > 0
    assert found["threads"] >= 1


class Keeper:
    def __init__(self) -> None:
        self.refs: list[weakref.ref[object]] = []


def test_a_dead_weak_reference_is_named_by_who_holds_it() -> None:
    keeper = Keeper()
    gone = Keeper()
    keeper.refs.append(weakref.ref(gone))
    del gone

    assert "list in Keeper" in holder(keeper.refs[0], ())


def test_theil_sen_is_the_median_pairwise_slope() -> None:
    assert theil_sen([1.0, 2.0, 3.0, 4.0, 100.0]) == 1.0  # one outlier moves nothing
    assert theil_sen([5.0]) == 0.0
