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
  before it is Ready leaves nothing to move: done), then remove the label and the cordon;
- surge move (``execute.surge_lone_pods``, a one-replica Deployment's pod, its rollout surging:
  :func:`tuner.plan.rollout.surges_first`): a migrate whose new pod starts beside the old one,
  which goes once the new one is Ready (an eviction); a new pod that fails is deleted (the
  rollout reverted), the old one stays;
- a wave (:mod:`tuner.plan.waves`: consecutive migrations, each workload's within its
  allowance, none onto a node another leaves, at most ``execute.max_moves_at_once``): each
  member's new pod started (the old one evicted or surged) and checked as above, one after the
  other in the same instant, then time passes until every new pod is Ready (a member that fails
  starts no further one; those started are still awaited); so a workload never has more of its
  pods starting at once than its rollout, its PDB and its other pods' spare room allow;
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
from tuner.plan.rollout import surges_first
from tuner.plan.waves import spare, unavailable_allowed, wave
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

    def desired(self, service: Service) -> int:
        """The workload's desired replicas (its ReplicaSet's spec)."""

    def utilisation(self, service: Service) -> float | None:
        """The average CPU utilisation (a share of requests) the workload's HPA last measured
        (its status); None without an HPA or a measurement."""

    def start_replica(self, service: Service) -> SimPod:
        """The ReplicaSet creates one pod and kube-scheduler binds it now: the new pod (its
        ``node`` None: pending)."""

    def start_surge(self, pod: SimPod) -> SimPod:
        """Restart the pod's Deployment's rollout: a new pod as :meth:`start_replica`'s, which
        the old pod's ReplicaSet does not count (the old pod stays)."""

    def end_surge(self, old: SimPod, new: SimPod, keep: bool) -> None:
        """The rollout's end: ``keep`` (the new pod Ready), the old pod goes (an eviction);
        else it is reverted, the new pod goes; nothing when the new pod is gone."""

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


