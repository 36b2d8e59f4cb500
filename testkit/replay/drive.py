"""What runs every tick of a replay: the load driver and the recorder.

The **driver** turns the scenario's load at the replay's time into each pod's CPU usage, as
the simulator does: a service's CPU demand (``cpu_per_load`` x its namespace's load, plus
``fixed_cpu``), averaged over metrics-server's resolution (:data:`REPORT_LAGS`), is shared by
its Ready pods, and written into each Ready pod's
``kwok.x-k8s.io/usage-cpu`` annotation, which KWOK's resource-usage simulation reports to
metrics-server, from which the real HPA controller reads it. A pod is patched when its share
moved by a whole millicore and by at least :data:`USAGE_STEP` (0.5 %).

Every node gets KWOK's per-node resource-metrics path (:func:`expose_metrics`), which
metrics-server scrapes.

The **recorder** samples what the simulator records per tick (``tuner.sim.metrics.TickSeries``):
billed nodes (every Node, and every Karpenter NodeClaim from its creation: the simulator bills
a node from its request) and their price per hour; pending pods (replayed pods without a node);
workloads whose CPU demand exceeds the requests of their Ready pods (the simulator's "short");
the non-DaemonSet pods' count and requests; pods evicted since the last tick, by actor (the
Eviction API calls in the API server's audit log, told apart by user agent); and, per
HPA-scaled service, the replicas its Deployment is scaled to.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from testkit.replay.objects import (
    METRICS_PATH,
    SERVICE_LABEL,
    USAGE_CPU,
    metrics_path,
    service_key,
)
from tuner.model.quantity import cpu_millis, memory_bytes
from tuner.sim.engine import Scenario
from tuner.sim.metrics import TickSeries
from tuner.sim.workloads import Service

USAGE_STEP = 0.005
"""Relative change of a pod's CPU share below which its annotation is left as it is (any
change of a whole millicore above it is written: a coarser step, 2 %, left frontends at 54 %
of a 50 % target instead of 55 %, inside the HPA's tolerance where the simulator is not)."""
REPORT_LAGS = (0.0, 5.0, 10.0)
"""Seconds before a tick whose demand a pod's usage annotation averages (metrics-server's 15 s
resolution at the replay's 5 s ticks). A kubelet's CPU counter gives metrics-server the average
over a scrape window; KWOK's (v0.8.0 ``pkg/kwok/server/metrics_resource_usage.go``) grows at each
scrape by the annotation's value then times the time since the last, so metrics-server would
read the value at the scrape instead. The annotation carries the window's average, so that the
HPA reads what it reads on a real node, as the simulator models it
(:data:`tuner.sim.hpa.USAGE_LAGS`)."""
KARPENTER = ("karpenter.sh", "v1", "nodeclaims")
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class PodView:
    """What the driver and the recorder read of one replayed pod."""

    namespace: str
    name: str
    service: str
    node: str | None
    ready: bool
    daemon: bool
    cpu: int
    memory: int
    usage: str | None
    unschedulable: str = ""
    """Why kube-scheduler left it pending (its PodScheduled condition's message), if it did."""


def unschedulable(conditions: Iterable[Any]) -> str:
    """The message of a pod's ``PodScheduled=False`` condition with reason ``Unschedulable``
    (e.g. ``0/4 nodes are available: 4 Insufficient cpu.``), "" without one."""
    for c in conditions:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return str(c.message or "")
    return ""


def read_pods(core: client.CoreV1Api) -> list[PodView]:
    """Every live replayed pod (one list call)."""
    out = []
    for pod in core.list_pod_for_all_namespaces(label_selector=SERVICE_LABEL).items:
        meta = pod.metadata
        if meta.deletion_timestamp is not None:
            continue
        conditions = pod.status.conditions or [] if pod.status else []
        requests = [(c.resources.requests or {}) for c in pod.spec.containers if c.resources]
        owners = meta.owner_references or []
        out.append(
            PodView(
                meta.namespace,
                meta.name,
                meta.labels[SERVICE_LABEL],
                pod.spec.node_name,
                any(c.type == "Ready" and c.status == "True" for c in conditions),
                any(o.kind == "DaemonSet" for o in owners),
                sum(cpu_millis(r.get("cpu", "0")) for r in requests),
                sum(memory_bytes(r.get("memory", "0")) for r in requests),
                (meta.annotations or {}).get(USAGE_CPU),
                unschedulable(conditions),
            )
        )
    return out


