"""The moderator: an APScheduler scheduler that runs one cycle at a time, until stopped.

Each cycle decides when the next one runs (a full window after a stable window, the retry
window after an unstable or unknown one, the rest of the warm-up plus a window after a change).
Each cycle schedules the next as a new one-shot job (its own id: a job may not schedule a run
of itself while it still runs, or APScheduler skips that run as "maximum number of running
instances reached" and the loop stops); one lock makes sure two cycles never overlap; a cycle that
raises is reported as :attr:`~tuner.cycle.Outcome.ERROR` and retried after the retry window.
``speed`` > 1 runs simulated time faster than the wall clock (the demo):
simulated now = t0 + (wall − w0) × speed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.blocking import BlockingScheduler

from tuner.cycle import CycleReport, CycleState, Outcome, Ports, hold_reserve, run_cycle
from tuner.errors import ServiceError
from tuner.settings import Settings

log = logging.getLogger(__name__)

JOB = "tuner-cycle"
"""Prefix of the id of each scheduled cycle."""


class Moderator:
    """Runs cycles on a schedule and hands each report, with the seconds the cycle took, to
    ``on_cycle``."""

    def __init__(
        self,
        settings: Settings,
        ports: Ports,
        *,
        dry_run: bool = False,
        on_cycle: Callable[[CycleReport, float], None] = lambda _report, _seconds: None,
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
        self.state = CycleState()
        self.rng = random.Random(settings.analyse.seed)
        self._scheduler = BlockingScheduler(timezone=UTC)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._scheduled = 0
        self.cycles = 0

    def now(self) -> float:
        """The tuner's time (simulated when ``speed`` != 1)."""
        return self._sim0 + (time.time() - self._wall0) * self.speed

    def run_once(self) -> CycleReport:
        """Run one cycle now (exceptions propagate)."""
        started = time.monotonic()
        with self._lock:
            self.cycles += 1
            report, self.state = run_cycle(
                self.now(), self.state, self.settings, self.ports, self.rng, dry_run=self.dry_run
            )
        self.on_cycle(report, time.monotonic() - started)
        return report

    def every(self, seconds: float, job: Callable[[], object], name: str) -> None:
        """Also run ``job`` every ``seconds`` (wall clock) while the moderator runs."""
        self._scheduler.add_job(
            job, "interval", seconds=seconds, id=name, max_instances=1, coalesce=True
        )

    def take_back(self) -> tuple[str, ...]:
        """Between cycles (never in a dry run): take back the nodes left for an autoscaler that
        pending pods would run on; their names."""
        if self.dry_run:
            return ()
        with self._lock:
            return self.ports.actuator.take_back_needed(self.now())

    def hold_reserve(self) -> None:
        """Between cycles (never in a dry run): hold the reserve the forecast made now asks for
        (:func:`~tuner.cycle.hold_reserve`); a line when it changed a placeholder or failed."""
        if self.dry_run:
            return
        with self._lock:
            reserve, held = hold_reserve(self.now(), self.settings, self.ports)
        if (
            reserve is not None
            and held is not None
            and (held.created or held.removed or held.failed)
        ):
            log.info(
                "reserve between cycles: %d placeholder(s) created, %d removed, %d standing%s: %s",
                len(held.created),
                len(held.removed),
                held.standing,
                f" (failed: {held.failed})" if held.failed else "",
                reserve.reason,
            )

    def run_forever(self, max_cycles: int | None = None) -> None:
        """Block, running cycles until :meth:`stop` (or ``max_cycles`` cycles), and
        :meth:`take_back` and :meth:`hold_reserve` every ``windows.retry_s``."""
        if self._stopped.is_set():
            return
        if not self.dry_run:
            self.every(self.settings.windows.retry_s / self.speed, self.take_back, "take-back")
            if self.ports.reserve is not None:
                retry = self.settings.windows.retry_s / self.speed
                self.every(retry, self.hold_reserve, "reserve")
        self._schedule(0.0, max_cycles)
        try:
            self._scheduler.start()
        except JobLookupError:
            # A stop that lands between APScheduler submitting a one-shot cycle and removing
            # it from its store makes the removal look in the (empty) pending list and raise:
            # the scheduler has stopped, as asked.
            if not self._stopped.is_set():
                raise

    def stop(self) -> None:
        """Stop scheduling; a cycle in progress finishes first. Safe from any thread, also
        before :meth:`run_forever` (which then returns at once)."""
        self._stopped.set()
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)

    def _schedule(self, delay_s: float, max_cycles: int | None) -> None:
        when = datetime.fromtimestamp(time.time() + max(delay_s, 0.0), UTC)
        self._scheduled += 1
        self._scheduler.add_job(
            self._tick,
            "date",
            run_date=when,
            args=(max_cycles,),
            id=f"{JOB}-{self._scheduled}",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )

    def _tick(self, max_cycles: int | None) -> None:
        delay = self.settings.windows.retry_s
        try:
            delay = self._cycle()
        finally:  # even when on_cycle itself raised: the loop must go on
            if max_cycles is not None and self.cycles >= max_cycles:
                threading.Thread(target=self.stop, daemon=True).start()
            elif self._scheduler.running:
                self._schedule(delay / self.speed, max_cycles)

    def _cycle(self) -> float:
        """One cycle, a failure reported as an ERROR cycle; the seconds until the next."""
        started = time.monotonic()
        try:
            return self.run_once().next_in
        except Exception as err:
            delay = self.settings.windows.retry_s
            if isinstance(err, ServiceError):
                log.error("cycle failed, retrying in %.0f s: %s", delay, err)
            else:
                log.exception("cycle failed, retrying in %.0f s", delay)
            now = self.now()
            self.on_cycle(
                CycleReport(Outcome.ERROR, now, now, str(err), delay), time.monotonic() - started
            )
            return delay
