"""Run one transition in a separate process, so that a test can SIGKILL it mid-action.

Usage: python -m tests.cluster.transition_child SETTINGS.json NAMESPACE OP ARG [TARGET]
with OP ``migrate POD TARGET``, ``add DEPLOYMENT TARGET`` or ``remove_node NODE``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tuner.execute.actuator import KubeActuator
from tuner.model.cluster import Workload
from tuner.model.resources import Resources
from tuner.monitor.kube import api_client, read_cluster
from tuner.plan.actions import Action, Add, Migrate, RemoveNode
from tuner.settings import load_settings


def main(argv: list[str]) -> int:
    settings = load_settings(Path(argv[0]))
    namespace, op, arg = argv[1], argv[2], argv[3]
    api = api_client(settings.kubernetes)
    action: Action
    if op == "migrate":
        pod = next(p for p in read_cluster(api).pods if p.key == f"{namespace}/{arg}")
        action = Migrate(pod, argv[4])
    elif op == "add":
        action = Add(Workload(namespace, "Deployment", arg), argv[4], Resources(500, 0))
    else:
        action = RemoveNode(arg)
    result = KubeActuator(api, settings).carry_out([action])
    print(result.reason, flush=True)
    return 0 if result.completed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
