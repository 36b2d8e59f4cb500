"""The simulated executor: actions carried out as the real one does (docs/operating.md), verified.

- before the plan's first action that moves, adds or removes a pod (after its provisions): cordon
  (and taint) every node its ``remove_node`` actions empty; when the transition stops before a
  node's ``remove_node``, give it back (:mod:`tuner.execute.drain`);
- migrate: label the target node ``tuner.dev/<namespace>.<name>`` and cordon the pod's source
  (unless it is cordoned already), evict the pod, let the ReplicaSet's replacement be scheduled
  (its weight-100 preferred affinity to the label: a score the scheduler's others can outweigh,
  hence the cordon), verify it is on a node that is neither its source nor one the transition
  empties (on another than the target: verified, landed elsewhere), let simulated time pass
  until it is Ready (or ``execute.verify_timeout_s``), as the real executor waits for the
  replacement to be Ready before its next action (a replacement the workload's HPA scales in
  before it is Ready leaves nothing to move: done), then remove the label and the cordon (so a
  transition never has more than one moved pod starting at once, and a workload's replacement
  serves before the next of its pods goes);
- add: label, one replica more, verify the same way (off the nodes being emptied, Ready), unlabel;
- remove: one replica fewer, that very pod deleted;
- remove_node: cordon and evict what is left, then by ``execute.node_removal``: ``autoscaler``
  leaves the empty node to the Cluster Autoscaler, ``command`` deletes the VM now,
  ``delete-node`` deletes the Node object only (the VM keeps running and registers again);
- provision_node (``execute.node_provision: autoscaler``): create a placeholder pod (pending,
  the action's requests capped to the pool template's allocatable, the pool's node selector,
  tolerations of its taints, a required affinity that keeps it off every node that exists now;
  lowest priority, never preempting: the simulator does not preempt anyway), let simulated time
  pass while the Cluster Autoscaler grows the pool and the node boots, until the placeholder is
  bound to a Ready node (or ``provision_timeout_s``), delete it, and bind the provisional name
  to that node.

A new pod that stays pending, lands on its source or a node the transition empties, or is not
Ready within the verification timeout, fails verification, and the transition stops. A migrate
whose pod is gone (its HPA scaled it in since the plan, e.g. while a provision waited for its
node), or whose replacement went before it was Ready (its HPA scaled the workload in meanwhile,
and the ReplicaSet deletes an unready pod first), has nothing to move: done, and the transition
goes on (the room the pod held only makes later actions fit the more), as in the real executor
(:class:`tuner.execute.step.Gone`, :func:`tuner.execute.checks.new_pod_on`); so has a
remove_node whose node is gone (the Cluster Autoscaler removed it while the transition moved
its pods). The 2019 tuner's executor (``on_target_only``) drains nothing ahead and fails every
pod that lands off its target, as its code did, and starts its next action without waiting for
the pod to be Ready.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Protocol

from tuner.model.cluster import Workload
from tuner.model.constraints import Constraints, Requirement, Toleration
from tuner.model.pools import NodePool
from tuner.model.resources import Resources
from tuner.plan.actions import (
    Action,
    Add,
    Migrate,
    ProvisionNode,
    Remove,
    RemoveNode,
    emptied,
    first_move,
    resolved,
)
from tuner.settings import Execute
from tuner.sim.metrics import ActionResult
from tuner.sim.state import HOSTNAME, SimPod, affinity_label
from tuner.sim.workloads import Service


class Controls(Protocol):
    """What the executor may do to a simulated cluster: the Kubernetes API calls the real
    executor makes, and what the cluster's controllers do in answer (implemented by
    :class:`tuner.sim.controls.ClusterControls`; the executor never touches the simulation's
    state)."""

    def pod_named(self, name: str) -> SimPod | None:
        """The pod called ``name``, bound or pending; None when it is gone."""

    def service_of(self, workload: Workload) -> Service | None:
        """The simulated workload, or None."""

    def node_ready(self, name: str) -> bool:
        """True when the node exists, is registered and is ready."""

    def label_node(self, name: str, key: str, value: str | None) -> None:
        """Set a node label (remove it with None)."""

    def cordon(self, name: str) -> bool:
        """Cordon (and taint) a node for a move; whether this cordoned it (False: it was
        cordoned already, or is gone)."""

    def uncordon(self, name: str) -> None:
        """Undo :meth:`cordon`."""

    def scale(self, service: Service, delta: int) -> None:
        """Change the workload's replicas through its scale subresource (never below 0)."""

    def evict(self, pod: SimPod) -> None:
        """Evict a pod (its ReplicaSet re-creates it)."""

    def delete_pod(self, pod: SimPod) -> None:
        """Delete a pod (after a scale-down that chose it)."""

    def start_replica(self, service: Service) -> SimPod:
        """The ReplicaSet creates one pod and kube-scheduler binds it now: the new pod (its
        ``node`` None: pending)."""

    def pod_ready(self, pod: SimPod) -> bool:
        """True when the pod still exists, is bound and Ready (its start-up is over)."""

    def drain_node(self, name: str, node_removal: str) -> None:
        """Cordon the node, evict its pods but DaemonSet pods, and remove it as
        ``execute.node_removal`` says; the controllers and the scheduler then catch up."""

    def node_names(self) -> tuple[str, ...]:
        """Every node that exists, booting ones included."""

    def create_placeholder(self, requests: Resources, constraints: Constraints) -> SimPod:
        """Create a bare pending pod with these requests and constraints."""

    def pass_time(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait (simulated time passes, the cluster's controllers run) until ``done()`` or
        ``timeout`` seconds; whether ``done()`` came true."""


def placeholder_constraints(pool: NodePool, avoid: tuple[str, ...] = ()) -> Constraints:
    """Where a placeholder pod asking ``pool`` for room may run: the pool's node selector and
    tolerations of its template's taints; with ``avoid``, a required affinity that keeps it off
    those nodes (a provision's: only a new node satisfies it)."""
    affinity = ((Requirement(HOSTNAME, "NotIn", avoid),),) if avoid else ()
    return Constraints(
        tolerations=tuple(
            Toleration(t.key, "Equal", t.value, t.effect) for t in pool.template.taints
        ),
        node_selector=tuple(sorted(pool.selector.items())),
        node_affinity=affinity,
    )


class SimulatedExecutor:
    """Executes actions through a simulated cluster's :class:`Controls`."""

    def __init__(
        self, cluster: Controls, verify_timeout_s: float = Execute.verify_timeout_s
    ) -> None:
        self.cluster = cluster
        self.verify_timeout_s = verify_timeout_s
        """Seconds a new pod may take to be Ready (``execute.verify_timeout_s``)."""

    def run(
        self,
        actions: Sequence[Action],
        node_removal: str,
        provision_timeout_s: float,
        *,
        on_target_only: bool = False,
    ) -> tuple[ActionResult, ...]:
        """Carry out the actions in order, each verified (a new pod Ready within
        :attr:`verify_timeout_s`), the nodes the plan empties cordoned before its first move and
        given back when it stops short of removing them; the first failed verification stops the
        rest (not returned). ``on_target_only``: the 2019 tuner's executor (no drain ahead, a pod
        verified on its target only, not waited for)."""
        cluster = self.cluster
        nodes = () if on_target_only else emptied(actions)
        first = first_move(actions)
        results: list[ActionResult] = []
        bindings: dict[str, str] = {}
        marked: list[str] = []
        try:
            for index, action in enumerate(actions):
                if index == first:
                    marked = [n for n in nodes if cluster.cordon(n)]
                live = resolved(action, bindings)
                avoid = None if on_target_only else frozenset(nodes)
                result = self.execute(live, node_removal, provision_timeout_s, bindings, avoid)
                results.append(result)
                if not result.verified:
                    break
                if isinstance(live, RemoveNode) and live.node in marked:
                    marked.remove(live.node)  # handed over
        finally:
            for name in marked:
                cluster.uncordon(name)
        return tuple(results)

    def execute(
        self,
        action: Action,
        node_removal: str,
        provision_timeout_s: float,
        bindings: MutableMapping[str, str],
        draining: frozenset[str] | None = frozenset(),
    ) -> ActionResult:
        """Carry out one action and verify it; a provision records its node in ``bindings``.
        ``draining``: the nodes the transition empties, where no new pod may land (None: a new
        pod must land on its target, the 2019 tuner's verification)."""
        cluster = self.cluster
        match action:
            case ProvisionNode():
                return self._provision(action, provision_timeout_s, bindings)
            case Migrate(pod=pod, target=target):
                sim_pod = cluster.pod_named(pod.name)
                if sim_pod is None:  # deleted since the plan (its HPA scaled it in)
                    return ActionResult(action, True, f"pod {pod.key} is already gone")
                if sim_pod.node != pod.node:
                    return ActionResult(action, False, f"pod {pod.key} is not on {pod.node}")
                cluster.evict(sim_pod)
                return self._steer(action, sim_pod.service, target, draining, source=pod.node)
            case Add(workload=workload, target=target):
                added = cluster.service_of(workload)
                if added is None:
                    return ActionResult(action, False, f"unknown workload {workload}")
                cluster.scale(added, +1)
                return self._steer(action, added, target, draining)
            case Remove(pod=pod):
                sim_pod = cluster.pod_named(pod.name)
                if sim_pod is None or sim_pod.node != pod.node:
                    return ActionResult(action, False, f"pod {pod.key} is not on {pod.node}")
                cluster.scale(sim_pod.service, -1)
                cluster.delete_pod(sim_pod)
                return ActionResult(action, True)
            case RemoveNode(node=name):
                if name not in cluster.node_names():  # deleted since the plan (an autoscaler)
                    return ActionResult(action, True, f"node {name} is already gone")
                if not cluster.node_ready(name):
                    return ActionResult(action, False, f"node {name} is not there")
                cluster.drain_node(name, node_removal)
                return ActionResult(action, True)
        raise TypeError(action)

    def _provision(
        self, action: ProvisionNode, timeout: float, bindings: MutableMapping[str, str]
    ) -> ActionResult:
        """Placeholder, wait for the autoscaler's new node, delete the placeholder, bind."""
        cluster, pool = self.cluster, action.pool
        constraints = placeholder_constraints(pool, avoid=cluster.node_names())
        pod = cluster.create_placeholder(action.placeholder_requests, constraints)
        landed = cluster.pass_time(
            lambda: pod.node is not None and cluster.node_ready(pod.node), timeout
        )
        node = pod.node
        cluster.delete_pod(pod)
        if not landed or node is None:
            return ActionResult(
                action, False, f"no new Ready node of pool {pool.name} within {timeout:g} s"
            )
        bindings[action.node] = node
        return ActionResult(action, True)

    def _steer(
        self,
        action: Action,
        service: Service,
        target: str,
        draining: frozenset[str] | None,
        source: str | None = None,
    ) -> ActionResult:
        """Label the target and cordon the ``source`` (a migration's, unless cordoned already),
        let the scheduler place the new pod, verify it is off its source and off ``draining``
        (None: on the target, the 2019 tuner's executor, which does not wait) and wait until it
        is Ready, undo both."""
        cluster = self.cluster
        if not cluster.node_ready(target):
            return ActionResult(action, False, f"node {target} is not there")
        label = affinity_label(service)
        cluster.label_node(target, label, "true")
        cordoned = source if source is not None and cluster.cordon(source) else None
        try:
            pod = cluster.start_replica(service)
            result = self._landing(action, pod.node, target, draining, source)
            if result.verified and draining is not None:
                result = self._ready(action, pod, result)
        finally:
            cluster.label_node(target, label, None)
            if cordoned is not None:
                cluster.uncordon(cordoned)
        return result

    def _ready(self, action: Action, pod: SimPod, landed: ActionResult) -> ActionResult:
        """Wait until the new pod is Ready: verified as ``landed`` says; verified too when it
        went before (its HPA scaled the workload in and the ReplicaSet deleted the unready pod
        first: nothing is left to move, as for a migrate whose pod went since the plan); failed
        when neither within the timeout."""
        cluster = self.cluster
        cluster.pass_time(
            lambda: cluster.pod_ready(pod) or cluster.pod_named(pod.name) is None,
            self.verify_timeout_s,
        )
        if cluster.pod_named(pod.name) is None:
            return ActionResult(action, True, f"{pod.name} went before it was Ready")
        if not cluster.pod_ready(pod):
            return ActionResult(action, False, f"{pod.name} not Ready on {pod.node} in time")
        return landed

    @staticmethod
    def _landing(
        action: Action,
        landed: str | None,
        target: str,
        draining: frozenset[str] | None,
        source: str | None,
    ) -> ActionResult:
        """Where the new pod landed, verified: on the target, or (unless ``draining`` is None)
        elsewhere off its source and off ``draining``."""
        if landed == target:
            return ActionResult(action, True)
        if landed is None:
            return ActionResult(action, False, f"landed nowhere (pending), not on {target}")
        if draining is None:
            return ActionResult(action, False, f"landed on {landed}, not {target}")
        if landed == source or landed in draining:
            what = "its source" if landed == source else "a node this transition empties"
            return ActionResult(action, False, f"landed on {landed}, {what}")
        return ActionResult(action, True, f"landed on {landed}, not {target}", elsewhere=True)