def expose_metrics(core: client.CoreV1Api, nodes: Iterable[Any]) -> int:
    """Give every node that lacks it the ``metrics.k8s.io/resource-metrics-path`` annotation
    (KWOK's per-node resource-metrics path, which metrics-server then scrapes instead of the
    kubelet's): Karpenter's KWOK provider names its nodes at random, so no template can carry
    it. Returns how many nodes were annotated."""
    done = 0
    for node in nodes:
        name = node.metadata.name
        if METRICS_PATH in (node.metadata.annotations or {}) or node.metadata.deletion_timestamp:
            continue
        body = {"metadata": {"annotations": {METRICS_PATH: metrics_path(name)}}}
        try:
            core.patch_node(name, body)
        except client.ApiException as err:
            if err.status != 404:
                raise
        done += 1
    return done


class LoadDriver:
    """Writes each Ready pod's share of its service's CPU demand at the replay's time."""

    def __init__(self, scenario: Scenario, core: client.CoreV1Api) -> None:
        self.scenario = scenario
        self.core = core
        self.by_key = {service_key(s): s for s in scenario.services}
        self.patches = 0

    def demand(self, service: Service, t: float) -> float:
        """Millicores the service needs at ``t`` (the simulator's demand model)."""
        pattern = self.scenario.loads.get(service.namespace)
        return service.demand(pattern(t)) if pattern is not None else service.fixed_cpu

    def reported(self, service: Service, t: float) -> float:
        """Millicores the service's Ready pods report at ``t`` together: its demand averaged
        over the last metric resolution (:data:`REPORT_LAGS`)."""
        return sum(self.demand(service, t - lag) for lag in REPORT_LAGS) / len(REPORT_LAGS)

    def drive(self, t: float, pods: Iterable[PodView]) -> None:
        """Patch the usage annotation of every Ready pod whose share (of :meth:`reported`)
        moved."""
        ready: dict[str, list[PodView]] = {}
        for pod in pods:
            if pod.ready and pod.service in self.by_key:
                ready.setdefault(pod.service, []).append(pod)
        for key, members in ready.items():
            share = self.reported(self.by_key[key], t) / len(members)
            for pod in members:
                if _moved(pod.usage, share):
                    self._patch(pod, share)

    def _patch(self, pod: PodView, millis: float) -> None:
        body = {"metadata": {"annotations": {USAGE_CPU: f"{max(round(millis), 1)}m"}}}
        try:
            self.core.patch_namespaced_pod(pod.name, pod.namespace, body)
        except client.ApiException as err:
            if err.status != 404:  # a pod deleted since the list is no error
                raise
        self.patches += 1


def _moved(current: str | None, share: float) -> bool:
    if current is None:
        return True
    old = cpu_millis(current)
    new = max(round(share), 1)
    return new != old and abs(new - old) >= USAGE_STEP * old


@dataclass
class AuditTail:
    """Eviction API calls in the API server's audit log since the last read, by actor."""

    path: Path
    offset: int = 0

    def start_here(self) -> None:
        """Ignore what is in the log now."""
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def evictions(self) -> Counter[str]:
        """Successful evictions since the last call, by actor (from the user agent)."""
        found: Counter[str] = Counter()
        if not self.path.exists():
            return found
        with self.path.open("rb") as log:
            log.seek(self.offset)
            data = log.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            if b'"eviction"' not in line:
                continue
            event = json.loads(line)
            ref = event.get("objectRef", {})
            if (
                event.get("stage") == "ResponseComplete"
                and event.get("verb") == "create"
                and ref.get("subresource") == "eviction"
                and event.get("responseStatus", {}).get("code") in (200, 201)
            ):
                found[actor(event.get("userAgent", ""))] += 1
        return found


def actor(user_agent: str) -> str:
    """Who made a request, from its user agent."""
    agent = user_agent.lower()
    for name in ("karpenter", "kube-controller-manager", "descheduler"):
        if agent.startswith(name):
            return name
    if agent.startswith("openapi-generator") or "python" in agent:
        return "tuner"
    return agent.split("/", 1)[0] or "unknown"


