"""Maintenance windows: the moments the tuner may act (``limits.maintenance_windows``).

A window opens at every moment its cron ``schedule`` names in its IANA ``time_zone`` and stays
open ``duration_s`` elapsed seconds, as a Karpenter disruption budget's ``schedule`` and
``duration`` do (Karpenter reads them in UTC only). Five cron fields (or a macro, ``@hourly``
to ``@yearly``), parsed and stepped by APScheduler's cron trigger, with two corrections so
that a schedule means what ``crontab(5)`` says: day-of-week numbers are cron's (0 and 7 are
Sunday; APScheduler counts from Monday), and a schedule that restricts both day-of-month and
day-of-week is refused (cron matches either, APScheduler both). Every computation is on
instants (epoch seconds); the wall clock of the zone only decides when a window opens. Across a
daylight-saving change: a start in the hour the clocks skip opens when that hour would have
ended (02:30 on the spring-forward night opens at 03:30 summer time); a start in the hour the
clocks repeat opens at both.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tuner.errors import InputError

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The cron macros Karpenter's budget schedules accept too."""
_NUMERIC_DAYS = re.compile(r"(\*|[0-7](?:-[0-7])?)(?:/(\d{1,2}))?")


@dataclass(frozen=True)
class MaintenanceWindow:
    """Opens at each moment ``schedule`` names in ``time_zone``; stays open ``duration_s``."""

    schedule: str
    duration_s: float
    time_zone: str = "UTC"

    def last_opening(self, now: float) -> float | None:
        """When the window now open opened (the latest opening in ``(now - duration_s, now]``),
        or None when it is closed."""
        since = math.floor(now - self.duration_s) + 1  # openings fall on whole seconds
        opening = self.next_opening(since)
        return opening if opening is not None and opening <= now else None

    def next_opening(self, after: float) -> float | None:
        """The first opening at or after ``after`` (None: never again)."""
        zone = _zone(self.time_zone)
        fire = _trigger(self.schedule, self.time_zone).get_next_fire_time(
            None, datetime.fromtimestamp(after, UTC).astimezone(zone)
        )
        return None if fire is None else fire.timestamp()


@dataclass(frozen=True)
class Opening:
    """Whether the tuner may act now, by its maintenance windows."""

    open: bool
    at: float | None = None
    """Open: when the window closes; closed: when the next one opens (None: never)."""
    time_zone: str = "UTC"
    """The zone of the window ``at`` belongs to (how it is shown)."""

    @property
    def reason(self) -> str:
        """One line for logs and Events."""
        when = "never" if self.at is None else local_time(self.at, self.time_zone)
        if self.open:
            return f"inside maintenance window, open until {when}"
        return f"outside maintenance window, next at {when}"


def opening(windows: Sequence[MaintenanceWindow], now: float) -> Opening:
    """Whether ``now`` is inside a window (none configured: always)."""
    if not windows:
        return Opening(True)
    open_until = [
        (opened + w.duration_s, w.time_zone)
        for w in windows
        if (opened := w.last_opening(now)) is not None
    ]
    if open_until:
        return Opening(True, *max(open_until))
    upcoming = [(at, w.time_zone) for w in windows if (at := w.next_opening(now)) is not None]
    return Opening(False, *min(upcoming)) if upcoming else Opening(False)


def local_time(at: float, time_zone: str) -> str:
    """``2024-06-03 02:00 CEST (Europe/Berlin)``: an instant on the zone's wall clock."""
    local = datetime.fromtimestamp(at, UTC).astimezone(_zone(time_zone))
    return f"{local:%Y-%m-%d %H:%M} {local.tzname()} ({time_zone})"


def maintenance_window(entry: dict[str, object], where: str) -> MaintenanceWindow:
    """A validated window from its settings entry; an :class:`InputError` naming the field and
    the value otherwise (a bad schedule or zone, or a schedule that never opens, as on 30
    February)."""
    schedule, zone = str(entry["schedule"]), str(entry.get("time_zone", "UTC"))
    duration = entry["duration_s"]
    assert isinstance(duration, int | float)  # the JSON Schema checked it
    try:
        _zone(zone)
    except InputError as err:
        raise InputError(f"{where}.time_zone: {err}") from None
    try:
        _trigger(schedule, zone)
    except InputError as err:
        raise InputError(f"{where}.schedule: {schedule!r}: {err}") from None
    window = MaintenanceWindow(schedule, float(duration), zone)
    if window.next_opening(0.0) is None:  # five cron fields repeat within eight years
        raise InputError(f"{where}.schedule: {schedule!r} never opens")
    return window


@cache
def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"{name!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") from None


@cache
def _trigger(schedule: str, zone: str) -> CronTrigger:
    from apscheduler.triggers.cron import CronTrigger  # only when windows are configured

    fields = _MACROS.get(schedule.strip(), schedule).split()
    if len(fields) != 5:
        raise InputError(
            f"needs five cron fields (minute hour day-of-month month day-of-week), "
            f"not {len(fields)}"
        )
    minute, hour, day, month, weekday = fields
    if day != "*" and weekday != "*":
        raise InputError(
            "restricts both day-of-month and day-of-week (cron would open on either); "
            "give one, or two windows"
        )
    try:
        return CronTrigger(
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=_cron_weekdays(weekday),
            timezone=_zone(zone),
        )
    except ValueError as err:
        raise InputError(str(err)) from None


def _cron_weekdays(field: str) -> str:
    """Cron's day-of-week field with its numbers (0 and 7: Sunday) as day names, which
    APScheduler reads as cron does; names and ``*`` stay as they are."""
    names: list[str] = []
    for part in field.split(","):
        match = _NUMERIC_DAYS.fullmatch(part)
        if match is None or part == "*":
            names.append(part)
            continue
        span, step = match[1], int(match[2] or 1)
        if step == 0:
            raise InputError(f"step 0 in day-of-week {part!r}")
        low, _, high = ("0-7" if span == "*" else span).partition("-")
        days = range(int(low), int(high or low) + 1, step)
        if not days:
            raise InputError(f"day-of-week range {part!r} is empty")
        names += [_DAY_NAMES[d % 7] for d in days]
    return ",".join(dict.fromkeys(names))
