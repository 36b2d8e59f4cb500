"""Exact answers for small clusters, to check the node-removal heuristic against.

Two mixed-integer programs solved with HiGHS through ``scipy.optimize.milp``:

- :func:`can_drain`: can this one node's movable pods be re-placed on the other nodes, the
  other nodes' movable pods free to move among them (the per-node question the heuristic's
  bin-packing answers, with its make-room moves);
- :func:`cheapest_nodes`: the cheapest set of nodes that can hold everything if every movable pod
  may be re-placed anywhere (a lower bound for any removal plan).

Fit rules used: CPU, memory, pod slots and static fit (taints, selectors, node affinity).
Anti-affinity is not modelled here, so instances used for comparison must not use it.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from tuner.model.cluster import Cluster, Pod
from tuner.model.movability import Movability
from tuner.model.price import node_price
from tuner.model.scheduling import static_fit
from tuner.settings import Pricing


def _solve(
    cost: np.ndarray, rows: list[tuple[dict[int, float], float, float]], integral: np.ndarray
) -> np.ndarray | None:
    matrix = lil_matrix((len(rows), cost.size))
    low = np.empty(len(rows))
    high = np.empty(len(rows))
    for r, (coefficients, lo, hi) in enumerate(rows):
        for column, value in coefficients.items():
            matrix[r, column] = value
        low[r], high[r] = lo, hi
    result = milp(
        cost,
        constraints=LinearConstraint(matrix.tocsr(), low, high),
        integrality=integral,
        bounds=Bounds(0, 1),
        options={"time_limit": 60},
    )
    return result.x if result.status == 0 else None


def can_drain(cluster: Cluster, movability: Movability, node_name: str) -> bool:
    """True when the node's pods (all movable) fit on the other nodes, the other nodes' movable
    pods free to move among them too (the heuristic moves at most one of them per pod it
    places, to make room; any answer it finds is one of these)."""
    drained = [p for p in cluster.pods_by_node[node_name] if not p.follows_node]
    if any(not movability.movable(p) for p in drained):
        return False
    if not drained:
        return True
    pods = [p for p in cluster.pods if p.node and not p.follows_node and movability.movable(p)]
    targets = [n for n in cluster.nodes if n.name != node_name]
    columns: dict[tuple[int, int], int] = {}
    for i, pod in enumerate(pods):
        for j, node in enumerate(targets):
            if static_fit(pod.constraints, node) is None or node.name == pod.node:
                columns[(i, j)] = len(columns)
    rows: list[tuple[dict[int, float], float, float]] = []
    for i in range(len(pods)):
        row = {c: 1.0 for (p, _), c in columns.items() if p == i}
        if not row:
            return False
        rows.append((row, 1.0, 1.0))
    for j, node in enumerate(targets):
        fixed = [p for p in cluster.pods_by_node[node.name] if not movability.movable(p)]
        for size, room in (
            (lambda p: p.requests.cpu, node.allocatable.cpu - sum(p.requests.cpu for p in fixed)),
            (
                lambda p: p.requests.memory,
                node.allocatable.memory - sum(p.requests.memory for p in fixed),
            ),
            (lambda p: 1, node.max_pods - len(fixed)),
        ):
            rows.append(
                (
                    {c: float(size(pods[p])) for (p, n), c in columns.items() if n == j},
                    -np.inf,
                    float(room),
                )
            )
    size = len(columns)
    return _solve(np.zeros(size), rows, np.ones(size)) is not None


def cheapest_nodes(cluster: Cluster, movability: Movability, pricing: Pricing) -> float:
    """Cost per hour of the cheapest node set that holds every pod (movable pods re-placed)."""
    nodes = cluster.nodes
    movable: list[Pod] = [
        p for p in cluster.pods if p.node and not p.follows_node and movability.movable(p)
    ]
    n_nodes = len(nodes)
    columns: dict[tuple[int, int], int] = {}
    for i, pod in enumerate(movable):
        for j, node in enumerate(nodes):
            if static_fit(pod.constraints, node) is None or node.name == pod.node:
                columns[(i, j)] = n_nodes + len(columns)
    size = n_nodes + len(columns)
    cost = np.zeros(size)
    cost[:n_nodes] = [node_price(n, pricing) for n in nodes]
    rows: list[tuple[dict[int, float], float, float]] = []
    for i in range(len(movable)):
        rows.append(({c: 1.0 for (p, _), c in columns.items() if p == i}, 1.0, 1.0))
    for j, node in enumerate(nodes):
        resident = cluster.pods_by_node[node.name]
        fixed = [p for p in resident if not movability.movable(p)]
        anchored = any(not p.follows_node for p in fixed) or node.name in movability.node_reasons
        if anchored:
            rows.append(({j: 1.0}, 1.0, 1.0))
        for size_of, capacity in (
            (lambda p: p.requests.cpu, node.allocatable.cpu),
            (lambda p: p.requests.memory, node.allocatable.memory),
            (lambda p: 1, node.max_pods),
        ):
            row = {c: float(size_of(movable[p])) for (p, n), c in columns.items() if n == j}
            # capacity used by pods pinned here (and DaemonSet pods) counts only if the node stays
            row[j] = -float(capacity - sum(size_of(p) for p in fixed))
            rows.append((row, -np.inf, 0.0))
    solution = _solve(cost, rows, np.ones(size))
    if solution is None:
        raise RuntimeError("no feasible node set")
    return float(cost @ np.round(solution))
