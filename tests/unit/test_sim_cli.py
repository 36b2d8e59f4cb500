"""``tuner simulate`` end to end on a short run: table on stdout, plot and results on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.cli import main


def test_simulate_short_run_writes_table_plot_and_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["simulate", "--scenario", "thesis-narrow", "--hours", "0.5", "--output", str(tmp_path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "| CA alone |" in out
    assert "| CA + 2019 tuner |" in out
    assert "| CA + tuner |" in out
    assert "| lower bound |" in out
    assert (tmp_path / "thesis-narrow.png").stat().st_size > 10_000
    (result,) = json.loads((tmp_path / "results.json").read_text())
    assert set(result["strategies"]) == {"autoscaler", "tuner2019", "tuner"}


def test_same_seed_gives_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--scenario", "thesis-wide", "--hours", "0.5", "--seed", "3"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first


def test_unknown_scenario_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--scenario", "no-such-scenario"]) == 2
    assert "unknown scenario" in capsys.readouterr().err
