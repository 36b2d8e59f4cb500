"""Turn a desired change into the fewest actions, ordered so that every one fits when it runs.

- Removals and additions of the same workload become migrations. Pods of one workload are
  interchangeable and share their placement rules, so the bipartite graph of (removal,
  addition) pairs is complete per workload: a maximum matching pairs min(|R|, |A|) of them,
  and pairing in a fixed order achieves it without enumerating subsets (the 2019 planner did).
- Order: a migration or addition waits until it fits on its target by every rule of the
  scheduling simulation (:class:`~tuner.model.snapshot.Snapshot`: every rule of
  :mod:`tuner.model.scheduling`, a migrated pod no longer counted on its source); an added
  instance is checked with the constraints and labels of a running pod of its workload; the
  nodes to remove are cordoned from the start, as the executor cordons them; when a rule
  counts other pods (spread, inter-pod affinity), every action may unblock any waiting one;
  when nothing can go, a pending removal that frees a waiting node runs first; when only
  migrations are stuck (two full nodes swapping pods), one of them is split into a removal now
  and an addition later (the temporary remove/add); node removals come last.
- New nodes (:class:`~tuner.model.change.NewNode`) are provisioned first, each asking for what
  the plan places on it; the scheduling simulation knows them from the start, with the
  DaemonSet pods that start on them.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable

from tuner.model.change import Addition, DesiredChange, daemon_pods, started_pod, templates
from tuner.model.cluster import Cluster, Pod, Workload
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, Remove, RemoveNode
from tuner.plan.replay import InfeasiblePlan

Placing = Migrate | Add


def plan(cluster: Cluster, change: DesiredChange) -> tuple[Action, ...]:
    """The ordered actions that carry out ``change``."""
    placings, removals = _pair(change)
    ordered = _Orderer(cluster, change).run(placings, removals)
    return (*_provisions(change), *ordered, *(RemoveNode(n) for n in change.remove_nodes))


def _provisions(change: DesiredChange) -> list[ProvisionNode]:
    """One action per new node, asking for the requests the change places on it."""
    placed: dict[str, list[Resources]] = defaultdict(list)
    for relocation in change.relocations:
        placed[relocation.node].append(relocation.pod.requests)
    for addition in change.additions:
        placed[addition.node].append(addition.requests)
    return [
        ProvisionNode(n.name, n.pool, Resources.total(placed.get(n.name, [])))
        for n in change.new_nodes
    ]


def _pair(change: DesiredChange) -> tuple[list[Placing], list[Remove]]:
    """Migrations (relocations, and removal/addition pairs of a workload), adds, removes."""
    placings: list[Placing] = [
        Migrate(r.pod, r.node) for r in change.relocations if r.node != r.pod.node
    ]
    removed: dict[Workload, list[Pod]] = defaultdict(list)
    for pod in sorted(change.removals, key=lambda p: (p.node or "", p.name)):
        removed[pod.workload].append(pod)
    added: dict[Workload, list[Addition]] = defaultdict(list)
    for addition in sorted(change.additions, key=lambda a: a.node):
        added[addition.workload].append(addition)
    removes: list[Remove] = []
    for workload in sorted(set(removed) | set(added)):
        pods, adds = _net(removed.get(workload, []), added.get(workload, []))
        pairs = min(len(pods), len(adds))
        placings += [Migrate(pod, a.node) for pod, a in zip(pods, adds, strict=False)]
        placings += [Add(a.workload, a.node, a.requests) for a in adds[pairs:]]
        removes += [Remove(pod) for pod in pods[pairs:]]
    return placings, removes


def _net(pods: list[Pod], adds: list[Addition]) -> tuple[list[Pod], list[Addition]]:
    """Drop a removal and an addition of the same workload on the same node: nothing to do."""
    remaining = list(adds)
    kept: list[Pod] = []
    for pod in pods:
        same = next((a for a in remaining if a.node == pod.node), None)
        if same is None:
            kept.append(pod)
        else:
            remaining.remove(same)
    return kept, remaining


class _Orderer:
    """Event-driven ordering: actions wait per target node and retry when room frees there."""

    def __init__(self, cluster: Cluster, change: DesiredChange) -> None:
        self.cluster = cluster
        self.templates: dict[Workload, Pod] | None = None
        """What an added instance of each workload looks like (made when first asked)."""
        self.snapshot = Snapshot(cluster, new_nodes=[n.node for n in change.new_nodes])
        for new in change.new_nodes:
            for daemon in daemon_pods(cluster, new.node):  # they start there as it joins
                self.snapshot.place(daemon, new.name)
        for name in change.remove_nodes:
            self.snapshot.close(name)
        self.waiting: dict[str, deque[Placing]] = defaultdict(deque)
        self.out: list[Action] = []
        self.freed: deque[str] = deque()

    def run(self, placings: Iterable[Placing], removals: list[Remove]) -> list[Action]:
        for action in placings:
            self._offer(action)
        pending = deque(removals)
        self._drain()
        while any(self.waiting.values()):
            useful = next((r for r in pending if self.waiting.get(r.pod.node or "")), None)
            if useful is not None:
                pending.remove(useful)
                self._remove(useful)
            elif not self._split_a_migration():
                if not pending:
                    stuck = next(a for q in self.waiting.values() for a in q)
                    raise InfeasiblePlan(f"nothing frees room for {stuck}")
                self._remove(pending.popleft())
            self._drain()
        for removal in pending:
            self._remove(removal)
        return self.out

    def _offer(self, action: Placing) -> None:
        if not self._try(action):
            self.waiting[action.target].append(action)

    def _try(self, action: Placing) -> bool:
        snapshot = self.snapshot
        target = action.target
        if isinstance(action, Migrate):
            pod, source = action.pod, action.source
            if snapshot.why_not(pod, target, leaving=source) is not None:
                return False
            snapshot.move(pod, source, target)
            self.freed.append(action.source)
        else:
            pod = self._instance(action)
            if snapshot.why_not(pod, target) is not None:
                return False
            snapshot.place(pod, target)
        if snapshot.counting:
            # a pod counted by another's spread or affinity may unblock any node
            self.freed.extend(node for node, queue in self.waiting.items() if queue)
        self.out.append(action)
        return True

    def _instance(self, add: Add) -> Pod:
        """The pod an addition starts."""
        if self.templates is None:
            self.templates = templates(self.cluster)
        workload = add.workload
        like = self.templates.get(workload)
        return started_pod(workload, add.target, add.requests, like, f"+{workload.name}")

    def _remove(self, removal: Remove) -> None:
        pod = removal.pod
        self.snapshot.unplace(pod, pod.node or "")
        self.out.append(removal)
        self.freed.append(pod.node or "")
        if self.snapshot.counting:
            self.freed.extend(node for node, queue in self.waiting.items() if queue)

    def _drain(self) -> None:
        """Retry waiting actions on every node that got room, until nothing changes."""
        while self.freed:
            node = self.freed.popleft()
            queue = self.waiting.get(node)
            if not queue:
                continue
            for _ in range(len(queue)):
                action = queue.popleft()
                if not self._try(action):
                    queue.append(action)

    def _split_a_migration(self) -> bool:
        """Break a deadlock: remove a waiting migration's pod now, add its replacement later."""
        candidates = [a for q in self.waiting.values() for a in q if isinstance(a, Migrate)]
        if not candidates:
            return False
        blocking = next((m for m in candidates if self.waiting.get(m.source)), candidates[0])
        self.waiting[blocking.target].remove(blocking)
        self._remove(Remove(blocking.pod))
        self.waiting[blocking.target].append(
            Add(blocking.pod.workload, blocking.target, blocking.pod.requests)
        )
        return True