@dataclass
class Recording:
    """A replay's samples: the simulator's per-tick series, plus replicas per HPA-scaled
    service and evictions per actor."""

    series: TickSeries = field(default_factory=TickSeries)
    replicas: dict[str, list[int]] = field(default_factory=dict)
    evictions_by_actor: Counter[str] = field(default_factory=Counter)
    pending_reasons: Counter[str] = field(default_factory=Counter)
    """Pending pod-ticks by ``service: the scheduler's message`` (why pods were pending)."""

    def count_pending(self, pods: Iterable[PodView]) -> int:
        """Count the pending pods among ``pods`` by service and reason; how many there are."""
        pending = [p for p in pods if p.node is None]
        self.pending_reasons.update(
            f"{p.service}: {p.unschedulable or 'not scheduled yet'}" for p in pending
        )
        return len(pending)


class Recorder:
    """Samples the cluster once per tick into a :class:`Recording` (times t >= 0 only, as the
    simulator keeps no warm-up samples)."""

    def __init__(
        self,
        scenario: Scenario,
        api: client.ApiClient,
        audit: AuditTail,
        prices: Mapping[str, float],
        karpenter: bool,
    ) -> None:
        self.scenario = scenario
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.audit = audit
        self.prices = prices
        self.karpenter = karpenter
        self.hpa_services = [s for s in scenario.services if s.hpa is not None]
        self.recording = Recording(replicas={service_key(s): [] for s in self.hpa_services})

    def billed(self, nodes: list[Any]) -> list[str]:
        """The instance type of every billed node ("" when not known yet)."""
        types = {n.metadata.name: (n.metadata.labels or {}).get(INSTANCE_TYPE, "") for n in nodes}
        if not self.karpenter:
            return list(types.values())
        claims = self.custom.list_cluster_custom_object(*KARPENTER)["items"]
        owned = set()
        out = []
        for claim in claims:
            node = claim.get("status", {}).get("nodeName")
            owned.add(node)
            labels = claim["metadata"].get("labels", {})
            out.append(labels.get(INSTANCE_TYPE) or types.get(node or "", "") or _only(claim))
        out += [kind for name, kind in types.items() if name not in owned]
        return out

    def replicas(self) -> dict[str, int]:
        """Replicas each HPA-scaled workload is scaled to now."""
        found = {}
        for item in self.apps.list_deployment_for_all_namespaces().items:
            labels = item.spec.selector.match_labels or {}
            if SERVICE_LABEL in labels:
                found[labels[SERVICE_LABEL]] = item.spec.replicas or 0
        return found

    def sample(
        self, t: float, load: float, pods: list[PodView], nodes: list[Any], driver: LoadDriver
    ) -> None:
        """One tick's sample (kept only from t = 0 on; evictions before are dropped)."""
        evicted = self.audit.evictions()
        kinds = self.billed(nodes)
        replicas = self.replicas()
        if t < 0:
            return
        ready: Counter[str] = Counter(p.service for p in pods if p.ready and p.node)
        short = 0
        for service in self.hpa_services:
            key = service_key(service)
            if driver.demand(service, t) > ready[key] * service.cpu:
                short += 1
        workers = [p for p in pods if not p.daemon]
        s = self.recording.series
        s.time.append(t)
        s.load.append(load)
        s.cost.append(sum(self.prices.get(k, 0.0) for k in kinds))
        s.nodes.append(len(kinds))
        s.pending.append(self.recording.count_pending(pods))
        s.short.append(short)
        s.cpu.append(sum(p.cpu for p in workers))
        s.memory.append(sum(p.memory for p in workers))
        s.pods.append(len(workers))
        s.evictions.append(sum(evicted.values()))
        self.recording.evictions_by_actor.update(evicted)
        for key, series in self.recording.replicas.items():
            series.append(replicas.get(key, 0))


def _only(claim: Mapping[str, Any]) -> str:
    """A NodeClaim's instance type before it is labelled: its single allowed value."""
    for req in claim.get("spec", {}).get("requirements", []):
        if req.get("key") == INSTANCE_TYPE and len(req.get("values", [])) == 1:
            return str(req["values"][0])
    return ""
