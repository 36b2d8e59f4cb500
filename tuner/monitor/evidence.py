"""What kube-state-metrics series say about a window: the PromQL probes and the evidence value.

Two kinds of probes look at the checked span (warm-up + window):

- **range probes**, evaluated at every step (:mod:`tuner.monitor.window`), give timelines: which
  nodes existed, how many live pods each workload and each node had, each deployment's replica
  counters;
- **over-the-window probes**, one instant query at the end with ``*_over_time``/``changes()``
  over the whole span, look at *every* scraped sample, so a change that went and came back
  between two steps is still seen: every node and pod that existed at any time, every pod that
  was ever Pending or not Ready (and on which node), every change of a deployment's replicas or
  generation, every node cordoned or uncordoned.

Every probe is grouped by node, workload or pod, so its answer is bounded by the cluster's size.

:func:`evidence_from_series` turns the answers (plain :class:`~tuner.monitor.series.Series`)
into a :class:`WindowEvidence`; :func:`tuner.monitor.stability.assess` judges it. Neither does
I/O, so both are tested with hand-made series.

Pods are grouped by workload as the domain model does (a ReplicaSet owned by a Deployment
counts as the Deployment). Pods of Jobs are left out: they come and go by design. Pods that
finished (Succeeded/Failed) do not count as live.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from tuner.model.cluster import Workload
from tuner.monitor.series import Series
from tuner.monitor.window import Steps

REQUIRED_METRICS = (
    "kube_node_info",
    "kube_pod_info",
    "kube_pod_status_phase",
    "kube_pod_status_ready",
)
"""Without these series (kube-state-metrics not scraped) the monitor falls back to snapshots."""

DEPLOYMENT_FIELDS = {
    "kube_deployment_spec_replicas": "spec",
    "kube_deployment_status_replicas": "status",
    "kube_deployment_status_replicas_updated": "updated",
    "kube_deployment_metadata_generation": "generation",
    "kube_deployment_status_observed_generation": "observed",
}

_FINISHED = 'kube_pod_status_phase{phase=~"Succeeded|Failed"}'
_POD_OWNER = "namespace, pod, created_by_kind, created_by_name"


class Probe(StrEnum):
    """The queries behind the evidence; ``{span}`` is the checked span (``660s``)."""

    PRESENCE = "presence"
    NODES = "nodes"
    PODS = "pods"
    NODE_PODS = "node_pods"
    DEPLOYMENTS = "deployments"
    NODES_SEEN = "nodes_seen"
    PODS_SEEN = "pods_seen"
    PENDING = "pending"
    UNREADY = "unready"
    DEPLOYMENT_CHANGES = "deployment_changes"
    REPLICASET_OWNERS = "replicaset_owners"
    CORDONS = "cordons"

    @property
    def ranged(self) -> bool:
        """True for range queries (one point per step), False for one instant query."""
        return self in (
            Probe.PRESENCE,
            Probe.NODES,
            Probe.PODS,
            Probe.NODE_PODS,
            Probe.DEPLOYMENTS,
        )

    def query(self, span: str, placeholders: str = "") -> str:
        """The PromQL of this probe over a span such as ``660s``, leaving out the pods whose
        name begins with ``placeholders`` (the tuner's own placeholder pods: they hold room for
        an autoscaler to fill, their pending and binding is no workload's change)."""
        alone = f'{{pod!~"{placeholders}.*"}}' if placeholders else ""
        beside = f',pod!~"{placeholders}.*"' if placeholders else ""
        query = _QUERIES[self].replace("{span}", span)
        return query.replace("{pods}", alone).replace("<pods>", beside)


_QUERIES: Mapping[Probe, str] = {
    Probe.PRESENCE: 'count by (__name__) ({__name__=~"' + "|".join(REQUIRED_METRICS) + '"})',
    Probe.NODES: "max by (node) (kube_node_info)",
    Probe.PODS: (
        "count by (namespace, created_by_kind, created_by_name) ("
        f"max by ({_POD_OWNER}) (kube_pod_info{{pods}}) "
        f"unless on (namespace, pod) ({_FINISHED} == 1))"
    ),
    Probe.NODE_PODS: (
        "count by (node) ("
        "max by (namespace, pod, node) (kube_pod_info{pods}) "
        f"unless on (namespace, pod) ({_FINISHED} == 1))"
    ),
    Probe.DEPLOYMENTS: (
        'max by (__name__, namespace, deployment) ({__name__=~"'
        + "|".join(DEPLOYMENT_FIELDS)
        + '"})'
    ),
    Probe.NODES_SEEN: "max by (node) (max_over_time(kube_node_info[{span}]))",
    Probe.PODS_SEEN: (
        f"max by ({_POD_OWNER}, node) (max_over_time(kube_pod_info{{pods}}[{{span}}])) "
        f"unless on (namespace, pod) (min_over_time({_FINISHED}[{{span}}]) == 1)"
    ),
    Probe.PENDING: (
        "max by (namespace, pod) "
        '(max_over_time(kube_pod_status_phase{phase="Pending"<pods>}[{span}])) == 1'
    ),
    Probe.UNREADY: (
        "min by (namespace, pod) "
        '(min_over_time(kube_pod_status_ready{condition="true"<pods>}[{span}])) == 0 '
        f"unless on (namespace, pod) (max_over_time({_FINISHED}[{{span}}]) == 1)"
    ),
    Probe.DEPLOYMENT_CHANGES: (
        "("
        + " or ".join(
            f'label_replace(changes({metric}[{{span}}]), "field", "{name}", "", "")'
            for metric, name in DEPLOYMENT_FIELDS.items()
            if name in ("spec", "status", "generation")
        )
        + ") > 0"
    ),
    Probe.REPLICASET_OWNERS: (
        "max by (namespace, replicaset, owner_kind, owner_name) "
        "(max_over_time(kube_replicaset_owner[{span}]))"
    ),
    Probe.CORDONS: "max by (node) (changes(kube_node_spec_unschedulable[{span}])) > 0",
}


@dataclass(frozen=True, slots=True)
class DeploymentState:
    """A deployment's counters at one step (None: series missing at that step)."""

    spec: int | None = None
    status: int | None = None
    updated: int | None = None
    generation: int | None = None
    observed: int | None = None


def _frozen_map() -> Mapping[str, tuple[bool, ...]]:
    return MappingProxyType({})


@dataclass(frozen=True)
class WindowEvidence:
    """Everything the series say about the checked span, as plain values.

    Timelines have one entry per step of :attr:`steps`.
    """

    steps: Steps
    missing: Mapping[str, tuple[bool, ...]] = field(default_factory=_frozen_map)
    """Required metric -> per step: True where it had no series at all."""
    nodes: Mapping[str, tuple[bool, ...]] = field(default_factory=_frozen_map)
    """Node -> per step: present."""
    nodes_seen: frozenset[str] = frozenset()
    """Nodes with any sample in the span."""
    pod_counts: Mapping[Workload, tuple[int, ...]] = field(default_factory=dict)
    """Workload -> per step: live pods (not finished; Job pods left out)."""
    pods_seen: Mapping[Workload, int] = field(default_factory=dict)
    """Workload -> different pods that lived at any time in the span."""
    node_pods: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Node -> per step: live pods on it (Job pods included: they start and stop on nodes)."""
    node_pods_seen: Mapping[str, int] = field(default_factory=dict)
    """Node -> different pods that lived on it at any time in the span."""
    pod_workloads: Mapping[str, Workload] = field(default_factory=dict)
    """``namespace/pod`` -> its workload, for every pod seen (Job pods left out)."""
    cordons: frozenset[str] = frozenset()
    """Nodes cordoned or uncordoned in the span."""
    pending: frozenset[str] = frozenset()
    """``namespace/pod`` of pods that were Pending at any sample."""
    unready: frozenset[str] = frozenset()
    """``namespace/pod`` of live pods that were not Ready at any sample."""
    deployments: Mapping[str, tuple[DeploymentState, ...]] = field(default_factory=dict)
    """``namespace/name`` -> per step: counters."""
    deployment_changes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """``namespace/name`` -> field (spec, status, generation) -> changes in the span."""

    @property
    def blind(self) -> tuple[bool, ...]:
        """Per step: True where every required metric was missing (e.g. a failed scrape)."""
        columns = list(self.missing.values())
        return tuple(
            bool(columns) and all(column[k] for column in columns) for k in range(self.steps.count)
        )

    @property
    def observed_nodes(self) -> frozenset[str]:
        """Every node the series saw in the span (at a step or at any sample)."""
        return self.nodes_seen | frozenset(self.nodes)

    @property
    def absent(self) -> tuple[str, ...]:
        """Required metrics with no series anywhere in the span (kube-state-metrics missing)."""
        return tuple(name for name, gaps in self.missing.items() if gaps and all(gaps))


def workload_of(
    namespace: str, kind: str, name: str, replicaset_owners: Mapping[tuple[str, str], str]
) -> Workload | None:
    """The workload of a pod created by ``kind/name``; None for Job pods (left out)."""
    if kind == "Job":
        return None
    if kind in ("", "<none>"):
        return Workload(namespace, "Pod", "<none>")
    if kind == "ReplicaSet" and (namespace, name) in replicaset_owners:
        return Workload(namespace, "Deployment", replicaset_owners[(namespace, name)])
    return Workload(namespace, kind, name)


def evidence_from_series(steps: Steps, results: Mapping[Probe, Sequence[Series]]) -> WindowEvidence:
    """Build the evidence from each probe's answer (range probes: one point per step)."""

    def timeline(item: Series) -> list[float | None]:
        """The series' value at each step; None where it had none (or a non-finite one)."""
        values: list[float | None] = [None] * steps.count
        for t, v in item.points:
            k = steps.index(t)
            if k is not None and math.isfinite(v):
                values[k] = v
        return values

    def answer(probe: Probe) -> Sequence[Series]:
        return results.get(probe, ())

    present = {s.label("__name__"): timeline(s) for s in answer(Probe.PRESENCE)}
    missing = {
        name: tuple(v is None or v == 0 for v in present.get(name, [None] * steps.count))
        for name in REQUIRED_METRICS
    }
    nodes = {
        s.label("node"): tuple(v is not None for v in timeline(s))
        for s in answer(Probe.NODES)
        if s.label("node")
    }
    owners = {
        (s.label("namespace"), s.label("replicaset")): s.label("owner_name")
        for s in answer(Probe.REPLICASET_OWNERS)
        if s.label("owner_kind") == "Deployment" and s.label("owner_name")
    }

    counts: dict[Workload, list[int]] = defaultdict(lambda: [0] * steps.count)
    for s in answer(Probe.PODS):
        workload = workload_of(
            s.label("namespace"), s.label("created_by_kind"), s.label("created_by_name"), owners
        )
        if workload is None:
            continue
        per_step = counts[workload]
        for k, v in enumerate(timeline(s)):
            per_step[k] += int(v or 0)

    node_counts = {
        s.label("node"): tuple(int(v or 0) for v in timeline(s))
        for s in answer(Probe.NODE_PODS)
        if s.label("node")
    }

    seen: dict[Workload, set[str]] = defaultdict(set)
    on_node: dict[str, set[str]] = defaultdict(set)
    pod_workloads: dict[str, Workload] = {}
    job_pods: set[str] = set()
    for s in answer(Probe.PODS_SEEN):
        key = f"{s.label('namespace')}/{s.label('pod')}"
        if s.label("node"):
            on_node[s.label("node")].add(key)
        workload = workload_of(
            s.label("namespace"), s.label("created_by_kind"), s.label("created_by_name"), owners
        )
        if workload is None:
            job_pods.add(key)
        else:
            seen[workload].add(key)
            pod_workloads[key] = workload

    def pods(probe: Probe) -> frozenset[str]:
        keys = {f"{s.label('namespace')}/{s.label('pod')}" for s in answer(probe)}
        return frozenset(keys - job_pods)

    states: dict[str, list[dict[str, int]]] = defaultdict(lambda: [{} for _ in range(steps.count)])
    for s in answer(Probe.DEPLOYMENTS):
        name = DEPLOYMENT_FIELDS.get(s.label("__name__"))
        if name is None:
            continue
        fields = states[f"{s.label('namespace')}/{s.label('deployment')}"]
        for k, v in enumerate(timeline(s)):
            if v is not None:
                fields[k][name] = int(v)

    changes: dict[str, dict[str, int]] = defaultdict(dict)
    for s in answer(Probe.DEPLOYMENT_CHANGES):
        if math.isfinite(s.last):
            deployment = f"{s.label('namespace')}/{s.label('deployment')}"
            changes[deployment][s.label("field")] = int(s.last)

    return WindowEvidence(
        steps=steps,
        missing=MappingProxyType(missing),
        nodes=MappingProxyType(nodes),
        nodes_seen=frozenset(s.label("node") for s in answer(Probe.NODES_SEEN) if s.label("node")),
        pod_counts=MappingProxyType({w: tuple(c) for w, c in sorted(counts.items())}),
        pods_seen=MappingProxyType({w: len(p) for w, p in sorted(seen.items())}),
        node_pods=MappingProxyType(dict(sorted(node_counts.items()))),
        node_pods_seen=MappingProxyType({n: len(p) for n, p in sorted(on_node.items())}),
        pod_workloads=MappingProxyType(dict(sorted(pod_workloads.items()))),
        cordons=frozenset(s.label("node") for s in answer(Probe.CORDONS) if s.label("node")),
        pending=pods(Probe.PENDING),
        unready=pods(Probe.UNREADY),
        deployments=MappingProxyType(
            {
                d: tuple(DeploymentState(**fields) for fields in per_step)
                for d, per_step in sorted(states.items())
            }
        ),
        deployment_changes=MappingProxyType(
            {d: MappingProxyType(f) for d, f in sorted(changes.items())}
        ),
    )
