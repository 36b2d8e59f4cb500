"""Integer resource vectors: CPU in millicores, memory in bytes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resources:
    """A CPU/memory amount. Never float: capacity arithmetic is exact."""

    cpu: int = 0
    memory: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory - other.memory)

    def fits_in(self, room: Resources) -> bool:
        """True when this amount fits in ``room`` on every dimension."""
        return self.cpu <= room.cpu and self.memory <= room.memory

    @staticmethod
    def total(items: list[Resources] | tuple[Resources, ...]) -> Resources:
        """Sum of many amounts."""
        return Resources(sum(r.cpu for r in items), sum(r.memory for r in items))
