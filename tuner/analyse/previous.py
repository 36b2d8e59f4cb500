"""Return to the cheapest previous deployment that served the same load (thesis §3.2.3).

Previous nodes are matched to current nodes of the same shape by content with an assignment
algorithm (scipy's ``linear_sum_assignment``) instead of the thesis' factorial recursion.
Score of current node i standing for previous node j: per workload, matching pods count
``weight`` (100 for pods the tuner may not move, 1 otherwise) and mismatches subtract one per
pod; a current node mapped to nothing loses all its pods. Relative to "mapped to nothing"
that is ``sum_w (weight_w + 2) * min(c_iw, p_jw) - sum_w p_jw``, and the last term is the
same for every assignment, so the matrix holds only the first.

A shape the cluster has too few nodes of is obtained from a node pool of that instance type
that can grow by the difference (the previous nodes left unmatched become new nodes of it);
without such a pool the deployment is unattainable.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tuner.analyse.context import Context
from tuner.analyse.options import Choice, Forget, Proposal, Refusal
from tuner.model.change import Addition, DesiredChange, NewNode, started_pod, templates
from tuner.model.cluster import Cluster, Node, Pod, Workload
from tuner.model.execution import Execution, NodeState, WorkloadType
from tuner.model.movability import MOVABLE_OWNERS, Movability
from tuner.model.pools import NodePool, Pools
from tuner.model.price import node_price
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot
from tuner.settings import Pricing

UNMOVABLE_WEIGHT = 100
KEEP_BONUS = 10**9
"""Added to the scores of a current node that cannot be removed, so it is matched if possible."""


class PreviousDeployment:
    """The previous-deployment option: return to the cheapest attainable knowledge-base entry
    for this load; the entries found unattainable are forgotten, the chosen one is held until
    it proves stable again. It never wins a tie."""

    name = Choice.PREVIOUS
    announce = "return to the cheapest previous deployment: "

    def propose(self, context: Context) -> Proposal:
        """The previous-deployment proposal among the context's history."""
        result = find_previous(
            context.cluster,
            context.movability,
            context.settings.pricing,
            context.history,
            context.current,
            context.pools,
            context.snapshot,
        )
        forget = tuple(Forget(entry, "unattainable", why) for entry, why in result.unattainable)
        if result.execution is None or result.change is None:
            refusal = (
                Refusal.UNATTAINABLE
                if result.unattainable
                else Refusal.NOT_NOW
                if result.not_now
                else Refusal.NONE_KNOWN
            )
            return Proposal(self.name, result.cost, DesiredChange(), result.reason, refusal, forget)
        return Proposal(
            self.name,
            result.cost,
            result.change,
            result.reason,
            forget=forget,
            holds=result.execution.id,
        )

    def wins_tie(self, mine: Proposal, incumbent: Proposal) -> bool:
        """Never: staying or removing costs no more."""
        return False


@dataclass(frozen=True)
class PreviousResult:
    """The cheapest attainable previous deployment, and the entries found unattainable."""

    execution: Execution | None
    change: DesiredChange | None
    cost: float
    reason: str
    unattainable: tuple[tuple[str, str], ...] = ()
    """(execution id, why) of entries that can no longer be reached: the caller deletes them."""
    not_now: int = 0
    """Cheaper entries blocked only by nodes or workloads that changed during the window: kept."""


class Unattainable(Exception):
    """The previous deployment cannot be reached from the current one."""


def find_previous(
    cluster: Cluster,
    movability: Movability,
    pricing: Pricing,
    history: Sequence[Execution],
    current_cost: float,
    pools: Pools | None = None,
    snapshot: Snapshot | None = None,
) -> PreviousResult:
    """The cheapest entry of ``history`` (already in the load band) that can be reached;
    missing nodes come from ``pools`` that can grow (none given: nothing is provisioned).
    ``snapshot``: the cycle's, of ``cluster`` (None: one is made), forked per entry."""
    snapshot = snapshot or Snapshot(cluster)
    unattainable: list[tuple[str, str]] = []
    not_now = 0
    for execution in sorted(history, key=lambda e: e.rank):
        if execution.cost >= current_cost:
            break
        try:
            change, cost = _transition(snapshot, movability, pricing, execution, pools)
        except Unattainable as why:
            if _attainable_later(snapshot, movability.later, pricing, execution, pools):
                not_now += 1
            else:
                unattainable.append((execution.id, str(why)))
            continue
        return PreviousResult(
            execution,
            change,
            cost,
            f"deployment {execution.id} served load {execution.load:g} at {cost:.4f}/h",
            tuple(unattainable),
            not_now,
        )
    reasons = []
    if unattainable:
        reasons.append(f"{len(unattainable)} cheaper deployment(s) for this load are unattainable")
    if not_now:
        reasons.append(
            f"{not_now} cheaper deployment(s) not now: they touch nodes or workloads that "
            "changed during the window"
        )
    reason = "; ".join(reasons) or Refusal.NONE_KNOWN.value
    return PreviousResult(None, None, math.inf, reason, tuple(unattainable), not_now)


