"""The simulated cluster's side of the executor's port (:class:`tuner.sim.executor.Controls`):
the Kubernetes API calls the real executor makes, and what the cluster's controllers do in
answer; also what a strategy does to the cluster directly (evict a pod, take a node back)."""

from __future__ import annotations

from collections.abc import Callable

from tuner.model.cluster import Workload
from tuner.model.constraints import Constraints
from tuner.model.resources import Resources
from tuner.sim.clock import Clock
from tuner.sim.controllers import Controllers
from tuner.sim.state import SimPod
from tuner.sim.turns import Turns, Wait
from tuner.sim.window_tracking import WindowTracker
from tuner.sim.workloads import Service

REREGISTER_DELAY = 60.0
"""Seconds until the kubelet of a node whose Node object was deleted registers it again (its VM
still runs: what the 2019 thesis saw on GKE after ``kubectl delete node``)."""


class ClusterControls:
    """The executor's and the strategies' hands on one simulated cluster."""

    def __init__(
        self,
        clock: Clock,
        controllers: Controllers,
        tracker: WindowTracker,
        turns: Turns,
        pass_tick: Callable[[], None],
    ) -> None:
        self.clock = clock
        self.controllers = controllers
        self.state = controllers.state
        self.tracker = tracker
        self.turns = turns
        self._pass_tick = pass_tick
        """Closes the tick and runs the next one's controllers (for a driver between ticks)."""
        self.by_workload = {s.workload: s for s in controllers.scenario.services}
        self._placeholders = 0

    def pod_named(self, name: str) -> SimPod | None:
        """The pod called ``name``, bound or pending; None when it is gone."""
        uid = self.state.by_name.get(name)
        return None if uid is None else self.state.pods[uid]

    def service_of(self, workload: Workload) -> Service | None:
        """The simulated workload, or None."""
        return self.by_workload.get(workload)

    def node_ready(self, name: str) -> bool:
        """True when the node exists, is registered and is ready."""
        node = self.state.nodes.get(name)
        return node is not None and node.ready(self.clock.now)

    def node_names(self) -> tuple[str, ...]:
        """Every node that exists, booting ones included."""
        return tuple(sorted(self.state.nodes))

    def label_node(self, name: str, key: str, value: str | None) -> None:
        """Set a node label (remove it with None)."""
        labels = self.state.nodes[name].labels
        if value is None:
            del labels[key]
        else:
            labels[key] = value
        self.state.changed()

    def cordon(self, name: str) -> bool:
        """Cordon a node for a move (the real executor also taints it; no simulated pod
        tolerates the taint but not the cordon); whether this cordoned it (False: it was
        cordoned already, or is gone)."""
        node = self.state.nodes.get(name)
        if node is None or node.unschedulable:
            return False
        node.unschedulable = True
        self.state.changed()
        return True

    def uncordon(self, name: str) -> None:
        """Undo :meth:`cordon` (nothing when the node is gone)."""
        node = self.state.nodes.get(name)
        if node is not None:
            node.unschedulable = False
            self.state.changed()

    def scale(self, service: Service, delta: int) -> None:
        """Change the workload's replicas (never below 0); its ReplicaSet follows."""
        replicas = self.controllers.replicas
        replicas[service] = max(replicas[service] + delta, 0)

    def evict(self, pod: SimPod) -> None:
        """Evict a pod (any actor: the Cluster Autoscaler's drain, the tuner's executor, a
        descheduler, Karpenter): it is deleted, its ReplicaSet re-creates it, and it counts
        in the evictions per hour."""
        self.state.evict(pod)

    def delete_pod(self, pod: SimPod) -> None:
        """Delete a pod (after a scale-down that chose it)."""
        self.state.delete_pod(pod)

    def desired(self, service: Service) -> int:
        """The workload's desired replicas (its ReplicaSet's spec)."""
        return self.controllers.replicas[service]

    def utilisation(self, service: Service) -> float | None:
        """The average CPU utilisation (a share of requests) the workload's HPA last measured
        (its status); None without an HPA or a measurement."""
        hpa = self.controllers.hpas.get(service)
        return None if hpa is None or hpa.utilization is None else hpa.utilization / 100

    def start_replica(self, service: Service) -> SimPod:
        """The ReplicaSet creates one pod and kube-scheduler binds it now: the new pod (its
        ``node`` None: pending)."""
        state, now = self.state, self.clock.now
        pod = state.create_pod(service, now)
        chosen = self.controllers.scheduler.choose(state, pod, now)
        if chosen is not None:
            state.bind(pod, chosen, now)
        return pod

    def start_surge(self, pod: SimPod) -> SimPod:
        """Restart the rollout of the pod's one-replica Deployment: its new ReplicaSet creates
        one pod, which kube-scheduler binds now and the old ReplicaSet does not count (the old
        pod stays until :meth:`end_surge`); the new pod (its ``node`` None: pending)."""
        new = self.start_replica(pod.service)
        self.state.surges[pod.service] = new.uid
        return new

    def end_surge(self, old: SimPod, new: SimPod, keep: bool) -> None:
        """A surge move's end. ``keep`` (its new pod Ready): the Deployment controller scales
        the old ReplicaSet to 0, which deletes the old pod (counted in the evictions per hour,
        a pod disrupted), and the new pod is the workload's. Else the executor reverts the
        rollout: the new pod is deleted, the old one stays. Nothing when the new pod is gone
        (the old one stays)."""
        state = self.state
        if state.pods.get(new.uid) is not new:
            return
        if not keep:
            state.delete_pod(new)
            return
        del state.surges[new.service]
        if state.pods.get(old.uid) is old:
            state.evict(old)

    def pod_ready(self, pod: SimPod) -> bool:
        """True when the pod still exists, is bound and Ready (its start-up is over)."""
        return self.state.pods.get(pod.uid) is pod and self.controllers.ready(pod)

    def create_placeholder(self, requests: Resources, constraints: Constraints) -> SimPod:
        """Create a bare pending pod with these requests and constraints (the placeholder a
        provision makes the Cluster Autoscaler add a node for)."""
        self._placeholders += 1
        service = Service(
            f"placeholder-{self._placeholders}", requests.cpu, requests.memory, kind="Pod"
        )
        return self.state.create_pod(service, self.clock.now, constraints)

    def pass_time(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``done()`` or ``timeout`` seconds of simulated time; whether ``done()``
        came true. Within the strategy's turn the turn is suspended and the simulation's own
        loop runs the ticks (:mod:`tuner.sim.turns`); a driver between ticks (``tuner demo``'s
        moderator, a test) waits while the simulation runs tick by tick, every controller but
        no strategy."""
        deadline = self.clock.now + timeout
        wait = Wait(done, deadline)
        over = wait.over(self.clock.now)
        if over is not None:
            return over
        waited = self.turns.wait(done, deadline)
        if waited is not None:
            return waited
        while over is None:
            self._pass_tick()
            over = wait.over(self.clock.now)
        return over

    def drain_node(self, name: str, node_removal: str) -> None:
        """Cordon the node and evict its pods but DaemonSet pods; then ``autoscaler`` leaves the
        empty node to the Cluster Autoscaler, ``command`` deletes the VM now, ``delete-node``
        deletes the Node object only (the VM keeps running and registers again after
        :data:`REREGISTER_DELAY`). The controllers and the scheduler then catch up."""
        state, controllers = self.state, self.controllers
        node = state.nodes[name]
        node.unschedulable = True
        state.touched_nodes.add(name)
        if node_removal == "autoscaler":
            self.tracker.handed_over.add(name)
        state.changed()
        for pod in state.pods_on(node):
            if not pod.daemon:
                self.evict(pod)  # its ReplicaSet re-creates it elsewhere
        if node_removal == "command":
            state.delete_node(name)
            controllers.with_daemons.discard(name)
        elif node_removal == "delete-node":
            for pod in state.pods_on(node):
                state.delete_pod(pod)
            node.registered = False
            node.unschedulable = False
            controllers.with_daemons.discard(name)
            self.clock.schedule(self.clock.now + REREGISTER_DELAY, lambda: self._register(name))
        controllers.reconcile()
        controllers.scheduler.schedule(state, self.clock.now)

    def _register(self, name: str) -> None:
        """The kubelet of a running VM registers its Node object again."""
        node = self.state.nodes.get(name)
        if node is not None:
            node.registered = True
            self.state.changed()

    def take_back(self, name: str) -> None:
        """Uncordon a node left to the autoscaler (the tuner takes it back); the scheduler then
        binds pending pods to it."""
        state = self.state
        state.nodes[name].unschedulable = False
        self.tracker.handed_over.discard(name)
        state.touched_nodes.add(name)
        state.changed()
        self.controllers.scheduler.schedule(state, self.clock.now)
