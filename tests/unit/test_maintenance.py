"""Maintenance windows: cron schedules in a time zone, daylight-saving edges, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tuner.errors import InputError
from tuner.model.maintenance import MaintenanceWindow, opening
from tuner.settings import settings_from_dict

ROOT = Path(__file__).resolve().parents[2]
BERLIN = "Europe/Berlin"


def at(text: str, zone: str = "UTC") -> float:
    """An instant from a wall-clock time in a zone (the first, if the clocks repeat it)."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


def utc(instant: float | None) -> str:
    assert instant is not None
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%d %H:%M")


NIGHTLY = MaintenanceWindow("0 2 * * *", 3 * 3600, BERLIN)


def test_no_window_means_always_open() -> None:
    assert opening((), at("2024-06-03 12:00")).open


def test_inside_a_window_until_its_end_then_closed_until_the_next_opening() -> None:
    inside = opening([NIGHTLY], at("2024-06-03 04:59:59", BERLIN))
    assert inside.open
    assert utc(inside.at) == "2024-06-03 03:00"  # 05:00 CEST
    assert (
        inside.reason
        == "inside maintenance window, open until 2024-06-03 05:00 CEST (Europe/Berlin)"
    )
    closed = opening([NIGHTLY], at("2024-06-03 05:00", BERLIN))
    assert not closed.open
    assert closed.reason == (
        "outside maintenance window, next at 2024-06-04 02:00 CEST (Europe/Berlin)"
    )
    assert opening([NIGHTLY], at("2024-06-03 02:00", BERLIN)).open  # opens on the minute
    assert not opening([NIGHTLY], at("2024-06-03 01:59:59", BERLIN)).open


def test_the_zone_decides_the_wall_clock() -> None:
    now = at("2024-06-03 02:30", "UTC")  # 04:30 in Berlin, 22:30 the day before in New York
    assert opening([NIGHTLY], now).open
    assert not opening([MaintenanceWindow("0 2 * * *", 3 * 3600, "America/New_York")], now).open
    assert opening([MaintenanceWindow("0 2 * * *", 3 * 3600)], now).open


def test_cron_weekday_numbers_are_crons_sunday_is_0_and_7() -> None:
    weekdays = MaintenanceWindow("0 9 * * 1-5", 8 * 3600)
    saturday, sunday, monday = (at(f"2024-06-0{d} 10:00") for d in (1, 2, 3))
    assert not opening([weekdays], saturday).open
    assert not opening([weekdays], sunday).open
    assert opening([weekdays], monday).open
    assert utc(opening([weekdays], saturday).at) == "2024-06-03 09:00"
    for field in ("0", "7", "sun"):
        assert opening([MaintenanceWindow(f"0 9 * * {field}", 7200)], sunday).open, field
        assert not opening([MaintenanceWindow(f"0 9 * * {field}", 7200)], monday).open, field
    weekend = MaintenanceWindow("0 0 * * 6-7", 86400)
    assert opening([weekend], saturday).open and opening([weekend], sunday).open
    assert not opening([weekend], monday).open


def test_the_macros_karpenter_accepts() -> None:
    sunday, monday = at("2024-06-02 00:30"), at("2024-06-03 00:30")
    weekly = MaintenanceWindow("@weekly", 3600)
    assert opening([weekly], sunday).open and not opening([weekly], monday).open
    assert opening([MaintenanceWindow("@daily", 3600)], monday).open
    assert opening([MaintenanceWindow("@hourly", 60)], at("2024-06-03 07:00:30")).open


def test_several_windows_the_latest_end_and_the_earliest_next() -> None:
    short = MaintenanceWindow("0 2 * * *", 3600)
    long = MaintenanceWindow("30 2 * * *", 2 * 3600)
    assert utc(opening([short, long], at("2024-06-03 02:45")).at) == "2024-06-03 04:30"
    assert utc(opening([short, long], at("2024-06-03 12:00")).at) == "2024-06-04 02:00"


def test_spring_forward_a_start_in_the_skipped_hour_opens_an_hour_later_by_the_clock() -> None:
    # 2024-03-31 in Berlin: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
    window = MaintenanceWindow("30 2 * * *", 3600, BERLIN)
    closed = opening([window], at("2024-03-31 00:00", "UTC"))
    assert not closed.open
    assert utc(closed.at) == "2024-03-31 01:30"  # 03:30 CEST
    assert opening([window], at("2024-03-31 01:45", "UTC")).open
    assert utc(opening([window], at("2024-03-31 02:45", "UTC")).at) == "2024-04-01 00:30"
    # Duration is elapsed time: a 01:00 window of 2 h ends at 04:00 CEST that night.
    across = MaintenanceWindow("0 1 * * *", 2 * 3600, BERLIN)
    assert utc(opening([across], at("2024-03-31 00:30", "UTC")).at) == "2024-03-31 02:00"


