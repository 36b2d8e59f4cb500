"""The daemon hands the heap a cycle freed back to the system (:mod:`tuner.daemon.heap`)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

import tuner.daemon.run
from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.lazy import LazyKnowledge
from tests.unit.test_closed_pipes import _Actuator
from tuner.cycle import CycleReport, Outcome
from tuner.daemon.heap import malloc_trim_of, process_trim, trim_heap
from tuner.daemon.run import Daemon
from tuner.settings import Analyse, Pricing, Settings

GLIBC = platform.libc_ver()[0] == "glibc"


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_on_glibc_the_trim_returns_the_holes_freed_blocks_leave() -> None:
    """40 MB of 4 kB blocks (glibc's heap, not pymalloc's), every sixteenth kept: the rest are
    holes between live blocks, which free() alone keeps resident."""
    blocks = [bytes(4000) for _ in range(10_000)]
    kept = blocks[::16]
    del blocks
    before = _rss_kb()
    assert trim_heap(process_trim())
    assert before - _rss_kb() > 20_000
    assert len(kept) == 625


class _NoTrim:
    """A C library without ``malloc_trim`` (musl, macOS's libSystem)."""


def test_without_malloc_trim_the_trim_does_nothing() -> None:
    assert malloc_trim_of(_NoTrim()) is None
    assert trim_heap(None) is False


def _daemon(tmp_path: Path) -> Daemon:
    """A dry-run daemon whose cycles are handed to it (nothing is read)."""
    s = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0),
    )
    kb = LazyKnowledge(lambda: EmbeddedKnowledgeBase(tmp_path / "kb.sqlite"))
    return Daemon(s, _Actuator(), prometheus=None, kb=kb, dry_run=True)  # type: ignore[arg-type]


def test_each_cycle_ends_with_a_trim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pads: list[int] = []

    def trim(pad: int) -> int:
        pads.append(pad)
        return 1

    monkeypatch.setattr(tuner.daemon.run, "process_trim", lambda: trim)
    daemon = _daemon(tmp_path)
    for _ in range(2):
        daemon._on_cycle(CycleReport(Outcome.STAYED, 0, 600, "stayed", 60), 0.1)
    assert pads == [0, 0]


def test_a_daemon_cycle_runs_where_there_is_no_malloc_trim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuner.daemon.run, "process_trim", lambda: None)
    daemon = _daemon(tmp_path)
    daemon._on_cycle(CycleReport(Outcome.STAYED, 0, 600, "stayed", 60), 0.1)
    assert daemon.metrics.cycles.labels(outcome="stayed")._value.get() == 1
