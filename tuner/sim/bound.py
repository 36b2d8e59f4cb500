"""The lower bound: the cheapest mix of whole nodes of the scenario's node types that holds a
tick's requests.

Per tick, with ``x_i`` nodes of pool ``i`` (whole numbers, at least the pool's minimum), minimise
the price per hour ``sum(price_i * x_i)`` subject to covering the non-DaemonSet pods' CPU
requests, memory requests and pod count, where one node of pool ``i`` offers its allocatable
minus its DaemonSet pods' requests and its pod slots minus its DaemonSet pods. Placement rules,
how pods split across nodes, provisioning time and pool maximums are ignored: every strategy
runs whole nodes whose free room together covers what it places, so none can go below it.

The integer programme (one variable per pool, three constraints) is solved exactly by SciPy's
``milp`` (HiGHS branch and bound, no optimality gap allowed); its rounded solution is checked
against the constraints in integers before it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from tuner.sim.pools import NodeGroup
from tuner.sim.workloads import Service


@dataclass(frozen=True, slots=True)
class Mix:
    """A node mix: its price per hour and its node count."""

    cost: float
    nodes: int


class WholeBound:
    """The cheapest mix of whole nodes per (CPU, memory, pods) demand, cached."""

    def __init__(self, pools: tuple[NodeGroup, ...], daemonsets: tuple[Service, ...]) -> None:
        self.prices = np.array([p.node_type.price for p in pools])
        self.least = np.array([p.min_nodes for p in pools], dtype=np.int64)
        self.room = np.array(
            [
                [
                    p.node_type.allocatable.cpu - sum(d.cpu for d in daemonsets),
                    p.node_type.allocatable.memory - sum(d.memory for d in daemonsets),
                    p.node_type.max_pods - len(daemonsets),
                ]
                for p in pools
            ],
            dtype=np.int64,
        ).T
        """Rows: CPU, memory, pod slots; one column per pool."""
        self._scale = np.maximum(self.room.max(axis=1), 1).astype(float)
        """Each row's largest room: the solver sees every row in nodes of its roomiest type."""
        self._cache: dict[tuple[int, int, int], Mix] = {}

    def __call__(self, cpu: int, memory: int, pods: int) -> Mix:
        """The cheapest mix of whole nodes holding these requests."""
        key = (cpu, memory, pods)
        if key not in self._cache:
            self._cache[key] = self._solve(np.array(key, dtype=np.int64))
        return self._cache[key]

    def _holds(self, nodes: np.ndarray, demand: np.ndarray) -> bool:
        return bool((self.room @ nodes >= demand).all())

    def _solve(self, demand: np.ndarray) -> Mix:
        if self._holds(self.least, demand):
            return Mix(float(self.prices @ self.least), int(self.least.sum()))
        scaled = self.room / self._scale[:, None]
        result = milp(
            self.prices,
            constraints=LinearConstraint(scaled, lb=demand / self._scale),
            integrality=np.ones(len(self.prices)),
            bounds=Bounds(self.least, np.inf),
            options={"mip_rel_gap": 0.0},
        )
        if result.x is None:
            raise ValueError(f"no mix of the pools' nodes holds requests {tuple(demand)}")
        nodes = np.round(result.x).astype(np.int64)
        if not self._holds(nodes, demand):
            raise ArithmeticError(f"the solver's mix {tuple(nodes)} misses {tuple(demand)}")
        return Mix(float(self.prices @ nodes), int(nodes.sum()))
