"""``tuner simulate``: run scenarios under every strategy, print the tables, write the plots.

Output directory (``--output``): one ``<scenario>.png`` per scenario, ``results.md`` (every
table) and ``results.json`` (every figure, for scripts). With ``--readme``, the tables and plots
also replace what stands between the README's ``<!-- evaluation:begin -->`` and
``<!-- evaluation:end -->`` markers; with ``--ledger-doc``, the room ledger's summary table
(one row per scenario and tuner row) replaces what stands between that file's
``<!-- ledger:begin -->`` and ``<!-- ledger:end -->``, the rows of other scenarios kept; with
``--phases N`` the phase spread (:mod:`tuner.sim.phases`) follows, and with ``--phases-doc``
its rows go between that file's ``<!-- phases:begin -->`` and ``<!-- phases:end -->``.
Progress goes to stderr (:mod:`tuner.sim.progress`: a bar on a terminal, else a line every
5 %). ``--jobs N`` runs N simulations at once in worker processes (the figures do not change).

Everything is checked before the first simulated second: the scenarios (files against their
schema), ``--output`` (a directory or nothing yet, under a directory, not a dangling link; its
files regular files or missing, never links; writable with room for the outputs), ``--readme``
``--ledger-doc`` and ``--phases-doc`` (regular files with their markers, in a writable
directory). File names
come from scenario names (a schema pattern; sanitised again here), so nothing is written outside
``--output``; every file is written to a temporary name beside its target and renamed, keeping
the mode of the file it replaces (:mod:`tuner.output_files`).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import closing
from pathlib import Path
from typing import Any

from tuner.errors import InputError
from tuner.json_input import MAX_BYTES, read_bounded
from tuner.output_files import check_directory, check_file, write_atomic
from tuner.sim.engine import Scenario
from tuner.sim.forecast_error import ForecastError, ForecastKey, keyed_error
from tuner.sim.phases import (
    PHASES_BEGIN,
    PHASES_END,
    PHASES_HEADER,
    REFERENCES,
    at_phases,
    shifted,
    spread_row,
)
from tuner.sim.plots import plot
from tuner.sim.progress import Progress
from tuner.sim.report import (
    ORDER,
    Comparison,
    StrategyRun,
    forecast_keys,
    run,
    table,
    with_baseline,
)
from tuner.sim.report import comparison as compare_outcomes
from tuner.sim.room_ledger import (
    SUMMARY_BEGIN,
    SUMMARY_END,
    SUMMARY_HEADER,
    ledger_table,
    merged_summary,
    summary_row,
)
from tuner.sim.scenarios import SCENARIOS, scenario
from tuner.sim.targets import KARPENTER


def ledgers(results: Sequence[Comparison]) -> str:
    """The room ledger of every tuner row run with it, scenario by scenario."""
    return "\n\n".join(
        ledger_table(comparison.ledger(o.strategy))
        for comparison in results
        for o in comparison.outcomes
        if o.trace is not None
    )


def update_ledger_doc(doc: Path, results: Sequence[Comparison]) -> None:
    """Put the summary row of every tuner row run with the ledger into ``doc``'s ledger table
    (between its markers), the rows of other scenarios kept."""
    rows = [
        summary_row(comparison.ledger(o.strategy))
        for comparison in results
        for o in comparison.outcomes
        if o.trace is not None
    ]
    update_table_doc(doc, "--ledger-doc", SUMMARY_BEGIN, SUMMARY_END, rows, SUMMARY_HEADER)


def update_table_doc(
    doc: Path,
    flag: str,
    begin: str,
    end: str,
    rows: Sequence[str],
    header: Sequence[str],
) -> None:
    """Put ``rows`` into the table between ``doc``'s markers in place of those of the same
    scenario and row, the others kept (:func:`merged_summary`)."""
    head, old, tail = marked_parts(doc, flag, begin, end)
    table = merged_summary(old.strip("\n"), rows, header)
    write_atomic(doc, f"{head}{begin}\n{table}\n{end}{tail}")


def scenarios_for(name: str, hours: float | None) -> list[Scenario]:
    """``all`` or one name/file."""
    names = list(SCENARIOS) if name == "all" else [name]
    return [scenario(n, hours) for n in names]


def summary(comparison: Comparison) -> dict[str, Any]:
    """Figures of one comparison as JSON."""
    return {
        "scenario": comparison.scenario.name,
        "title": comparison.scenario.title,
        "seed": comparison.seed,
        "hours": comparison.scenario.duration / 3600,
        "currency": comparison.scenario.currency,
        "lower_bound": {
            "node_hours": round(comparison.lower_bound_node_hours, 3),
            "cost": round(comparison.lower_bound_cost, 4),
            "whole_node_cost": round(comparison.whole_bound_cost, 4),
            "pinned_cost": round(comparison.pinned_bound_cost, 4),
            "pinned_node_hours": round(comparison.pinned_bound_node_hours, 3),
            "no_wait_cost": round(comparison.no_wait_bound_cost, 4),
        },
        "room": round(comparison.room, 4),
        "safe_room": round(comparison.safe_room, 4),
        "no_wait_room": round(comparison.no_wait_room, 4),
        "strategies": {
            o.strategy: {
                "node_hours": round(o.node_hours, 3),
                "cost": round(o.cost, 4),
                "savings_vs_ca": round(comparison.savings(o.strategy), 4),
                "room_captured": _rounded(comparison.captured(o.strategy)),
                "safe_room_captured": _rounded(comparison.safe_captured(o.strategy)),
                "keeps_pinned": comparison.keeps_pinned(o.strategy),
                "gap_to_lower_bound": round(comparison.gap(o.strategy), 4),
                "evictions_per_hour": round(o.evictions_per_hour, 3),
                "pending_pod_seconds": o.pending_pod_seconds,
                "seconds_over_cpu": o.short_seconds,
                "stable_windows": o.windows[0],
                "windows_checked": o.windows[1],
                "actions": vars(o.actions),
                "decisions": o.decisions,
                **_forecast(comparison, o.strategy),
            }
            for o in comparison.outcomes
        },
    }


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 4)


def _forecast(comparison: Comparison, strategy: str) -> dict[str, Any]:
    """A tuner's forecast error (:meth:`ForecastError.to_json`), nothing for another row."""
    error = comparison.forecast_errors.get(strategy)
    return {} if error is None else {"forecast_error": error.to_json()}


