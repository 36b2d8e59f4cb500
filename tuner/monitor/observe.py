"""One observation of a window: its stability verdict, why, and the load it served.

:func:`observe_window` is what the daemon calls every cycle and what ``tuner monitor`` prints.
It wires the adapters (Prometheus, API snapshots) to the pure judges in
:mod:`tuner.monitor.stability` and :mod:`tuner.monitor.load`, and never raises for a service
failure: a query that fails or answers nonsense makes the window ``unknown``, naming the query.
"""

from __future__ import annotations

from tuner.errors import InputError, ServiceError
from tuner.model.conventions import Keys
from tuner.model.load import Load
from tuner.model.window_report import KSM, SNAPSHOTS, Scope, Verdict, WindowReport
from tuner.monitor.coverage import coverage_warning, partial_coverage
from tuner.monitor.evidence import REQUIRED_METRICS, Probe, WindowEvidence, evidence_from_series
from tuner.monitor.load import LoadError, load_from_scalar, load_from_vector, load_query
from tuner.monitor.load import render_query as render_load_query
from tuner.monitor.prometheus import Queries, QueryError
from tuner.monitor.series import Series
from tuner.monitor.snapshots import SnapshotSource
from tuner.monitor.stability import Assessment, assess, compare_snapshots, left_to_autoscaler
from tuner.monitor.window import Steps, Window, clock_time, promql_duration, steps_over
from tuner.settings import Settings, Windows


def observe_window(
    settings: Settings,
    end: float,
    prometheus: Queries,
    snapshots: SnapshotSource | None = None,
    *,
    start: float | None = None,
) -> WindowReport:
    """Judge the window ending at ``end`` and measure the load it served.

    The window is ``[start, end]`` (default ``start = end - windows.measure_s``); stability is
    checked over it and the ``windows.warmup_s`` before it, from kube-state-metrics series in
    ``prometheus`` — or, when those series are absent, by comparing ``snapshots`` of the
    cluster at the checked start and at the end (the daemon keeps them in a
    :class:`~tuner.monitor.snapshots.SnapshotHistory`). The load is ``load.query`` (or the
    2019 ``load.pod_name`` query) evaluated at ``end`` with ``$window`` = the window's length.
    The report says what changed and judges it by ``windows.scope``; the nodes the tuner left
    to the autoscaler are read from the snapshot at the checked start, when there is one.

    Never raises for a failing service (Prometheus down, slow, refusing, answering nonsense;
    a snapshot that cannot be read): the verdict is then ``unknown``, the reason says why and
    :attr:`WindowReport.failed_query` names the failed query. Raises only for bad input:
    :class:`~tuner.errors.InputError` for settings without a load query, ValueError when
    ``start`` is not before ``end``. After the call, schedule the next window with
    :func:`next_window_end`.
    """
    windows = settings.windows
    window = Window(end - windows.measure_s if start is None else start, end, windows.warmup_s)
    template = load_query(settings.load)
    query = render_load_query(template, window.length_s)

    keys = Keys(settings.execute.label_prefix)
    stability, source, failed, observed = _stability(window, prometheus, snapshots, keys)
    load: Load | None = None
    problem: str | None = None
    try:
        load = measure_load(prometheus, query, end)
    except QueryError as err:
        problem, failed = f"load query failed: {err.message}", failed or err.query
    except LoadError as err:
        problem, failed = f"load query {err}", failed or query

    covered_from = None
    if load is not None:
        step_s = steps_over(window).step_s
        covered_from = partial_coverage(prometheus, template, window.start, end, step_s)
    verdict, reasons = stability.verdict, stability.reasons
    if problem is not None:
        problem = f"{problem} (query: {query})"
        if verdict is Verdict.UNKNOWN:
            reasons = (*reasons, problem)
        else:  # the window itself was judged; without a load the tuner still cannot act
            verdict, reasons = Verdict.UNKNOWN, (problem, f"otherwise {verdict.value}", *reasons)
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return WindowReport(
        verdict=verdict,
        reason=reasons[0] + more,
        load=load,
        start=window.start,
        end=window.end,
        checked_from=window.checked_start,
        findings=reasons,
        source=source,
        load_query=query,
        failed_query=failed,
        scope=Scope(windows.scope),
        unsettled=stability.unsettled,
        load_covered_from=covered_from,
        load_warning=None
        if covered_from is None
        else coverage_warning(covered_from, window.start, end),
        observed_nodes=observed,
    )


