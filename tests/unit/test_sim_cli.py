"""``tuner simulate`` end to end on a short run: table on stdout, plot and results on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.sim.strategies import STRATEGIES


def test_simulate_short_run_writes_table_plot_and_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["simulate", "--scenario", "thesis-narrow", "--hours", "0.5", "--output", str(tmp_path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    for label in (
        "CA alone",
        "CA + MostAllocated",
        "CA + descheduler",
        "Karpenter",
        "CA + 2019 tuner",
        "CA + tuner",
    ):
        assert f"| {label} |" in out
    assert "| lower bound |" in out
    assert (tmp_path / "thesis-narrow.png").stat().st_size > 10_000
    (result,) = json.loads((tmp_path / "results.json").read_text())
    assert set(result["strategies"]) == set(STRATEGIES)
    assert "room" in result and "| room captured |" in out
    assert result["strategies"]["tuner"]["forecast_error"]["forecasts"] >= 1
    assert "forecast_error" not in result["strategies"]["autoscaler"]


def test_same_seed_gives_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--scenario", "thesis-wide", "--hours", "0.5", "--seed", "3"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first


def test_unknown_scenario_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--scenario", "no-such-scenario"]) == 2
    assert "unknown scenario" in capsys.readouterr().err


def test_readme_section_between_the_markers_is_regenerated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n<!-- evaluation:begin -->\nstale table\n<!-- evaluation:end -->\n\nafter\n"
    )
    out = tmp_path / "docs" / "evaluation"
    args = ["simulate", "--scenario", "thesis-wide", "--hours", "0.25", "--output", str(out)]
    assert main([*args, "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "stale table" not in text
    assert text.startswith("# Title\n\n<!-- evaluation:begin -->\n#### Thesis pattern 1")
    assert "| CA + tuner |" in text
    assert "![thesis-wide](docs/evaluation/thesis-wide.png)" in text
    assert text.endswith("<!-- evaluation:end -->\n\nafter\n")


def test_readme_without_markers_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    args = ["simulate", "--scenario", "thesis-wide", "--hours", "0.25"]
    assert main([*args, "--output", str(tmp_path), "--readme", str(readme)]) == 2
    assert "no <!-- evaluation:begin -->" in capsys.readouterr().err
    assert readme.read_text() == "# no markers\n"


def test_worker_processes_give_the_same_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--scenario", "thesis-narrow", "--hours", "0.25"]
    assert main(args) == 0
    alone = capsys.readouterr().out
    assert main([*args, "--jobs", "2"]) == 0
    assert capsys.readouterr().out == alone