DEFAULT_SEED = 1


def file_name(name: str) -> str:
    """A scenario name as a file name inside the output directory (no separators, no dots
    first)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "scenario"


OUTPUT_ROOM = 2**20
"""Bytes probed per scenario in ``--output`` (and added to the README's size for
``--readme``): a plot is about 100 kB, the tables a few kB."""
RESULTS = ("results.md", "results.json")


def check_outputs(
    output: Path | None,
    readme: Path | None,
    names: Sequence[str],
    ledger_doc: Path | None = None,
    phases_doc: Path | None = None,
    phases: int = 1,
) -> None:
    """Refuse, before simulating, an ``--output``, ``--readme``, ``--ledger-doc`` or
    ``--phases-doc`` the results could not be written to (see the module's docstring)."""
    if readme is not None and output is None:
        raise InputError("--readme needs --output (where the plots go)")
    if phases_doc is not None and phases < 2:
        raise InputError(f"--phases-doc needs --phases 2 or more, not {phases}")
    if output is not None:
        check_directory(output, "--output", OUTPUT_ROOM * len(names))
        for file in (*(f"{file_name(n)}.png" for n in names), *RESULTS):
            check_file(output / file, "--output", 0, inside=output)
    if readme is not None:
        check_file(readme, "--readme", 0)
        head, tail = readme_parts(readme)
        size = len(head.encode("utf-8")) + len(tail.encode("utf-8"))
        check_file(readme, "--readme", size + OUTPUT_ROOM * len(names))
    for doc, flag, begin, end in (
        (ledger_doc, "--ledger-doc", SUMMARY_BEGIN, SUMMARY_END),
        (phases_doc, "--phases-doc", PHASES_BEGIN, PHASES_END),
    ):
        if doc is not None:
            check_file(doc, flag, 0)
            head, old, tail = marked_parts(doc, flag, begin, end)
            size = len(f"{head}{old}{tail}".encode())
            check_file(doc, flag, size + OUTPUT_ROOM)


BEGIN = "<!-- evaluation:begin -->"
END = "<!-- evaluation:end -->"


def marked_parts(path: Path, flag: str, begin: str, end: str) -> tuple[str, str, str]:
    """A file's text before the ``begin`` marker, between the markers, and after ``end``."""
    text = read_bounded(path, flag, MAX_BYTES).decode("utf-8")
    head, found_begin, rest = text.partition(begin)
    inside, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise InputError(f"{path} has no {begin} ... {end} section to fill")
    return head, inside, tail


def readme_parts(readme: Path) -> tuple[str, str]:
    """The README's text before its evaluation section and after it."""
    head, _old, tail = marked_parts(readme, "--readme", BEGIN, END)
    return head, tail


def update_readme(readme: Path, results: Sequence[Comparison], output: Path) -> None:
    """Put every scenario's table and plot between the README's evaluation markers."""
    head, tail = readme_parts(readme)
    images = Path(os.path.relpath(output, readme.parent)).as_posix()
    blocks = []
    for comparison in results:
        sc = comparison.scenario
        blocks.append(
            f"#### {sc.title} ({sc.duration / 3600:g} h, seed {comparison.seed})\n\n"
            f"{table(comparison)}\n\n![{sc.name}]({images}/{file_name(sc.name)}.png)\n"
        )
    generated = "\n".join(blocks)
    write_atomic(readme, f"{head}{BEGIN}\n{generated}{END}{tail}")


def work(scenario: Scenario) -> float:
    """How much simulating the scenario costs, roughly: its hours times its workloads (a tick
    costs about its pods and nodes). The longest runs start first, so that none is left alone
    at the end: ``large`` (12 h, 347 workloads) costs more than a 24-hour scenario of 100."""
    return scenario.duration / 3600 * max(len(scenario.services), 1)


Errors = dict[tuple[int, ForecastKey], ForecastError]
"""The forecast errors, by scenario index and the forecast a tuner's settings make."""


Task = tuple[int, str, float]
"""One run: the scenario's index, the strategy, when its first turn comes (the phase)."""


def _run_all(
    chosen: Sequence[Scenario],
    tasks: Sequence[Task],
    seeds: Sequence[int],
    jobs: int,
    progress: Progress,
    needed: Sequence[tuple[int, ForecastKey]],
    ledger: bool = False,
) -> tuple[dict[Task, StrategyRun], Errors]:
    """Every run, then the ``needed`` forecast errors; with ``jobs`` > 1 in that many worker
    processes, the most work first (see :func:`work`). ``ledger``: the tuners' runs at the
    first phase are recorded for the room ledger."""
    outcomes: dict[Task, StrategyRun] = {}
    errors: Errors = {}
    if jobs == 1:
        for i, strategy, at in tasks:
            progress.describe(f"{chosen[i].name} {strategy}")
            outcomes[i, strategy, at] = run(
                chosen[i],
                strategy,
                seeds[i],
                lambda s: progress.update(s / 3600),
                ledger and not at,
                at,
            )
        for i, key in needed:
            errors[i, key] = keyed_error(chosen[i], key)
        return outcomes, errors
    order = sorted(tasks, key=lambda task: -work(chosen[task[0]]))
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        pending = {
            pool.submit(run, chosen[i], strategy, seeds[i], None, ledger and not at, at): (
                i,
                strategy,
                at,
            )
            for i, strategy, at in order
        }
        forecasts = {pool.submit(keyed_error, chosen[i], key): (i, key) for i, key in needed}
        for future in as_completed(pending):
            i, strategy, at = pending[future]
            outcomes[i, strategy, at] = future.result()
            progress.describe(f"{chosen[i].name} {strategy}")
            progress.update((chosen[i].warmup + chosen[i].duration) / 3600)
        for made in as_completed(forecasts):
            errors[forecasts[made]] = made.result()
    return outcomes, errors


def simulate(
    name: str,
    strategies: Sequence[str] = ORDER,
    hours: float | None = None,
    seed: int | None = None,
    output: Path | None = None,
    readme: Path | None = None,
    jobs: int = 1,
    ledger: bool = False,
    ledger_doc: Path | None = None,
    phases: int = 1,
    phases_doc: Path | None = None,
) -> list[Comparison]:
    """Run, print and (with ``output``) write the comparison of every scenario; with
    ``readme`` (and ``output``) also fill the README's evaluation section. ``jobs`` > 1 runs
    that many (scenario, strategy) simulations at once in worker processes: each run is
    seeded on its own, so the figures are the same. With ``ledger``, each tuner row's room
    ledger (:mod:`tuner.sim.room_ledger`) is printed after the tables; with ``ledger_doc``
    (which implies ``ledger``), its summary row also goes into that file's ledger table. With
    ``phases`` > 1 (Karpenter then always runs), the phase spread (:mod:`tuner.sim.phases`)
    is printed after them; with ``phases_doc``, its rows also go into that file's phase table."""
    chosen = scenarios_for(name, hours)
    ledger = ledger or ledger_doc is not None
    # before hours of simulation:
    check_outputs(output, readme, [item.name for item in chosen], ledger_doc, phases_doc, phases)
    names = with_baseline(strategies)
    if phases > 1 and KARPENTER not in names:
        names.append(KARPENTER)
    later = shifted(phases, names)
    runs = [*((n, 0.0) for n in names), *later]
    tasks = [(i, s, at) for i in range(len(chosen)) for s, at in runs]
    seeds = [seed if seed is not None else (item.seed or DEFAULT_SEED) for item in chosen]
    total = sum(chosen[i].warmup + chosen[i].duration for i, _, _ in tasks)
    keys = [forecast_keys(item, seeds[i], names) for i, item in enumerate(chosen)]
    needed = sorted({(i, key) for i, by_name in enumerate(keys) for key in by_name.values()})
    started = time.monotonic()
    with closing(Progress(total / 3600)) as progress:
        outcomes, errors = _run_all(chosen, tasks, seeds, jobs, progress, needed, ledger)
    results = [
        compare_outcomes(
            item,
            seeds[i],
            tuple(outcomes[i, n, 0.0] for n in names),
            {name: errors[i, key] for name, key in keys[i].items()},
        )
        for i, item in enumerate(chosen)
    ]
    elapsed = time.monotonic() - started
    sections = []
    for comparison in results:
        sc = comparison.scenario
        heading = f"### {sc.name}: {sc.title} ({sc.duration / 3600:g} h, seed {comparison.seed})"
        sections.append(f"{heading}\n\n{table(comparison)}\n")
    print("\n".join(sections))
    print(f"simulated in {elapsed:.1f} s", file=sys.stderr)
    if output is not None:
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"--output: cannot create {output}: {err.strerror or err}") from None
        for comparison in results:
            write_atomic(output / f"{file_name(comparison.scenario.name)}.png", plot(comparison))
        write_atomic(output / "results.md", "\n".join(sections))
        write_atomic(
            output / "results.json", json.dumps([summary(c) for c in results], indent=2) + "\n"
        )
        if readme is not None:
            update_readme(readme, results, output)
    if ledger:
        print(ledgers(results))
    if ledger_doc is not None:
        update_ledger_doc(ledger_doc, results)
    if phases > 1:
        rows = _spread(results, names, later, outcomes)
        print("\n".join((*PHASES_HEADER, *rows)))
        if phases_doc is not None:
            update_table_doc(
                phases_doc, "--phases-doc", PHASES_BEGIN, PHASES_END, rows, PHASES_HEADER
            )
    return results


def _spread(
    results: Sequence[Comparison],
    names: Sequence[str],
    later: Sequence[tuple[str, float]],
    outcomes: dict[Task, StrategyRun],
) -> list[str]:
    """The phase table's rows: every row but the references, on every scenario."""
    return [
        spread_row(at_phases(c, s, [outcomes[i, s, at] for t, at in later if t == s]), s)
        for i, c in enumerate(results)
        for s in names
        if s not in REFERENCES
    ]
