"""Run one transition in a separate process, so that a test can SIGKILL it mid-action.

Usage: python -m tests.cluster.transition_child SETTINGS.json NAMESPACE OP ARG [TARGET]
with OP ``migrate POD TARGET``, ``add DEPLOYMENT TARGET``, ``remove_node NODE``, ``empty NODE
TARGET`` (migrate the namespace's pods on NODE to TARGET, then remove NODE: the node is drained
before the first migration) or ``provision POOL`` (a node of the pool labelled
``cloud.google.com/gke-nodepool=POOL``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType

from tuner.cycle import TransitionResult
from tuner.execute.actuator import KubeActuator
from tuner.model.cluster import Node, Workload
from tuner.model.pools import POOL_LABELS, NodePool
from tuner.model.resources import Resources
from tuner.monitor.kube import api_client, read_cluster
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, RemoveNode
from tuner.settings import load_settings


def pool(name: str) -> NodePool:
    """A pool of KWOK nodes (4 CPU, 8 GiB) selected by the GKE node-pool label."""
    labels = MappingProxyType({POOL_LABELS[0]: name})
    size = Resources(4000, 8 << 30)
    return NodePool(name, "kwok-4", Node("", size, size, labels=labels), selector=labels)


def main(argv: list[str]) -> int:
    settings = load_settings(Path(argv[0]))
    namespace, op, arg = argv[1], argv[2], argv[3]
    api = api_client(settings.kubernetes)
    action: Action
    if op == "empty":
        on = [p for p in read_cluster(api).pods if p.namespace == namespace and p.node == arg]
        pods = sorted(on, key=lambda p: p.name)
        plan: list[Action] = [*(Migrate(p, argv[4]) for p in pods), RemoveNode(arg)]
        return _report(KubeActuator(api, settings).carry_out(plan))
    if op == "migrate":
        pod = next(p for p in read_cluster(api).pods if p.key == f"{namespace}/{arg}")
        action = Migrate(pod, argv[4])
    elif op == "add":
        action = Add(Workload(namespace, "Deployment", arg), argv[4], Resources(500, 0))
    elif op == "provision":
        action = ProvisionNode(f"{arg}+1", pool(arg), Resources(500, 256 << 20))
    else:
        action = RemoveNode(arg)
    return _report(KubeActuator(api, settings).carry_out([action]))


def _report(result: TransitionResult) -> int:
    print(result.reason, flush=True)
    return 0 if result.completed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