def test_fall_back_a_start_in_the_repeated_hour_opens_at_both() -> None:
    # 2024-10-27 in Berlin: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
    window = MaintenanceWindow("30 2 * * *", 15 * 60, BERLIN)
    assert opening([window], at("2024-10-27 00:40", "UTC")).open  # 02:40 CEST
    between = opening([window], at("2024-10-27 01:00", "UTC"))  # 02:00 CET
    assert not between.open
    assert utc(between.at) == "2024-10-27 01:30"  # 02:30 CET
    assert opening([window], at("2024-10-27 01:40", "UTC")).open
    assert utc(opening([window], at("2024-10-27 02:00", "UTC")).at) == "2024-10-28 01:30"


def test_new_york_dst_edges() -> None:
    window = MaintenanceWindow("0 * * * *", 60, "America/New_York")
    # 2024-03-10: 02:00 EST becomes 03:00 EDT: the hour after 01:00 EST opens at 03:00 EDT.
    assert utc(opening([window], at("2024-03-10 06:01", "UTC")).at) == "2024-03-10 07:00"
    # 2024-11-03: 01:00 happens twice: both open.
    assert utc(opening([window], at("2024-11-03 05:01", "UTC")).at) == "2024-11-03 06:00"


def window_settings(**entry: object) -> dict[str, object]:
    return {"limits": {"maintenance_windows": [{"duration_s": 3600, **entry}]}}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"schedule": "61 2 * * *"},
            "limits.maintenance_windows.0.schedule: '61 2 * * *': ",
        ),
        (
            {"schedule": "0 2 * *"},
            "limits.maintenance_windows.0.schedule: '0 2 * *': needs five cron fields",
        ),
        (
            {"schedule": "0 2 1 * mon"},
            "limits.maintenance_windows.0.schedule: '0 2 1 * mon': restricts both day-of-month",
        ),
        ({"schedule": "0 0 30 2 *"}, "limits.maintenance_windows.0.schedule: '0 0 30 2 *' never"),
        ({"schedule": "0 0 * * 5-2"}, "day-of-week range '5-2' is empty"),
        ({"schedule": "0 0 * * */0"}, "step 0 in day-of-week"),
        (
            {"schedule": "0 2 * * *", "time_zone": "Mars/Olympus"},
            "limits.maintenance_windows.0.time_zone: 'Mars/Olympus' is not an IANA time zone",
        ),
        (
            {"schedule": "0 2 * * *", "time_zone": "../../etc/passwd"},
            "limits.maintenance_windows.0.time_zone: '../../etc/passwd' is not an IANA",
        ),
    ],
)
def test_a_bad_window_is_refused_naming_the_field_and_the_value(
    entry: dict[str, object], message: str
) -> None:
    with pytest.raises(InputError) as refused:
        settings_from_dict(window_settings(**entry))
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_bad_schedule_ends_the_command_with_one_line_and_status_2(tmp_path: Path) -> None:
    bad = tmp_path / "settings.json"
    bad.write_text(json.dumps(window_settings(schedule="0 25 * * *")))
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "run", "--settings", str(bad), "--once"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("tuner: error: settings ")
    assert "limits.maintenance_windows.0.schedule: '0 25 * * *'" in line


def test_settings_give_the_limits() -> None:
    limits = settings_from_dict(
        {
            "limits": {
                "evictions_per_hour": 5,
                "namespace_evictions_per_day": 9,
                "namespaces": {"shop": {"evictions_per_hour": 1}},
                "maintenance_windows": [
                    {"schedule": "0 2 * * mon-fri", "duration_s": 7200, "time_zone": BERLIN}
                ],
                "pause_config_map": "tuner-settings",
            }
        }
    ).limits
    assert (limits.cluster.per_hour, limits.cluster.per_day) == (5, None)
    assert limits.of_namespace("web").per_day == 9
    assert limits.of_namespace("shop").per_hour == 1
    assert limits.of_namespace("shop").per_day is None
    assert limits.maintenance_windows == (MaintenanceWindow("0 2 * * mon-fri", 7200, BERLIN),)
    assert limits.pause_config_map == "tuner-settings"
    defaults = settings_from_dict({}).limits
    assert not defaults.budgeted and defaults.maintenance_windows == ()
    assert defaults.pause_config_map == "deployment-tuner"
