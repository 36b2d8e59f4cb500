"""The evaluation's table and figures: the room a scenario leaves (CA alone above the lower
bound), the share of it each row captures (none shown under 3 %), and the forecast error of the
rows that forecast."""

from __future__ import annotations

import math
from dataclasses import replace

from tuner.sim.evaluate import summary, work
from tuner.sim.forecast_error import ForecastError, forecast_key
from tuner.sim.metrics import ActionCounts, TickSeries
from tuner.sim.report import Comparison, StrategyRun, forecast_keys, highest_ahead, table
from tuner.sim.scenarios import scenario
from tuner.sim.strategies.tuner import simulation_settings

TICKS = 720  # an hour of 5-second ticks
SCENARIO = scenario("thesis-wide", 1.0)


def outcome(strategy: str, cost_per_hour: float) -> StrategyRun:
    series = TickSeries(cost=[cost_per_hour] * TICKS, nodes=[1] * TICKS, time=[0.0] * TICKS)
    series.pending = series.short = series.evictions = [0] * TICKS
    return StrategyRun(strategy, series, 5.0, ActionCounts(), {})


def error(mape: float) -> ForecastError:
    return ForecastError("thesis-wide", 720.0, 5, mape, 0.2, 0.0, 0.3, 86400.0, {"day": 5})


def compared(bound: float, **costs: float) -> Comparison:
    outcomes = tuple(outcome(name, cost) for name, cost in {"autoscaler": 1.0, **costs}.items())
    return Comparison(
        SCENARIO, 1, outcomes, (bound,) * TICKS, (1,) * TICKS, {"tuner": error(0.123)}
    )


def row(text: str, label: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {label} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_room_and_the_share_of_it_each_row_captures() -> None:
    comparison = compared(0.9, karpenter=0.93, binpacking=1.05, tuner=1.0)

    text = table(comparison)

    assert math.isclose(comparison.room, 0.1)
    assert math.isclose(comparison.captured("karpenter") or 0, 0.7)
    header = row(text, "strategy")
    at = header.index("room captured")
    assert row(text, "Karpenter")[at] == "70 %"
    assert row(text, "CA + MostAllocated")[at] == "-50 %"
    assert row(text, "CA alone")[at] == "—"
    assert row(text, "lower bound")[header.index("savings vs CA")] == "+10.0 %"


def test_no_capture_is_shown_where_the_room_is_under_3_percent() -> None:
    comparison = compared(0.975, karpenter=0.98)

    text = table(comparison)

    assert comparison.captured("karpenter") is None
    assert row(text, "Karpenter")[row(text, "strategy").index("room captured")] == "—"
    assert summary(comparison)["strategies"]["karpenter"]["room_captured"] is None


def test_the_forecast_error_of_the_rows_that_forecast() -> None:
    comparison = compared(0.9, karpenter=0.93, tuner=0.95)

    text = table(comparison)
    figures = summary(comparison)

    at = row(text, "strategy").index("forecast error: MAPE, above band")
    assert row(text, "CA + tuner")[at] == "12.3 %, 20 %"
    assert row(text, "Karpenter")[at] == "—"
    assert figures["room"] == 0.1
    assert figures["strategies"]["tuner"]["room_captured"] == 0.5
    assert figures["strategies"]["tuner"]["forecast_error"]["mape"] == 0.123
    assert "forecast_error" not in figures["strategies"]["karpenter"]


def test_the_safe_room_above_the_pinned_bound_and_the_share_of_it_each_row_captures() -> None:
    """CA alone 1.0/h, rule bound 0.8, pinned bound 0.9: the safe room is 10 %; Karpenter's
    0.85 takes 75 % of the room and 150 % of the safe room (it moves pinned pods: started
    elsewhere, it is not bounded by it)."""
    comparison = replace(
        compared(0.8, karpenter=0.85, tuner=0.95),
        pinned_bound=(0.9,) * TICKS,
        pinned_bound_nodes=(2,) * TICKS,
    )
    comparison.outcome("karpenter").series.pinned_start = (("db-000001", "pool-0002"),)

    text = table(comparison)
    figures = summary(comparison)

    header = row(text, "strategy")
    at = header.index("safe room captured")
    assert row(text, "Karpenter")[at] == "150 %"
    assert row(text, "CA + tuner")[at] == "50 %"
    assert row(text, "pinned bound")[header.index("savings vs CA")] == "+10.0 %"
    assert row(text, "pinned bound")[header.index("node-hours")] == "2.00"
    assert figures["safe_room"] == 0.1
    assert figures["lower_bound"]["pinned_cost"] == 0.9
    assert figures["strategies"]["tuner"]["safe_room_captured"] == 0.5
    assert figures["strategies"]["tuner"]["keeps_pinned"] is True
    assert figures["strategies"]["karpenter"]["keeps_pinned"] is False
    assert figures["strategies"]["karpenter"]["room_captured"] == 0.75


def test_each_tuner_row_is_held_to_the_forecast_its_own_settings_make() -> None:
    names = ("autoscaler", "karpenter", "tuner2019", "tuner", "karpenter-tuner")

    keys = forecast_keys(SCENARIO, 1, names)

    assert set(keys) == {"tuner", "karpenter-tuner"}
    settings = simulation_settings(SCENARIO, 1)
    assert keys["tuner"] == forecast_key(settings)
    horizon = keys["tuner"][2]
    assert horizon == settings.forecast.node_startup_s + settings.windows.measure_s


def test_worker_processes_start_the_costliest_scenarios_first() -> None:
    by_work = sorted(
        ["thesis-wide", "diurnal", "large", "diurnal-week"], key=lambda n: -work(scenario(n))
    )

    assert by_work == ["diurnal-week", "large", "diurnal", "thesis-wide"]


def test_the_no_wait_bound_pays_each_rise_a_provisioning_delay_before_it() -> None:
    """A rule bound of 0.8/h with one 10-minute rise to 1.2/h: a run whose pods never wait pays
    the rise from a provisioning delay (120 s, 24 ticks) before it, so 24 more ticks at 1.2."""
    delay = SCENARIO.autoscaler.provisioning_delay
    assert delay == 120.0
    bound = [0.8] * TICKS
    bound[360:480] = [1.2] * 120
    comparison = replace(compared(0.8, tuner=0.95), lower_bound=tuple(bound))

    text = table(comparison)
    figures = summary(comparison)

    expected = (0.8 * (TICKS - 144) + 1.2 * 144) * 5 / 3600
    assert math.isclose(comparison.no_wait_bound_cost, expected)
    assert comparison.no_wait_bound[335] == 0.8
    assert comparison.no_wait_bound[336] == 1.2
    assert comparison.no_wait_bound[479] == 1.2
    assert comparison.no_wait_bound[480] == 0.8
    assert figures["lower_bound"]["no_wait_cost"] == round(expected, 4)
    assert figures["no_wait_room"] == round(1 - expected, 4)
    header = row(text, "strategy")
    assert row(text, "no-wait bound")[header.index("node-hours")] == "—"
    assert (
        row(text, "no-wait bound")[header.index("savings vs CA")]
        == f"{(1 - expected) * 100:+.1f} %"
    )


def test_the_highest_value_ahead_stops_at_the_series_end() -> None:
    assert highest_ahead((1.0, 3.0, 2.0, 0.5), 1) == (3.0, 3.0, 2.0, 0.5)
    assert highest_ahead((1.0, 3.0, 2.0, 0.5), 0) == (1.0, 3.0, 2.0, 0.5)
