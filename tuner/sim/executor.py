"""The simulated executor: actions carried out as the real one does (docs/operating.md), verified.

- migrate: label the target node ``tuner.dev/<namespace>.<name>``, evict the pod, let the
  ReplicaSet's replacement be scheduled (its weight-100 preferred affinity to the label), verify
  it landed on the target, remove the label;
- add: label, one replica more, verify, unlabel;
- remove: one replica fewer, that very pod deleted;
- remove_node: cordon and evict what is left, then by ``execute.node_removal``: ``autoscaler``
  leaves the empty node to the Cluster Autoscaler, ``command`` deletes the VM now,
  ``delete-node`` deletes the Node object only (the VM keeps running and registers again).

A pod that lands elsewhere (or nowhere) fails verification; the caller stops the transition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode
from tuner.sim.metrics import ActionResult
from tuner.sim.state import SimPod, affinity_label
from tuner.sim.workloads import Service

if TYPE_CHECKING:
    from tuner.sim.engine import Simulation

REREGISTER_DELAY = 60.0
"""Seconds until the kubelet of a node whose Node object was deleted registers it again (its VM
still runs: what the 2019 thesis saw on GKE after ``kubectl delete node``)."""


class SimulatedExecutor:
    """Executes actions on a simulation's cluster."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def execute(self, action: Action, node_removal: str) -> ActionResult:
        """Carry out one action and verify it."""
        state = self.sim.cluster_state
        match action:
            case Migrate(pod=pod, target=target):
                sim_pod = self._find(pod.name, pod.node)
                if sim_pod is None:
                    return ActionResult(action, False, f"pod {pod.key} is gone")
                state.delete_pod(sim_pod)
                return self._steer(action, sim_pod.service, target)
            case Add(workload=workload, target=target):
                added = self.sim.by_workload.get(workload)
                if added is None:
                    return ActionResult(action, False, f"unknown workload {workload}")
                self.sim.replicas[added] += 1
                return self._steer(action, added, target)
            case Remove(pod=pod):
                sim_pod = self._find(pod.name, pod.node)
                if sim_pod is None:
                    return ActionResult(action, False, f"pod {pod.key} is gone")
                self.sim.replicas[sim_pod.service] = max(self.sim.replicas[sim_pod.service] - 1, 0)
                state.delete_pod(sim_pod)
                return ActionResult(action, True)
            case RemoveNode(node=name):
                return self._remove_node(action, name, node_removal)
        raise TypeError(action)

    def _find(self, name: str, node: str | None) -> SimPod | None:
        uid = self.sim.cluster_state.by_name.get(name)
        if uid is None:
            return None
        pod = self.sim.cluster_state.pods[uid]
        return pod if pod.node == node and node is not None else None

    def _steer(self, action: Action, service: Service, target: str) -> ActionResult:
        """Label the target, let the scheduler place the new pod, verify, unlabel."""
        state = self.sim.cluster_state
        node = state.nodes.get(target)
        if node is None or not node.ready(self.sim.now):
            return ActionResult(action, False, f"node {target} is not there")
        label = affinity_label(service)
        node.labels[label] = "true"
        try:
            pod = state.create_pod(service, self.sim.now)
            chosen = self.sim.scheduler.choose(state, pod, self.sim.now)
            if chosen is not None:
                state.bind(pod, chosen, self.sim.now)
        finally:
            del node.labels[label]
            state.changed()
        if chosen is not node:
            where = chosen.name if chosen else "nowhere (pending)"
            return ActionResult(action, False, f"landed on {where}, not {target}")
        return ActionResult(action, True)

    def _remove_node(self, action: Action, name: str, mode: str) -> ActionResult:
        state = self.sim.cluster_state
        node = state.nodes.get(name)
        if node is None or not node.ready(self.sim.now):
            return ActionResult(action, False, f"node {name} is not there")
        node.unschedulable = True
        state.changed()
        for pod in state.pods_on(node):
            if not pod.daemon:
                state.delete_pod(pod)  # evicted; its ReplicaSet re-creates it elsewhere
        if mode == "command":
            state.delete_node(name)
            self.sim.with_daemons.discard(name)
        elif mode == "delete-node":
            for pod in state.pods_on(node):
                state.delete_pod(pod)
            node.registered = False
            node.unschedulable = False
            self.sim.with_daemons.discard(name)
            self.sim.reregister.append((self.sim.now + REREGISTER_DELAY, name))
        self.sim.reconcile()
        self.sim.scheduler.schedule(state, self.sim.now)
        return ActionResult(action, True)
