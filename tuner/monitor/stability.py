"""Was the deployment stable over a window? (FR04/FR05: act only on a stable deployment.)

Stable means: over the whole checked span the node set and every workload's pod count did not
change, no pod was Pending or not Ready, and no rollout was in progress. Two judges:

- :func:`assess` over :class:`~tuner.monitor.evidence.WindowEvidence` (kube-state-metrics
  series; sees changes that went and came back inside the window);
- :func:`compare_snapshots`, the thesis' method, for when those series are absent: the
  cluster at the window's start and at its end, compared by node names, per-workload pod
  counts and pending/unready pods.

Besides the verdict on the whole cluster, both judges say what changed (:class:`Unsettled`):
the nodes that joined, were cordoned or uncordoned or had pods start or stop on them, the
workloads whose pod count changed, that rolled out or had unready pods, and the cluster-wide
blockers: a pod pending anywhere, a node joining or leaving — except the nodes the tuner itself
left to the autoscaler (``handed_over``), whose going is the change it made. Under the
``touched`` scope the tuner acts when there is no blocker and keeps what changed out of the plan.

A third verdict, ``unknown``, means the window could not be judged (data missing, a query
failed); the tuner never acts on it. All functions here are pure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from tuner.model.cluster import Cluster, Pod, Workload
from tuner.model.conventions import Keys
from tuner.model.window_report import Unsettled, Verdict
from tuner.monitor.decline import shrunk_in_series, shrunk_in_snapshots
from tuner.monitor.evidence import DeploymentState, WindowEvidence
from tuner.monitor.window import clock_time

LISTED = 5
"""Names listed per finding before "and N more"."""
MAX_BLIND_FRACTION = 0.1
"""Steps without any kube-state-metrics data (failed scrapes) a window may have and still be
judged (at least one)."""
T = TypeVar("T")


@dataclass(frozen=True)
class Assessment:
    """A verdict and every reason for it, most important first."""

    verdict: Verdict
    reasons: tuple[str, ...]
    unsettled: Unsettled = field(default_factory=Unsettled)
    """What changed (empty unless the verdict is ``unstable``)."""

    @property
    def reason(self) -> str:
        """The reasons on one line."""
        return "; ".join(self.reasons)


def assess(evidence: WindowEvidence, handed_over: frozenset[str] = frozenset()) -> Assessment:
    """Judge a window from kube-state-metrics evidence; ``handed_over`` are the nodes the tuner
    left to the autoscaler (their leaving blocks nothing).

    Steps where every kube-state-metrics series is missing at once (a failed scrape) say
    nothing about the cluster: they are left out of the timelines, up to
    :data:`MAX_BLIND_FRACTION` of the steps; more make the window unknown.
    """
    if evidence.absent:
        names = ", ".join(evidence.absent)
        return Assessment(Verdict.UNKNOWN, (f"kube-state-metrics series absent: {names}",))
    blind = evidence.blind
    all_times = evidence.steps.times
    if sum(blind) > max(1, math.floor(MAX_BLIND_FRACTION * len(blind))):
        return Assessment(
            Verdict.UNKNOWN,
            (
                f"no kube-state-metrics data at {sum(blind)} of {len(blind)} steps "
                f"({_span(all_times, blind)}): not scraped for part of the window",
            ),
        )
    keep = [k for k, b in enumerate(blind) if not b]
    times = [all_times[k] for k in keep]
    gaps = [
        f"no {metric} data from {_span(times, [missing[k] for k in keep])}"
        for metric, missing in evidence.missing.items()
        if any(missing[k] for k in keep)
    ]
    if gaps:
        return Assessment(
            Verdict.UNKNOWN, (*gaps, "kube-state-metrics was not scraped for part of the window")
        )
    seen = _at_steps(evidence, keep)
    findings = [
        *_node_findings(seen, times),
        *_pod_count_findings(seen, times),
        *_pod_state_findings(seen.pending, seen.unready),
        *_deployment_findings(seen, times),
    ]
    if findings:
        return Assessment(Verdict.UNSTABLE, tuple(findings), _unsettled(seen, times, handed_over))
    pods = sum(counts[-1] for counts in seen.pod_counts.values())
    missed = (
        f"; no data at {sum(blind)} of {len(blind)} steps (a failed scrape)" if any(blind) else ""
    )
    return Assessment(
        Verdict.STABLE,
        (
            f"stable from {clock_time(times[0])} to {clock_time(times[-1])}: "
            f"{_counted_as(len(seen.nodes), 'node')}, {_counted_as(pods, 'pod')} in "
            f"{_counted_as(len(seen.pod_counts), 'workload')}, "
            f"no pod pending or unready, no rollout{missed}",
        ),
    )


def _at_steps(evidence: WindowEvidence, keep: Sequence[int]) -> WindowEvidence:
    """The evidence with its timelines restricted to the steps ``keep``."""

    def pick(values: Sequence[T]) -> tuple[T, ...]:
        return tuple(values[k] for k in keep)

    return replace(
        evidence,
        nodes={n: pick(p) for n, p in evidence.nodes.items()},
        pod_counts={w: pick(c) for w, c in evidence.pod_counts.items()},
        node_pods={n: pick(c) for n, c in evidence.node_pods.items()},
        deployments={d: pick(s) for d, s in evidence.deployments.items()},
    )


def compare_snapshots(
    start: Cluster,
    end: Cluster,
    start_time: float,
    end_time: float,
    handed_over: frozenset[str] = frozenset(),
    *,
    keys: Keys,
) -> Assessment:
    """The thesis' check: the cluster at the window's start against the cluster at its end.

    A change that went and came back inside the window cannot be seen this way. The nodes the
    tuner left to the autoscaler are ``handed_over`` plus those annotated so at the start (with
    ``keys``' annotation).
    """
    start, end = _without_placeholders(start, keys), _without_placeholders(end, keys)
    findings: list[str] = []
    before, after = {n.name for n in start.nodes}, {n.name for n in end.nodes}
    if after - before:
        findings.append(f"nodes added: {_names(after - before)}")
    if before - after:
        findings.append(f"nodes removed: {_names(before - after)}")
    counts_before, counts_after = _pod_counts(start), _pod_counts(end)
    for workload in sorted(set(counts_before) | set(counts_after)):
        was, now = counts_before.get(workload, 0), counts_after.get(workload, 0)
        if was != now:
            findings.append(f"{workload}: pod count {was} → {now}")
    for when, cluster in ((clock_time(start_time), start), (clock_time(end_time), end)):
        pending = {p.key for p in _counted(cluster.pods) if p.pending}
        unready = {p.key for p in _counted(cluster.pods) if not p.ready} - pending
        if pending:
            findings.append(f"pending at {when}: {_names(pending)}")
        if unready:
            findings.append(f"not ready at {when}: {_names(unready)}")
    if findings:
        left = handed_over | left_to_autoscaler(start, keys)
        return Assessment(Verdict.UNSTABLE, tuple(findings), _snapshot_unsettled(start, end, left))
    pods = sum(counts_after.values())
    return Assessment(
        Verdict.STABLE,
        (
            f"same at {clock_time(start_time)} and {clock_time(end_time)} (API snapshots; "
            f"changes inside the window are not visible): {_counted_as(len(after), 'node')}, "
            f"{_counted_as(pods, 'pod')} in {_counted_as(len(counts_after), 'workload')}, "
            "no pod pending or unready",
        ),
    )


# ---------------------------------------------------------------- what changed


def _unsettled(
    evidence: WindowEvidence, times: Sequence[float], handed_over: frozenset[str]
) -> Unsettled:
    """The nodes and workloads that changed, and the cluster-wide blockers, from the series."""
    nodes = {n for n, present in evidence.nodes.items() if any(present)}
    comings = {n for n, present in evidence.nodes.items() if not all(present)}
    comings |= evidence.nodes_seen - nodes
    nodes_changed = comings | set(evidence.cordons)
    for node, counts in evidence.node_pods.items():
        if len(set(counts)) > 1 or evidence.node_pods_seen.get(node, 0) > counts[0]:
            nodes_changed.add(node)
    for node, seen in evidence.node_pods_seen.items():
        if node not in evidence.node_pods and seen:
            nodes_changed.add(node)
    workloads = {
        w
        for w, counts in evidence.pod_counts.items()
        if len(set(counts)) > 1 or evidence.pods_seen.get(w, 0) > counts[0]
    }
    workloads |= {w for w in evidence.pods_seen if w not in evidence.pod_counts}
    workloads |= {
        _deployment(name)
        for name in set(evidence.deployments) | set(evidence.deployment_changes)
        if _rollout_issues(evidence.deployments.get(name, ()), times)
        or any(evidence.deployment_changes.get(name, {}).values())
    }
    orphans: set[str] = set()
    for key in evidence.pending | evidence.unready:
        workload = evidence.pod_workloads.get(key)
        if workload is None:
            orphans.add(key)
        else:
            workloads.add(workload)
    blockers = _blockers(evidence.pending, comings - handed_over)
    if orphans - evidence.pending:
        blockers.append(f"unready pods of no known workload: {_names(orphans - evidence.pending)}")
    unsettled = Unsettled(frozenset(nodes_changed), frozenset(workloads), tuple(blockers))
    return shrunk_in_series(evidence, unsettled, comings - handed_over, bool(orphans))


def _snapshot_unsettled(start: Cluster, end: Cluster, handed_over: frozenset[str]) -> Unsettled:
    """What changed between two snapshots (a change that came back is not seen)."""
    before, after = {n.name: n for n in start.nodes}, {n.name: n for n in end.nodes}
    comings = set(before) ^ set(after)
    nodes = comings | {
        name
        for name in set(before) & set(after)
        if before[name].unschedulable != after[name].unschedulable
        or _pod_keys(start, name) != _pod_keys(end, name)
    }
    counts_before, counts_after = _pod_counts(start), _pod_counts(end)
    workloads = {
        w
        for w in set(counts_before) | set(counts_after)
        if counts_before.get(w, 0) != counts_after.get(w, 0)
    }
    pending: set[str] = set()
    troubled: set[Workload] = set()
    for cluster in (start, end):
        for pod in _counted(cluster.pods):
            if pod.pending:
                pending.add(pod.key)
            if pod.pending or not pod.ready:
                troubled.add(pod.workload)
    blockers = _blockers(pending, comings - handed_over)
    unsettled = Unsettled(frozenset(nodes), frozenset(workloads | troubled), tuple(blockers))
    return shrunk_in_snapshots(start, end, unsettled, troubled, bool(pending), handed_over)


def _blockers(pending: Iterable[str], comings: Iterable[str]) -> list[str]:
    """Cluster-wide reasons not to act: pending pods, nodes joining or leaving."""
    blockers = []
    if pending := set(pending):
        blockers.append(f"pending pods: {_names(pending)}")
    if comings := set(comings):
        blockers.append(f"nodes joining or leaving: {_names(comings)}")
    return blockers


def _pod_keys(cluster: Cluster, node: str) -> frozenset[str]:
    return frozenset(p.key for p in cluster.pods_by_node[node])


def left_to_autoscaler(cluster: Cluster, keys: Keys) -> frozenset[str]:
    """Nodes annotated as left to the autoscaler by this tuner: its ``keys.left_for_removal``
    annotation, not another tool's key that ends the same way."""
    return frozenset(n.name for n in cluster.nodes if keys.left_for_removal in n.annotations)


def _deployment(name: str) -> Workload:
    namespace, deployment = name.split("/", 1)
    return Workload(namespace, "Deployment", deployment)


# ---------------------------------------------------------------- findings from evidence


def _node_findings(evidence: WindowEvidence, times: Sequence[float]) -> list[str]:
    findings = []
    for node, present in sorted(evidence.nodes.items()):
        if not all(present):
            findings.append(f"node {node} {_presence(present, times)}")
    brief = evidence.nodes_seen - {n for n, present in evidence.nodes.items() if any(present)}
    if brief:
        findings.append(f"nodes that came and went between two steps: {_names(brief)}")
    return findings


def _presence(present: Sequence[bool], times: Sequence[float]) -> str:
    first = present.index(True) if any(present) else None
    last = len(present) - 1 - list(reversed(present)).index(True) if any(present) else None
    if first is None or last is None:
        return "never existed"
    if first > 0 and last == len(present) - 1:
        return f"appeared at {clock_time(times[first])}"
    if first == 0 and last < len(present) - 1:
        return f"disappeared at {clock_time(times[last + 1])}"
    if first == 0:
        absent = [not p for p in present]
        return f"was missing {_span(times, absent)}"
    return f"existed only from {clock_time(times[first])} to {clock_time(times[last])}"


def _pod_count_findings(evidence: WindowEvidence, times: Sequence[float]) -> list[str]:
    findings = []
    for workload in sorted(set(evidence.pod_counts) | set(evidence.pods_seen)):
        counts = evidence.pod_counts.get(workload, (0,) * len(times))
        path = _path(counts)
        if len(path) > 1:
            changed = next(k for k in range(1, len(counts)) if counts[k] != counts[k - 1])
            trail = " → ".join(str(c) for c in path)
            findings.append(
                f"{workload}: pod count changed {trail} (first at {clock_time(times[changed])})"
            )
            continue
        seen = evidence.pods_seen.get(workload, 0)
        if seen > counts[0]:
            findings.append(
                f"{workload}: {seen} different pods in the window but {counts[0]} at a time "
                "(pods were replaced, or came and went between two steps)"
            )
    return findings


def _pod_state_findings(pending: Iterable[str], unready: Iterable[str]) -> list[str]:
    pending_set = set(pending)
    unready_set = set(unready) - pending_set
    findings = []
    if pending_set:
        findings.append(f"pending pods: {_names(pending_set)}")
    if unready_set:
        findings.append(f"pods not ready: {_names(unready_set)}")
    return findings


def _deployment_findings(evidence: WindowEvidence, times: Sequence[float]) -> list[str]:
    findings = []
    for name in sorted(set(evidence.deployments) | set(evidence.deployment_changes)):
        states = evidence.deployments.get(name, ())
        issues = _rollout_issues(states, times)
        changes = evidence.deployment_changes.get(name, {})
        if not issues and any(changes.values()):
            counted = ", ".join(f"{field} {n}×" for field, n in sorted(changes.items()) if n)
            issues.append(f"replicas or generation changed inside the window ({counted})")
        if issues:
            findings.append(f"deployment {name}: {'; '.join(issues)}")
    return findings


def _rollout_issues(states: Sequence[DeploymentState], times: Sequence[float]) -> list[str]:
    issues: list[str] = []
    specs = _path([s.spec for s in states if s.spec is not None])
    if len(specs) > 1:
        issues.append(f"desired replicas changed {' → '.join(str(s) for s in specs)}")
    checks: list[tuple[Callable[[DeploymentState], bool], Callable[[DeploymentState], str]]] = [
        (
            lambda s: _differ(s.generation, s.observed),
            lambda s: f"generation {s.generation} not yet observed (rollout)",
        ),
        (
            lambda s: _less(s.updated, s.status) or _less(s.updated, s.spec),
            lambda s: f"rollout in progress ({s.updated} of {s.spec} replicas updated)",
        ),
        (
            lambda s: _differ(s.status, s.spec),
            lambda s: f"{s.status} replicas where {s.spec} are desired",
        ),
    ]
    for holds, describe in checks:
        at = next((k for k, s in enumerate(states) if holds(s)), None)
        if at is not None:
            issues.append(f"{describe(states[at])} at {clock_time(times[at])}")
    return issues


# ---------------------------------------------------------------- helpers


def _differ(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and a != b


def _less(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and a < b


def _path(values: Sequence[int]) -> list[int]:
    """The values with consecutive repeats collapsed: 3,3,5,5,3 -> 3,5,3."""
    path: list[int] = []
    for v in values:
        if not path or path[-1] != v:
            path.append(v)
    return path


def _span(times: Sequence[float], flags: Sequence[bool]) -> str:
    """``12:00:01Z to 12:00:05Z``: from the first to the last step where ``flags`` holds."""
    marked = [t for t, flag in zip(times, flags, strict=True) if flag]
    return f"{clock_time(marked[0])} to {clock_time(marked[-1])}"


def _counted_as(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _names(names: Iterable[str]) -> str:
    ordered = sorted(names)
    shown = ", ".join(ordered[:LISTED])
    return shown if len(ordered) <= LISTED else f"{shown} and {len(ordered) - LISTED} more"


def _without_placeholders(cluster: Cluster, keys: Keys) -> Cluster:
    """The cluster without the tuner's placeholder pods (they hold room for an autoscaler to
    fill: their pending and binding is no workload's change)."""
    pods = tuple(p for p in cluster.pods if keys.placeholder not in p.labels)
    return cluster if len(pods) == len(cluster.pods) else replace(cluster, pods=pods)


def _counted(pods: Iterable[Pod]) -> list[Pod]:
    """Pods that count for stability: Job pods come and go by design."""
    return [p for p in pods if p.owner_kind != "Job"]


def _pod_counts(cluster: Cluster) -> Mapping[Workload, int]:
    return Counter(p.workload for p in _counted(cluster.pods))
