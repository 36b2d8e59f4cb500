"""The tuner's load source in the simulator: what the simulation served up to now and the
trace's days before the run, never a second of the future; and the forecast's error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.model.forecast import LoadSeries
from tuner.model.load import SCALAR
from tuner.sim.engine import Simulation
from tuner.sim.forecast_error import forecast_error, tuner_horizon
from tuner.sim.history import FutureLoad, SimLoadHistory, step_means
from tuner.sim.scenarios import scenario
from tuner.sim.strategies.tuner import ProjectTuner

DAY = 86400.0


def test_asking_past_the_simulated_now_raises() -> None:
    now = [3600.0]
    history = SimLoadHistory(scenario("diurnal", 2.0), lambda: now[0])
    history.series(3600.0)
    with pytest.raises(FutureLoad, match="simulation is at 3600"):
        history.series(3600.0 + 1)
    now[0] = 3660.0
    assert history.series(3660.0).end == 3660.0


def test_the_days_before_the_run_are_the_traces_own_history() -> None:
    # diurnal replays Alibaba 2018 from its second day: the first day is the history.
    sc = scenario("diurnal", 2.0)
    series = SimLoadHistory(sc, lambda: 0.0).series(0.0)
    values = series.values[SCALAR]
    t = series.start + series.step_s * np.arange(series.length)
    known = t[~np.isnan(values)]
    assert known[0] == pytest.approx(-DAY + series.step_s, abs=series.step_s)  # one day back
    # Before the run the trace's day 0, on the run's scale (not the warm-up's flat load).
    pattern = sc.loads["php-apache-1"]
    before = pattern.before(np.array([-DAY / 2]))[0]  # type: ignore[attr-defined]
    assert 0 < before < 37.0
    assert not np.allclose(values[: len(values) // 2], values[-1])
    # The thesis' patterns have no history before the simulation starts.
    thesis = SimLoadHistory(scenario("thesis-wide"), lambda: 0.0).series(0.0)
    thesis_t = thesis.start + thesis.step_s * np.arange(thesis.length)
    served = ~np.isnan(thesis.values[SCALAR])
    assert thesis_t[served].min() >= -1800.0


def test_fetching_only_the_new_steps_gives_the_same_series() -> None:
    sc = scenario("diurnal", 4.0)
    now = [600.0]
    incremental = SimLoadHistory(sc, lambda: now[0], lookback_s=3 * 3600)
    for end in (600.0, 660.0, 3000.0, 9000.0):
        now[0] = end
        series = incremental.series(end)
        whole = SimLoadHistory(sc, lambda: now[0], lookback_s=3 * 3600).series(end)
        assert series.start == whole.start
        np.testing.assert_allclose(series.values[SCALAR], whole.values[SCALAR], equal_nan=True)
        assert series.length == 3 * 3600 / 60  # bounded by the look-back


def test_the_tuner_in_the_simulator_forecasts_from_the_past_only() -> None:
    sc = scenario("diurnal", 1.0)
    asked: list[tuple[float, float]] = []

    class Watched(SimLoadHistory):
        def series(self, end: float) -> LoadSeries:
            asked.append((end, self.clock()))
            return super().series(end)

    class Tuner(ProjectTuner):
        def load_history(self, sim: Simulation) -> SimLoadHistory:
            return Watched(sim.scenario, lambda: sim.now)

    tuner = Tuner(sc, 1)
    sim = Simulation(sc, 1, tuner)
    sim.advance(sc.warmup + sc.duration)
    assert asked, "the cycles asked for no load history"
    assert all(end <= now for end, now in asked)
    assert tuner.forecasts == len(asked)
    assert tuner.history is not None
    with pytest.raises(FutureLoad):
        tuner.history.series(sim.now + sim.tick)


def test_the_served_load_is_the_scenarios() -> None:
    sc = scenario("thesis-narrow")
    ends = np.array([1800.0 + 300, 4000.0])
    means = step_means(sc, ends, 60.0)
    for end, mean in zip(ends, means, strict=True):
        samples = [sc.load(end - k * 5.0) for k in range(12)]
        assert mean == pytest.approx(sum(samples) / 12)


def test_the_forecast_error_of_a_scenario() -> None:
    sc = scenario("diurnal", 6.0)
    error = forecast_error(sc, every_s=1800.0)
    assert error.horizon_s == tuner_horizon(sc) == 720.0
    assert error.forecasts == math.floor((6 * 3600 - 720) / 1800)
    assert 0 < error.mape < 0.5
    assert 0 <= error.above <= 1
    assert error.history_s > DAY  # the trace's day before the run
    assert error.bases == {"day": error.forecasts}
    assert error.to_json()["scenario"] == "diurnal"
