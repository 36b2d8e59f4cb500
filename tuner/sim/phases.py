"""The phase spread (``tuner simulate --phases N``): how much a row's figures owe to where its
cycles fall.

A tuner looks at the cluster every ``windows.retry_s`` at the finest (``decline_retry_s`` during
a released decline), so which 5-s tick each look falls on is an accident of when the daemon
started. One run per scenario shows one such accident: a removal refused at one look may be
allowed ten seconds later, and a single action can carry a fifth of a scenario's room. With
``--phases N`` every chosen row except CA alone and Karpenter (the references the targets are
judged against, run once) is run N times, its first turn :data:`PHASE_STEP_S` × k later for
k = 0 … N − 1 (k = 0 is the run the tables show), and one row per scenario and row gives the
spread: the room captured at k = 0 and its least, median and most, the other targets' figures
from least to most, at how many phases every target of :mod:`tuner.sim.targets` is met, and how
often each one is missed. ``--phases-doc`` puts those rows between a file's
``<!-- phases:begin -->`` and ``<!-- phases:end -->`` markers, the rows of other scenarios kept.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from tuner.sim.report import BASELINE, Comparison, StrategyRun
from tuner.sim.targets import KARPENTER, missed

PHASE_STEP_S = 10.0
"""Two ticks: six phases span one retry (60 s) of the default settings, two of a decline's looks."""
PHASES_BEGIN = "<!-- phases:begin -->"
PHASES_END = "<!-- phases:end -->"
PHASES_HEADER = (
    "| scenario | row | room captured at the first phase (least, median, most) "
    "| pending pod-s, least to most (CA alone) | s over 100 % CPU, least to most (CA alone) "
    "| evictions/h, least to most | every target met at | targets missed (phases) |",
    "|---|---|---|---|---|---|---|---|",
)
REFERENCES = (BASELINE, KARPENTER)
"""Run once, at the first phase: what every phase of the other rows is judged against."""


def offsets(phases: int) -> tuple[float, ...]:
    """When each phase's row takes its first turn, after the warm-up's end (seconds)."""
    return tuple(k * PHASE_STEP_S for k in range(phases))


def shifted(phases: int, strategies: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """The runs the spread adds beyond the first phase's: every row but the references, at
    every later offset."""
    return tuple(
        (s, offset) for offset in offsets(phases)[1:] for s in strategies if s not in REFERENCES
    )


def at_phases(
    comparison: Comparison, strategy: str, later: Sequence[StrategyRun]
) -> list[Comparison]:
    """The comparison as it stands (the first phase), then one per later run of ``strategy``
    with that run in its row's place (the references and the bounds unchanged)."""

    def placed(run: StrategyRun) -> Comparison:
        outcomes = tuple(run if o.strategy == strategy else o for o in comparison.outcomes)
        return replace(comparison, outcomes=outcomes)

    return [comparison, *(placed(run) for run in later)]


def spread_row(phases: Sequence[Comparison], strategy: str) -> str:
    """One row of the phase table for ``strategy`` over its phases (the first as run)."""
    first = phases[0]
    base = first.outcome(BASELINE)
    runs = [c.outcome(strategy) for c in phases]
    captured = [c.captured(strategy) for c in phases]
    misses = [missed(c, strategy) for c in phases]
    counted = Counter(m for ms in misses for m in ms)
    met = sum(1 for ms in misses if not ms)
    return (
        f"| {first.scenario.name} | {strategy} | {_captured(captured)} "
        f"| {_span([r.pending_pod_seconds for r in runs])} ({base.pending_pod_seconds:.0f}) "
        f"| {_span([r.short_seconds for r in runs])} ({base.short_seconds:.0f}) "
        f"| {_span([r.evictions_per_hour for r in runs], '.1f')} "
        f"| {met} of {len(phases)} "
        f"| {'; '.join(f'{name} ({n})' for name, n in counted.items()) or '—'} |"
    )


def _captured(shares: Sequence[float | None]) -> str:
    known = [s for s in shares if s is not None]
    if shares[0] is None or not known:
        return "— (no room)"
    least, middle, most = min(known), statistics.median(known), max(known)
    return f"{shares[0]:.0%} ({least:.0%}, {middle:.0%}, {most:.0%})"


def _span(values: Sequence[float], spec: str = ".0f") -> str:
    least, most = (f"{value:{spec}}" for value in (min(values), max(values)))
    return least if least == most else f"{least}–{most}"
