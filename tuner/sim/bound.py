"""The lower bound: the cheapest fractional mix of the scenario's node types that holds a tick's
requests.

Per tick, with ``x_i`` nodes of pool ``i`` (real numbers, at least the pool's minimum), minimise
the price per hour ``sum(price_i * x_i)`` subject to covering the non-DaemonSet pods' CPU
requests, memory requests and pod count, where one node of pool ``i`` offers its allocatable
minus its DaemonSet pods' requests and its pod slots minus its DaemonSet pods. Placement rules,
how pods split across nodes and pool maximums are ignored, so no strategy can go below it.

The linear programme has three constraints, so an optimum lies on a vertex with at most three
pools above their minimum: every vertex is enumerated (a square system per choice of pools and
binding constraints) and the cheapest feasible one is taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from tuner.sim.pools import NodePool
from tuner.sim.workloads import Service


@dataclass(frozen=True, slots=True)
class Mix:
    """A fractional node mix: its price per hour and its node count."""

    cost: float
    nodes: float


class FluidBound:
    """The cheapest fractional node mix per (CPU, memory, pods) demand, cached."""

    def __init__(self, pools: tuple[NodePool, ...], daemonsets: tuple[Service, ...]) -> None:
        self.prices = np.array([p.node_type.price for p in pools])
        self.least = np.array([float(p.min_nodes) for p in pools])
        self.room = np.array(
            [
                [
                    p.node_type.allocatable.cpu - sum(d.cpu for d in daemonsets),
                    p.node_type.allocatable.memory - sum(d.memory for d in daemonsets),
                    p.node_type.max_pods - len(daemonsets),
                ]
                for p in pools
            ],
            dtype=float,
        ).T
        """Rows: CPU, memory, pod slots; one column per pool."""
        self._cache: dict[tuple[int, int, int], Mix] = {}

    def __call__(self, cpu: int, memory: int, pods: int) -> Mix:
        """The cheapest mix holding these requests."""
        key = (cpu, memory, pods)
        if key not in self._cache:
            self._cache[key] = self._solve(np.array(key, dtype=float))
        return self._cache[key]

    def _solve(self, demand: np.ndarray) -> Mix:
        need = demand - self.room @ self.least
        best = np.zeros(len(self.prices))
        best_cost = 0.0 if (need <= 1e-9).all() else np.inf
        pools = range(len(self.prices))
        for size in range(1, min(3, len(self.prices)) + 1):
            for chosen in combinations(pools, size):
                for rows in combinations(range(3), size):
                    matrix = self.room[np.ix_(rows, chosen)]
                    if abs(np.linalg.det(matrix)) < 1e-9:
                        continue
                    part = np.linalg.solve(matrix, need[list(rows)])
                    if (part < -1e-9).any():
                        continue
                    x = np.zeros(len(self.prices))
                    x[list(chosen)] = part
                    if (self.room @ x < need - 1e-6 * np.maximum(abs(need), 1)).any():
                        continue
                    cost = float(self.prices @ x)
                    if cost < best_cost:
                        best, best_cost = x, cost
        total = best + self.least
        return Mix(float(self.prices @ total), float(total.sum()))
