"""Load patterns (the thesis' Artillery phases, hand-checked) and offline trace replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.errors import InputError
from tuner.sim.load import (
    HIGH_FREQUENCY,
    NARROW_PEAKS,
    WIDE_PEAKS,
    Phases,
    TraceReplay,
    trace_series,
)
from tuner.sim.scenarios import SCENARIOS, scenario


@pytest.mark.parametrize("pattern", [WIDE_PEAKS, NARROW_PEAKS, HIGH_FREQUENCY])
def test_thesis_patterns_send_151200_requests_in_3_5_hours(pattern: Phases) -> None:
    # thesis §5.2.3: every phase-3 pattern lasts 3.5 h and sends 151,200 requests
    assert pattern.duration == 12600
    assert pattern.requests() == pytest.approx(151200)


def test_phases_ramp_linearly() -> None:
    # long_equal.yml: 1800 s at 6, then 300 s ramping 6 -> 20, then 2400 s at 20
    assert WIDE_PEAKS(-10) == 6
    assert WIDE_PEAKS(1800 + 150) == pytest.approx(13)
    assert WIDE_PEAKS(1800 + 300 + 1) == 20
    # peaks.yml: the first peak of 37 req/s is reached 150 s after the 1800 s valley
    assert NARROW_PEAKS(1800 + 150 + 1) == 37
    assert NARROW_PEAKS(1800 + 600 + 10) == 9


@pytest.mark.parametrize("name", ["alibaba2018", "google2019", "azure_v2"])
def test_traces_ship_with_the_package(name: str) -> None:
    series = trace_series(name)
    assert len(series) > 2000  # days of 5-minute samples
    assert all(v > 0 for v in series)


def test_trace_replay_peaks_at_the_given_load() -> None:
    replay = TraceReplay.of("alibaba2018", 288, 86400, peak=40.0)
    values = [replay(t) for t in range(0, 86400, 300)]
    assert max(values) == pytest.approx(40.0)
    assert 0 < min(values) < 40.0
    with pytest.raises(InputError):
        TraceReplay.of("alibaba2018", 10**6, 86400, 40.0)


def test_every_named_scenario_builds() -> None:
    for name in SCENARIOS:
        built = scenario(name, 1.0)
        assert built.duration == 3600
        assert built.services and built.loads


def test_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(
        json.dumps(
            {
                "name": "mine",
                "pools": [{"name": "general", "node_type": "e2-standard-4", "max": 10}],
                "hours": 2,
                "applications": [
                    {"app": "sock-shop", "copies": 2, "trace": "google2019", "peak": 30},
                    {"app": "php-apache", "pattern": "wide-peaks"},
                ],
            }
        )
    )
    built = scenario(str(path))
    assert built.duration == 7200
    assert set(built.loads) == {"sock-shop-1", "sock-shop-2", "php-apache-1"}
    path.write_text(json.dumps({"name": "bad"}))
    with pytest.raises(InputError, match="pools"):
        scenario(str(path))