def next_window_end(report: WindowReport, windows: Windows) -> float:
    """When the next window ends: a whole window later after a stable window (tumbling), the
    retry window later after an unstable or unknown one (the thesis' sliding window)."""
    step = windows.measure_s if report.verdict is Verdict.STABLE else windows.retry_s
    return report.end + step


def measure_load(prometheus: Queries, query: str, at: float) -> Load:
    """Evaluate a load query (``$window`` already replaced) at ``at``.

    Raises QueryError when Prometheus fails, LoadError when the answer is not a usable load.
    """
    answer = prometheus.instant(query, at)
    if isinstance(answer, float):
        return load_from_scalar(answer)
    return load_from_vector(answer)


def gather_evidence(prometheus: Queries, steps: Steps, placeholders: str) -> WindowEvidence:
    """Run the kube-state-metrics probes over the steps, leaving out the tuner's placeholder
    pods (named ``placeholders…``); QueryError names a failing probe.

    When the required series are absent altogether, the other probes are skipped.
    """
    span = promql_duration(steps.end - steps.start)
    results: dict[Probe, tuple[Series, ...]] = {}
    for probe in Probe:
        query = probe.query(span, placeholders)
        if probe.ranged:
            results[probe] = prometheus.range(query, steps.start, steps.end, steps.step_s)
        else:
            answer = prometheus.instant(query, steps.end)
            if isinstance(answer, float):
                raise QueryError(query, "answered a scalar where series were expected")
            results[probe] = answer
        if probe is Probe.PRESENCE and not results[probe]:
            break
    return evidence_from_series(steps, results)


def _stability(
    window: Window, prometheus: Queries, snapshots: SnapshotSource | None, keys: Keys
) -> tuple[Assessment, str, str | None, frozenset[str] | None]:
    """(assessment, source, failed query, the nodes observed: None when the source cannot say)."""
    try:
        evidence = gather_evidence(prometheus, steps_over(window), keys.placeholder_pod_prefix)
    except QueryError as err:
        failed = Assessment(Verdict.UNKNOWN, (f"stability query failed: {err}",))
        return failed, KSM, err.query, None
    if evidence.absent:
        assessment, observed = _from_snapshots(window, snapshots, evidence.absent, keys)
        return assessment, SNAPSHOTS, None, observed
    judged = assess(evidence, _left_for_removal(window, snapshots, keys))
    return judged, KSM, None, evidence.observed_nodes


def _left_for_removal(
    window: Window, snapshots: SnapshotSource | None, keys: Keys
) -> frozenset[str]:
    """Nodes the tuner had left to the autoscaler at the checked start (none when unknown)."""
    if snapshots is None:
        return frozenset()
    try:
        first = snapshots.snapshot(window.checked_start)
    except (ServiceError, InputError):
        return frozenset()
    return frozenset() if first is None else left_to_autoscaler(first, keys)


def _from_snapshots(
    window: Window, snapshots: SnapshotSource | None, absent: tuple[str, ...], keys: Keys
) -> tuple[Assessment, frozenset[str] | None]:
    """The snapshots' judgement and the nodes in either snapshot (None without both)."""
    why = f"{KSM} series absent ({', '.join(absent)})"
    if set(absent) != set(REQUIRED_METRICS):
        why += "; is kube-state-metrics scraped with all its pod and node metrics?"
    if snapshots is None:
        return Assessment(
            Verdict.UNKNOWN,
            (f"{why}, and no API snapshots to compare (the daemon keeps them, not a one-off run)",),
        ), None
    try:
        first = snapshots.snapshot(window.checked_start)
        last = snapshots.snapshot(window.end)
    except (ServiceError, InputError) as err:  # InputError: objects that do not parse
        return Assessment(Verdict.UNKNOWN, (f"{why}, and the API snapshot failed: {err}",)), None
    if first is None or last is None:
        missing = clock_time(window.checked_start if first is None else window.end)
        return Assessment(
            Verdict.UNKNOWN,
            (f"{why}, and there is no API snapshot from {missing} to compare with",),
        ), None
    judged = compare_snapshots(first, last, window.checked_start, window.end, keys=keys)
    observed = frozenset(n.name for n in (*first.nodes, *last.nodes))
    return Assessment(
        judged.verdict, (*judged.reasons, f"judged by API snapshots: {why}"), judged.unsettled
    ), observed
