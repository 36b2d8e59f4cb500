"""The monitor's verdict on one window and the report the cycle acts on."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tuner.model.load import Load


class Verdict(StrEnum):
    """How a window is judged."""

    STABLE = "stable"
    UNSTABLE = "unstable"
    UNKNOWN = "unknown"
    """Could not be judged: not stable and not unstable; the tuner does not act on it."""


KSM = "kube-state-metrics"


SNAPSHOTS = "snapshots"


@dataclass(frozen=True)
class WindowReport:
    """The monitor's verdict on one window.

    The tuner may act, and record the deployment under :attr:`load`, only when :attr:`actionable`.
    """

    verdict: Verdict
    reason: str
    """One line: the main reason (all of them are in :attr:`findings`)."""
    load: Load | None
    """The load served over [start, end]; None when it could not be measured."""
    start: float
    end: float
    checked_from: float
    """Stability was checked from here (``start`` minus the warm-up) to ``end``."""
    findings: tuple[str, ...] = ()
    source: str = KSM
    """What stability was judged from: ``kube-state-metrics`` series or API ``snapshots``."""
    load_query: str = ""
    """The load query as sent (``$window`` replaced)."""
    failed_query: str | None = None
    """The query that failed or answered nonsense (verdict ``unknown``)."""

    @property
    def actionable(self) -> bool:
        """Stable, with a load: the only window the tuner acts on and records."""
        return self.verdict is Verdict.STABLE and self.load is not None

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready values (``tuner monitor --format json``)."""
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "findings": list(self.findings),
            "load": None if self.load is None else self.load.to_json(),
            "load_query": self.load_query,
            "window": {
                "start": self.start,
                "end": self.end,
                "checked_from": self.checked_from,
                "length_s": self.end - self.start,
                "warmup_s": self.start - self.checked_from,
            },
            "source": self.source,
            "failed_query": self.failed_query,
        }