Started = tuple[SimPod, SimPod | None]
"""A wave member's new pod, and the old pod a surge keeps meanwhile (None: evicted)."""


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
        max_moves_at_once: int = Execute.max_moves_at_once,
        surge_lone_pods: bool = Execute.surge_lone_pods,
    ) -> tuple[ActionResult, ...]:
        """Carry out the actions in order, each verified (a new pod Ready within
        :attr:`verify_timeout_s`), a wave of migrations at once (:mod:`tuner.plan.waves`, at
        most ``max_moves_at_once``), a lone pod surged with ``surge_lone_pods``, the nodes the
        plan empties cordoned before its first move and given back when it stops short of
        removing them; the first failed verification stops the rest (not returned; a wave's
        other members finish). ``on_target_only``: the 2019 tuner's executor (no drain ahead,
        one action at a time, a pod evicted, verified on its target only, not waited for)."""
        cluster = self.cluster
        nodes = () if on_target_only else emptied(actions)
        draining = None if on_target_only else frozenset(nodes)
        first = first_move(actions)
        results: list[ActionResult] = []
        bindings: dict[str, str] = {}
        marked: list[str] = []
        index = 0
        try:
            while index < len(actions):
                if index == first:
                    marked = [n for n in nodes if cluster.cordon(n)]
                rest = [resolved(a, bindings) for a in actions[index:]]
                if draining is not None and isinstance(rest[0], Migrate):
                    size = wave(rest, self._allowance, max_moves_at_once)
                    moves = [a for a in rest[:size] if isinstance(a, Migrate)]
                    done = self._together(moves, draining, surge_lone_pods)
                else:
                    done = [
                        self._one(rest[0], node_removal, provision_timeout_s, bindings, draining)
                    ]
                results += done
                index += len(done)
                if not all(r.verified for r in done):
                    break
                if isinstance(rest[0], RemoveNode) and rest[0].node in marked:
                    marked.remove(rest[0].node)  # handed over
        finally:
            for name in marked:
                cluster.uncordon(name)
        return tuple(results)

    def _allowance(self, workload: Workload) -> int:
        """Pods of a workload a wave may move at once: its rollout's default 25 % of its desired
        replicas (the simulator models no rollout strategy), no more than its PDB's
        ``maxUnavailable`` nor than its other pods can stand in for at its HPA's last measured
        utilisation (:func:`~tuner.plan.waves.spare`), at least one."""
        cluster = self.cluster
        service = cluster.service_of(workload)
        if service is None:
            return 1
        replicas = cluster.desired(service)
        limits = (
            unavailable_allowed(None, replicas),
            service.pdb_max_unavailable,
            spare(replicas, cluster.utilisation(service)),
        )
        return max(1, min(limit for limit in limits if limit is not None))

    def _one(
        self,
        action: Action,
        node_removal: str,
        provision_timeout_s: float,
        bindings: MutableMapping[str, str],
        draining: frozenset[str] | None,
    ) -> ActionResult:
        """Carry out one action that is not a wave's (a migration only for the 2019 tuner's
        executor) and verify it; a provision records its node in ``bindings``. ``draining``:
        the nodes the transition empties, where no new pod may land (None: a new pod must land
        on its target, the 2019 tuner's verification)."""
        cluster = self.cluster
        match action:
            case ProvisionNode():
                return self._provision(action, provision_timeout_s, bindings)
            case Migrate(pod=pod, target=target):  # the 2019 tuner's: verified on its target
                sim_pod = cluster.pod_named(pod.name)
                if sim_pod is None:  # deleted since the plan (its HPA scaled it in)
                    return ActionResult(action, True, f"pod {pod.key} is already gone")
                if sim_pod.node != pod.node:
                    return ActionResult(action, False, f"pod {pod.key} is not on {pod.node}")
                cordoned = cluster.cordon(action.source)  # for the move, as the daemon does
                cluster.evict(sim_pod)
                try:
                    return self._steer(action, sim_pod.service, target, None)
                finally:
                    if cordoned:
                        cluster.uncordon(action.source)
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

    def _together(
        self, moves: Sequence[Migrate], draining: frozenset[str], surge: bool
    ) -> list[ActionResult]:
        """A wave (one migration or more): start each member in turn (:meth:`_start`; a failure
        starts no further one), wait until every new pod is Ready or gone (:meth:`_verdict`),
        end the surges; undo the labels and cordons."""
        cluster = self.cluster
        results: list[ActionResult] = []
        started: dict[int, Started] = {}
        labels: dict[tuple[str, str], None] = {}
        cordoned: list[str] = []
        try:
            for move in moves:
                result, pods = self._start(move, draining, labels, cordoned, surge)
                results.append(result)
                if not result.verified:
                    break
                if pods is not None:
                    started[len(results) - 1] = pods
            self._settled(tuple(new for new, _ in started.values()))
            for index, (new, old) in started.items():
                results[index] = self._verdict(moves[index], new, results[index])
                if old is not None:
                    cluster.end_surge(old, new, results[index].verified)
        finally:
            for target, label in labels:
                cluster.label_node(target, label, None)
            for name in cordoned:
                cluster.uncordon(name)
        return results

    def _start(
        self,
        move: Migrate,
        draining: frozenset[str],
        labels: dict[tuple[str, str], None],
        cordoned: list[str],
        surge: bool,
    ) -> tuple[ActionResult, Started | None]:
        """Label one member's target, cordon its source (unless it is already), evict its pod or
        surge it (with ``surge``, a lone pod's: :meth:`_surges`) and let the scheduler place the
        new pod: where it landed (verified off its source and ``draining``), the new pod and the
        old one a surge keeps (None when the pod is gone since the plan: nothing to move, done)."""
        cluster, pod, target = self.cluster, move.pod, move.target
        sim_pod = cluster.pod_named(pod.name)
        if sim_pod is None:  # deleted since the plan (its HPA scaled it in)
            return ActionResult(move, True, f"pod {pod.key} is already gone"), None
        if sim_pod.node != pod.node:
            return ActionResult(move, False, f"pod {pod.key} is not on {pod.node}"), None
        if not cluster.node_ready(target):
            return ActionResult(move, False, f"node {target} is not there"), None
        label = (target, affinity_label(sim_pod.service))
        if label not in labels:
            cluster.label_node(*label, "true")
            labels[label] = None
        if cluster.cordon(move.source):
            cordoned.append(move.source)
        old = sim_pod if surge and self._surges(sim_pod.service) else None
        if old is None:
            cluster.evict(sim_pod)
            new = cluster.start_replica(sim_pod.service)
        else:
            new = cluster.start_surge(old)
        landed = self._landing(move, new.node, target, draining, move.source)
        if old is not None and not landed.verified:
            cluster.end_surge(old, new, False)
        return landed, (new, old)

    def _surges(self, service: Service) -> bool:
        """A move of its pod surges: a one-replica Deployment (rolled out by default, unpaused)."""
        desired = self.cluster.desired(service)
        return service.kind == "Deployment" and surges_first(None, None, None, desired, False)

    def _steer(
        self, action: Action, service: Service, target: str, draining: frozenset[str] | None
    ) -> ActionResult:
        """Label the target, let the scheduler place a new pod, verify it is off ``draining``
        (None: on the target, the 2019 tuner's executor, which does not wait) and wait until it
        is Ready, unlabel."""
        cluster = self.cluster
        if not cluster.node_ready(target):
            return ActionResult(action, False, f"node {target} is not there")
        label = affinity_label(service)
        cluster.label_node(target, label, "true")
        try:
            pod = cluster.start_replica(service)
            result = self._landing(action, pod.node, target, draining, None)
            if result.verified and draining is not None:
                self._settled((pod,))
                result = self._verdict(action, pod, result)
        finally:
            cluster.label_node(target, label, None)
        return result

    def _settled(self, pods: Sequence[SimPod]) -> None:
        """Let simulated time pass until every pod is Ready or gone, or the verification
        timeout."""
        cluster = self.cluster
        if pods:
            gone = cluster.pod_named
            cluster.pass_time(
                lambda: all(cluster.pod_ready(p) or gone(p.name) is None for p in pods),
                self.verify_timeout_s,
            )

    def _verdict(self, action: Action, pod: SimPod, landed: ActionResult) -> ActionResult:
        """Once :meth:`_settled`: verified as ``landed`` says when the new pod is Ready; verified
        too when it went before (its HPA scaled the workload in and the ReplicaSet deleted the
        unready pod first: nothing is left to move, as for a migrate whose pod went since the
        plan); failed when neither."""
        cluster = self.cluster
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
