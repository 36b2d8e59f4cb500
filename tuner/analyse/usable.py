"""Requested and usable utilization (down-scaling thesis 003, §4.3).

Usable capacity of a node is its requests plus the part of its free resources that a pod can
really use: free CPU is capped at ``free_GiB * max_cpu_to_memory`` and free memory at
``free_cores * max_memory_to_cpu``; a node with less free than ``min_cpu`` or ``min_memory``
contributes only its requests (the thesis' text; its pseudo-code returns (0, 0) there).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from tuner.model.cluster import Node
from tuner.model.quantity import GIB
from tuner.model.resources import Resources
from tuner.settings import Thresholds, Usability


def usable_capacity(
    allocatable: Resources, requested: Resources, usability: Usability
) -> Resources:
    """Usable capacity of one node."""
    free_cpu = max(allocatable.cpu - requested.cpu, 0)
    free_memory = max(allocatable.memory - requested.memory, 0)
    if free_cpu < usability.min_cpu or free_memory < usability.min_memory:
        return requested
    if usability.max_cpu_to_memory is not None:
        cap = math.floor(Fraction(free_memory, GIB) * usability.max_cpu_to_memory * 1000)
        free_cpu = min(free_cpu, cap)
    if usability.max_memory_to_cpu is not None:
        cap = math.floor(Fraction(free_cpu, 1000) * usability.max_memory_to_cpu * GIB)
        free_memory = min(free_memory, cap)
    return Resources(requested.cpu + free_cpu, requested.memory + free_memory)


def node_usable(node: Node, requested: Resources, usability: Usability) -> Resources:
    """Usable capacity of a node with ``requested`` on it; a cordoned node's free part is
    usable by no pod, so it contributes only its requests."""
    if node.unschedulable:
        return requested
    return usable_capacity(node.allocatable, requested, usability)


def under_thresholds(requested: Resources, capacity: Resources, limits: Thresholds) -> bool:
    """requested/capacity < threshold on every limited dimension."""
    for used, cap, limit in (
        (requested.cpu, capacity.cpu, limits.cpu),
        (requested.memory, capacity.memory, limits.memory),
    ):
        if limit is None:
            continue
        if cap <= 0 or Fraction(used, cap) >= limit:
            return False
    return True


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


@dataclass(frozen=True, slots=True)
class Utilization:
    """Cluster requests over allocatable capacity, and over usable capacity."""

    cpu: float
    memory: float
    usable_cpu: float
    usable_memory: float

    @staticmethod
    def of(nodes: Iterable[tuple[Resources, Resources]], usability: Usability) -> Utilization:
        """Utilization from (allocatable, requested) pairs of the nodes."""
        allocatable = requested = usable = Resources()
        for alloc, used in nodes:
            allocatable += alloc
            requested += used
            usable += usable_capacity(alloc, used, usability)
        return Utilization(
            cpu=_ratio(requested.cpu, allocatable.cpu),
            memory=_ratio(requested.memory, allocatable.memory),
            usable_cpu=_ratio(requested.cpu, usable.cpu),
            usable_memory=_ratio(requested.memory, usable.memory),
        )