def _attainable_later(
    snapshot: Snapshot,
    later: Movability | None,
    pricing: Pricing,
    execution: Execution,
    pools: Pools | None,
) -> bool:
    """True when only the window's unsettled nodes and workloads block the transition."""
    if later is None:
        return False
    try:
        _transition(snapshot, later, pricing, execution, pools)
    except Unattainable:
        return False
    return True


def _counts(pods: Sequence[Pod]) -> Counter[Workload]:
    return Counter(p.workload for p in pods if not p.follows_node)


def _transition(
    snapshot: Snapshot,
    movability: Movability,
    pricing: Pricing,
    execution: Execution,
    pools: Pools | None,
) -> tuple[DesiredChange, float]:
    """The change that turns the snapshot's cluster into the execution's deployment, and its
    cost (the snapshot is left as it was)."""
    cluster = snapshot.cluster
    types = {w.workload: w for w in execution.workloads}
    current_types = _current_types(cluster, movability)
    weights = {
        name: 1 if (t.movable and current_types.get(name, t).movable) else UNMOVABLE_WEIGHT
        for name, t in {**types, **current_types}.items()
    }
    matches, new_nodes = _match(cluster, movability, execution, weights, pools)
    kept = {node.name for node, _ in matches}
    removals: list[Pod] = []
    additions: list[Addition] = []
    remove_nodes = [n.name for n in cluster.nodes if n.name not in kept]
    with snapshot.forked():
        snapshot.add_nodes(n.node for n in new_nodes)
        for name in remove_nodes:
            reason = movability.node_reasons.get(name)
            if reason:
                raise Unattainable(f"node {name} would have to go but {reason}")
            leaving = [p for p in cluster.pods_by_node[name] if not p.follows_node]
            snapshot.close(name)  # cordoned before the first pod moves, as the planner does
            for pod in leaving:
                snapshot.unplace(pod, name)
            removals += leaving
        adding: list[tuple[Node, list[Addition]]] = []
        for node, state in matches:
            removed, added = _node_change(snapshot, movability, node, state, current_types)
            removals += removed
            additions += added
            adding.append((node, added))
        like = templates(cluster)
        for node, added in adding:
            _place(snapshot, node, added, like)
    _keep_hpa_replicas(cluster, removals, additions)
    # summed in the cluster's node order: a float sum over a set would change with the hash seed
    cost = sum(node_price(n, pricing) for n in cluster.nodes if n.name in kept)
    cost += sum(node_price(n.node, pricing) for n in new_nodes)
    change = DesiredChange(
        removals=tuple(removals),
        additions=tuple(additions),
        remove_nodes=tuple(remove_nodes),
        new_nodes=new_nodes,
    )
    return change, cost


def _keep_hpa_replicas(
    cluster: Cluster, removals: Sequence[Pod], additions: Sequence[Addition]
) -> None:
    """An HPA owns its workload's replica count: a transition may move its pods, not change
    how many there are (the HPA would undo it at its next sync)."""
    net = Counter(a.workload for a in additions)
    net.subtract(p.workload for p in removals)
    for workload in sorted(cluster.hpa_targets):
        if net[workload]:
            raise Unattainable(
                f"it changes the replica count of {workload} ({net[workload]:+d}), "
                "which an HPA owns"
            )


def _current_types(cluster: Cluster, movability: Movability) -> dict[Workload, WorkloadType]:
    """Workload types running now."""
    types: dict[Workload, WorkloadType] = {}
    for pod in cluster.pods:
        if pod.follows_node or pod.node is None:
            continue
        name = pod.workload
        movable = (
            movability.movable(pod) and types.get(name, WorkloadType(name, 0, 0, True)).movable
        )
        types[name] = WorkloadType(name, pod.requests.cpu, pod.requests.memory, movable)
    return types


def _match(
    cluster: Cluster,
    movability: Movability,
    execution: Execution,
    weights: Mapping[Workload, int],
    pools: Pools | None,
) -> tuple[list[tuple[Node, NodeState]], tuple[NewNode, ...]]:
    """Pairs (node, previous node) of the best assignment within each shape, and the new
    nodes among them (previous nodes no current node of their shape is left for)."""
    from scipy.optimize import linear_sum_assignment  # ~1 s to import; only matching needs it

    current_by_shape: dict[tuple[str, int, int], list[Node]] = defaultdict(list)
    for node in cluster.nodes:
        current_by_shape[node.shape].append(node)
    previous_by_shape: dict[tuple[str, int, int], list[NodeState]] = defaultdict(list)
    for state in execution.nodes:
        previous_by_shape[state.shape].append(state)
    pairs: list[tuple[Node, NodeState]] = []
    new_nodes: list[NewNode] = []
    grown: Counter[str] = Counter()
    for shape, states in previous_by_shape.items():
        nodes = current_by_shape.get(shape, [])
        scores = _scores(cluster, movability, nodes, states, weights)
        rows, cols = linear_sum_assignment(scores, maximize=True)
        pairs += [(nodes[r], states[c]) for r, c in zip(rows, cols, strict=True)]
        missing = sorted(set(range(len(states))) - set(cols.tolist()))
        if not missing:
            continue
        pool = _growable_pool(pools, shape, len(missing), grown)
        if pool is None:
            raise Unattainable(
                f"needs {len(states)} node(s) of type {shape[0] or '?'} "
                f"({shape[1]}m, {shape[2]}B), the cluster has {len(nodes)} "
                "and no node pool of that type can grow by the difference"
            )
        for c in missing:
            grown[pool.name] += 1
            new = NewNode(f"{pool.name}+{grown[pool.name]}", pool)
            new_nodes.append(new)
            pairs.append((new.node, states[c]))
    return pairs, tuple(new_nodes)


