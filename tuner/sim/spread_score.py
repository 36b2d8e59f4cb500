"""kube-scheduler's PodTopologySpread score (its ``ScheduleAnyway`` side), as the simulated
scheduler weighs it (weight 2 in the default profile).

A pod without topology spread constraints of its own gets the plugin's **system default
constraints** when a Service, ReplicaSet, ReplicationController or StatefulSet selects it:
``kubernetes.io/hostname`` maxSkew 3 and ``topology.kubernetes.io/zone`` maxSkew 5, both
``ScheduleAnyway``, over the pods that selector matches (Kubernetes docs, "Pod Topology Spread
Constraints", *Internal default constraints*; kube-scheduler's
``pkg/scheduler/framework/plugins/podtopologyspread/plugin.go``, ``systemDefaultConstraints``).
A pod with constraints of its own is scored by its ``ScheduleAnyway`` ones only. A simulated
workload's pods are one ReplicaSet's (or StatefulSet's), so the pods counted are its
service's; a DaemonSet's pods and the tuner's placeholders have no such selector (no Service
selects them here): the plugin skips them.

The score (``scoring.go``, v1.33): for each constraint, the domains are the values of its key
on the feasible nodes; a node's raw score is, summed over the constraints whose key it carries,
``matching pods in its domain * log(domains + 2) + (maxSkew - 1)``, rounded (hostname: the
pods on the node, one domain per feasible node; zone: the pods in the zone, counted on every
node the pod's required node affinity selects). With the system defaults a node without a
zone label is scored by its hostname alone; with the pod's own constraints a node missing one
of their keys is ignored (scores 0). Normalised: ``100 * (max + min - raw) // max`` over the
scored nodes (100 for all when every raw score is 0): the fewer matching pods, the higher.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from tuner.model.constraints import HOSTNAME_KEY, ZONE_KEY
from tuner.model.scheduling import affinity_fit
from tuner.sim.state import SimCluster, SimNode, SimPod

SYSTEM_DEFAULT = ((HOSTNAME_KEY, 3), (ZONE_KEY, 5))
"""(topology key, maxSkew) of the plugin's system default constraints, ``ScheduleAnyway``."""
SELECTED_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet"})
"""Workloads whose pods a ReplicaSet's or StatefulSet's selector matches."""
MAX_SCORE = 100


def spread_scores(cluster: SimCluster, pod: SimPod, nodes: Sequence[SimNode]) -> list[int]:
    """The plugin's normalised score (0-100) of each feasible node for ``pod``; all 0 when
    the plugin skips the pod (no constraint to score)."""
    constraints = _constraints(pod)
    if not constraints:
        return [0] * len(nodes)
    require_all = bool(pod.constraints.spread)
    keys = [key for key, _ in constraints]
    scored = [n for n in nodes if not require_all or all(k in n.labels for k in keys)]
    pods = cluster.pods
    per_node: Counter[str] = Counter(
        where for uid in cluster.by_service.get(pod.service, ()) if (where := pods[uid].node)
    )
    weights: dict[str, float] = {}
    per_domain: dict[str, Counter[str]] = {}
    for key, _ in constraints:
        if key == HOSTNAME_KEY:
            weights[key] = math.log(len(scored) + 2)
            continue
        domains = {n.labels.get(key, "") for n in scored}
        weights[key] = math.log(len(domains) + 2)
        counts: Counter[str] = Counter()
        for name, count in per_node.items():
            node = cluster.nodes.get(name)
            if node is None or not affinity_fit(pod.constraints, node.labels):
                continue
            if require_all and not all(k in node.labels for k in keys):
                continue
            value = node.labels.get(key, "")
            if value in domains:
                counts[value] += count
        per_domain[key] = counts
    raw: dict[str, int] = {}
    for node in scored:
        total = 0.0
        for key, skew in constraints:
            domain = node.labels.get(key)
            if domain is None:
                continue
            count = per_node[node.name] if key == HOSTNAME_KEY else per_domain[key][domain]
            total += count * weights[key] + (skew - 1)
        raw[node.name] = math.floor(total + 0.5)  # Go's math.Round on a positive score
    if not raw:
        return [0] * len(nodes)
    low, high = min(raw.values()), max(raw.values())
    return [
        0
        if n.name not in raw
        else MAX_SCORE
        if high == 0
        else MAX_SCORE * (high + low - raw[n.name]) // high
        for n in nodes
    ]


def _constraints(pod: SimPod) -> tuple[tuple[str, int], ...]:
    """(topology key, maxSkew) of the constraints the plugin scores for ``pod``."""
    if pod.placeholder or pod.service.kind not in SELECTED_KINDS:
        return ()
    own = pod.constraints.spread
    if not own:
        return SYSTEM_DEFAULT
    return tuple((s.topology_key, s.max_skew) for s in own if not s.hard)
