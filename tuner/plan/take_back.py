"""Take back a node handed to the autoscaler when pods pend that it could hold.

With ``execute.node_removal: autoscaler`` an emptied node stays cordoned, Ready and billed until
the autoscaler deletes it (the Cluster Autoscaler after its 10-minute unneeded time). When the
load rises in that time, its pods go Pending and the autoscaler buys a new node while the idle
one waits for deletion. :func:`needed_back` names the handed-over nodes whose cordon, undone,
lets pending pods run at once: each pending pod (largest first) goes to the first chosen node it
fits on, else to the handed-over node with the most free CPU it fits on; a fit is the model's
static rules, resources, pod slots and its census (extended resources, host ports, inter-pod
affinity and anti-affinity, hard topology spread) over the whole cluster with the pending pods
already sent there: the scheduler's filters, which is what decides whether they would run.
Only a workload's pods count: a pod that follows its node (DaemonSet) or that ``ignore`` names
(the tuner's own placeholder, which asks for a *new* node) does not. A node an autoscaler has
started deleting (:data:`~tuner.model.movability.DELETING_TAINTS`) is not taken back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tuner.model.census import Census
from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.constraints import CORDON_TAINT_KEY
from tuner.model.movability import DELETING_TAINTS
from tuner.model.resources import Resources
from tuner.model.scheduling import resource_fit, static_fit


def needed_back(
    cluster: Cluster, handed: Iterable[str], ignore: Callable[[Pod], bool] = lambda _pod: False
) -> tuple[str, ...]:
    """The handed-over nodes (names in ``handed``) that pending pods would run on, sorted."""
    names = set(handed)
    nodes = [n for n in cluster.nodes if n.name in names and not deleting(n.taints)]
    pending = [p for p in cluster.pods if p.node is None and not p.follows_node and not ignore(p)]
    if not nodes or not pending:
        return ()
    free = {n.name: n.allocatable - cluster.requested(n.name) for n in nodes}
    open_nodes = [uncordoned(n) for n in nodes]
    census = Census(
        {**cluster.node_by_name, **{n.name: n for n in open_nodes}},
        cluster.pods_by_node,
        lambda: cluster.label_counts,
    )
    chosen: list[str] = []
    for pod in sorted(pending, key=lambda p: (-p.requests.cpu, -p.requests.memory, p.key)):
        fits = [n for n in open_nodes if _fits(pod, n, free[n.name], census)]
        if not fits:
            continue
        taken = [n for n in fits if n.name in chosen]
        target = (taken or sorted(fits, key=lambda n: (-free[n.name].cpu, n.name)))[0]
        if target.name not in chosen:
            chosen.append(target.name)
        free[target.name] = free[target.name] - pod.requests
        census.add(target.name, pod)
    return tuple(sorted(chosen))


def uncordoned(node: Node) -> Node:
    """The node as its uncordon leaves it: schedulable, without the taint the node controller
    mirrors the cordon in."""
    taints = tuple(t for t in node.taints if t.key != CORDON_TAINT_KEY)
    return replace(node, unschedulable=False, taints=taints)


def deleting(taints: Iterable[Any]) -> bool:
    """Whether the taints (model or API objects) say an autoscaler has started deleting the
    node."""
    return any(t.key in DELETING_TAINTS for t in taints)


def _fits(pod: Pod, node: Node, free: Resources, census: Census) -> bool:
    """Whether the pod fits on the node with ``free`` left, among the pods ``census`` holds."""
    return (
        static_fit(pod.constraints, node) is None
        and resource_fit(pod.requests, free, node.max_pods - len(census.residents[node.name]))
        is None
        and census.why_not(pod, node.name) is None
    )