def _growable_pool(
    pools: Pools | None, shape: tuple[str, int, int], count: int, grown: Counter[str]
) -> NodePool | None:
    """A pool whose nodes have the previous nodes' instance type (their shape when the type
    is unknown) and that can grow by ``count`` more nodes than ``grown`` already took."""
    for pool in pools.by_name.values() if pools else ():
        if (pool.node_type or pool.template.shape) != (shape[0] or shape):
            continue
        room = pools.room(pool.name) if pools else 0
        if room is None or room - grown[pool.name] >= count:
            return pool
    return None


def _scores(
    cluster: Cluster,
    movability: Movability,
    nodes: list[Node],
    states: list[NodeState],
    weights: Mapping[Workload, int],
) -> np.ndarray:
    """Score matrix (current nodes x previous nodes), built sparsely per workload."""
    scores = np.zeros((len(nodes), len(states)))
    current: dict[Workload, dict[int, int]] = defaultdict(dict)
    for i, node in enumerate(nodes):
        for name, count in _counts(cluster.pods_by_node[node.name]).items():
            current[name][i] = count
        if node.name in movability.node_reasons:
            scores[i, :] += KEEP_BONUS
    previous: dict[Workload, dict[int, int]] = defaultdict(dict)
    for j, state in enumerate(states):
        for name, count in state.pods:
            previous[name][j] = count
    for name, rows in current.items():
        cols = previous.get(name)
        if not cols:
            continue
        r = np.fromiter(rows.keys(), dtype=np.int64)
        c = np.fromiter(cols.keys(), dtype=np.int64)
        mins = np.minimum(
            np.fromiter(rows.values(), dtype=np.int64)[:, None],
            np.fromiter(cols.values(), dtype=np.int64)[None, :],
        )
        scores[np.ix_(r, c)] += (weights.get(name, 1) + 2) * mins
    return scores


def _node_change(
    snapshot: Snapshot,
    movability: Movability,
    node: Node,
    state: NodeState,
    current_types: dict[Workload, WorkloadType],
) -> tuple[list[Pod], list[Addition]]:
    """Pods to remove from and instances to add to ``node`` so it runs what ``state`` ran.

    The removals are made in ``snapshot``; :func:`_place` adds the instances once every node's
    removals are made (a moved pod leaves before its replacement is scheduled).
    """
    pods = [p for p in snapshot.cluster.pods_by_node.get(node.name, ()) if not p.follows_node]
    have = _counts(pods)
    want = dict(state.pods)
    removals: list[Pod] = []
    additions: list[Addition] = []
    for name in sorted(set(have) | set(want), key=str):
        diff = want.get(name, 0) - have.get(name, 0)
        if diff < 0:
            movable = sorted(
                (p for p in pods if p.workload == name and movability.movable(p)),
                key=lambda p: p.name,
            )
            if len(movable) < -diff:
                raise Unattainable(f"{-diff} pod(s) of {name} on {node.name} cannot be moved")
            removals += movable[:-diff]
        elif diff > 0:
            additions += [_addition(node, name, current_types) for _ in range(diff)]
    if additions and node.name in movability.closed:
        raise Unattainable(f"{node.name} would receive pods but changed during the window")
    for pod in removals:
        snapshot.unplace(pod, node.name)
    return removals, additions


def _place(
    snapshot: Snapshot, node: Node, additions: list[Addition], like: Mapping[Workload, Pod]
) -> None:
    """Add the instances to ``node`` in ``snapshot``; each must fit by every rule (the
    constraints and labels of a pod of its workload, today's requests)."""
    for addition in additions:
        workload = addition.workload
        instance = started_pod(
            workload, node.name, addition.requests, like.get(workload), f"+{workload.name}"
        )
        why = snapshot.why_not(instance, node.name)
        if why is not None:
            raise Unattainable(f"{workload} cannot run on {node.name}: {why}")
        snapshot.place(instance, node.name)


def _addition(
    node: Node, workload: Workload, current_types: dict[Workload, WorkloadType]
) -> Addition:
    current = current_types.get(workload)
    if workload.kind not in MOVABLE_OWNERS or current is None or not current.movable:
        raise Unattainable(
            f"cannot add an instance of {workload}: not a movable workload running now"
        )
    return Addition(workload, node.name, Resources(current.cpu, current.memory))
