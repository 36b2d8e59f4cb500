"""The moderator: an APScheduler scheduler that runs one cycle at a time, forever.

Each cycle decides when the next one runs (a full window after a stable window, the retry
window after an unstable or unknown one). One job id, ``max_instances=1`` and coalescing make
sure two cycles never overlap. ``speed`` > 1 runs simulated time faster than the wall clock
(the demo): simulated now = t0 + (wall − w0) × speed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.schedulers.blocking import BlockingScheduler

from tuner.cycle import CycleReport, CycleState, Ports, run_cycle
from tuner.settings import Settings

log = logging.getLogger(__name__)

JOB = "tuner-cycle"


class Moderator:
    """Runs cycles on a schedule and hands each report to ``on_cycle``."""

    def __init__(
        self,
        settings: Settings,
        ports: Ports,
        *,
        dry_run: bool = False,
        on_cycle: Callable[[CycleReport], None] = lambda _: None,
        speed: float = 1.0,
        start_time: float | None = None,
    ) -> None:
        self.settings = settings
        self.ports = ports
        self.dry_run = dry_run
        self.on_cycle = on_cycle
        self.speed = speed
        self._wall0 = time.time()
        self._sim0 = self._wall0 if start_time is None else start_time
        self.state = CycleState(
            stable_since=self.now() + settings.windows.warmup_s - settings.windows.measure_s
        )
        self.rng = random.Random(settings.analyse.seed)
        self._scheduler = BlockingScheduler(timezone=UTC)
        self._lock = threading.Lock()
        self.cycles = 0

    def now(self) -> float:
        """The tuner's time (simulated when ``speed`` != 1)."""
        return self._sim0 + (time.time() - self._wall0) * self.speed

    def run_once(self) -> CycleReport:
        """Run one cycle now."""
        with self._lock:
            report, self.state = run_cycle(
                self.now(), self.state, self.settings, self.ports, self.rng, dry_run=self.dry_run
            )
            self.cycles += 1
        self.on_cycle(report)
        return report

    def run_forever(self, max_cycles: int | None = None) -> None:
        """Block, running cycles until :meth:`stop` (or ``max_cycles`` cycles)."""
        first = max(self.settings.windows.warmup_s, 0.0) / self.speed
        self._schedule(first, max_cycles)
        self._scheduler.start()

    def stop(self) -> None:
        """Stop scheduling; a cycle in progress finishes first."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)

    def _schedule(self, delay_s: float, max_cycles: int | None) -> None:
        when = datetime.fromtimestamp(time.time() + max(delay_s, 0.0), UTC)
        self._scheduler.add_job(
            self._tick,
            "date",
            run_date=when,
            args=(max_cycles,),
            id=JOB,
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )

    def _tick(self, max_cycles: int | None) -> None:
        try:
            report = self.run_once()
            delay = report.next_in
        except Exception:
            log.exception("cycle failed; retrying after the retry window")
            delay = self.settings.windows.retry_s
        if max_cycles is not None and self.cycles >= max_cycles:
            threading.Thread(target=self.stop, daemon=True).start()
            return
        self._schedule(delay / self.speed, max_cycles)
