"""``tuner simulate`` / ``tuner demo`` outputs and flags under hostile conditions (issues 27 and
28): targets that could not be written are refused before simulating, outputs get the mode a
plain write gives (the README keeps its own), progress shows without a terminal, the plot's
title wraps, and out-of-range ``--hours`` and ``--speed`` are refused with their range."""

from __future__ import annotations

import itertools
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from testkit.filesystems import small_disk, umask
from tuner.cli import main
from tuner.sim.plots import draw
from tuner.sim.report import comparison, run
from tuner.sim.scenario_file import build

TINY: dict[str, Any] = {
    "name": "tiny",
    "hours": 0.05,
    "system_pods": False,
    "pools": [{"name": "p", "node_type": "e2-standard-2", "min": 1, "max": 2, "initial": 1}],
    "services": [{"name": "a", "namespace": "n", "cpu": "250m", "memory": "256Mi"}],
}
README = "# R\n\n<!-- evaluation:begin -->\nold\n<!-- evaluation:end -->\n"


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.fixture
def umask_022() -> Iterator[None]:
    with umask(0o022):
        yield


def simulate(scenario: Path, *flags: str) -> int:
    return main(["simulate", "--scenario", str(scenario), "--strategy", "tuner", *flags])


def refused(capsys: pytest.CaptureFixture[str], code: int, expected: str) -> None:
    """Exit 2, one line naming the problem, nothing simulated (no table, no timing)."""
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1, lines
    assert expected in lines[0], lines[0]
    assert captured.out == ""


def test_outputs_get_the_umask_mode_and_the_readme_keeps_its_own(
    tmp_path: Path, scenario_file: Path, umask_022: None, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README)
    readme.chmod(0o664)
    out = tmp_path / "out"
    assert simulate(scenario_file, "--output", str(out), "--readme", str(readme)) == 0
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes == {"tiny.png": 0o644, "results.md": 0o644, "results.json": 0o644}
    assert stat.S_IMODE(readme.stat().st_mode) == 0o664
    assert "old" not in readme.read_text()


@pytest.mark.parametrize("where", ["under-a-file", "dangling-link", "file-link-in-output"])
def test_an_output_that_cannot_be_written_is_refused_before_simulating(
    tmp_path: Path, scenario_file: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").symlink_to(tmp_path / "file")
    target, expected = {
        "under-a-file": (tmp_path / "file" / "out", "/file', not a directory"),
        "dangling-link": (tmp_path / "dangling", "which does not exist"),
        "file-link-in-output": (tmp_path / "out", "results.json' is a link"),
    }[where]
    refused(capsys, simulate(scenario_file, "--output", str(target)), expected)
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.timeout(60)
def test_a_readme_that_is_a_fifo_or_a_device_is_refused_without_hanging(
    tmp_path: Path, scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "README.md"
    os.mkfifo(fifo)
    out = str(tmp_path / "out")
    refused(capsys, simulate(scenario_file, "--output", out, "--readme", str(fifo)), "a FIFO")
    code = simulate(scenario_file, "--output", out, "--readme", "/dev/zero")
    refused(capsys, code, "--readme: '/dev/zero' is a character device")
    assert not (tmp_path / "out").exists()


def test_a_full_or_read_only_disk_is_refused_before_simulating(
    tmp_path: Path, scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_disk(tmp_path / "full", "64k") as disk:
        code = simulate(scenario_file, "--output", str(disk / "out"))
        refused(capsys, code, "--output: no room for 1,048,576 bytes in")
        assert list(disk.iterdir()) == []
    with small_disk(tmp_path / "ro", read_only=True) as disk:
        code = simulate(scenario_file, "--output", str(disk / "out"))
        refused(capsys, code, "Read-only file system")


def test_without_a_terminal_progress_is_a_line_every_five_percent(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate(scenario_file) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("simulate: ")]
    shares = [int(line.split()[1]) for line in lines]
    assert shares[-1] == 100 and len(shares) >= 6, lines  # 2 runs of 0.55 h, told per 600 s
    assert all(b - a >= 5 for a, b in itertools.pairwise(shares)), shares
    assert lines[0].startswith("simulate: 15 % (0.2 of 1.1 simulated hours, ")
    assert lines[-1].endswith("; tiny tuner)"), lines[-1]


@pytest.mark.parametrize("hours", ["1e-300", "0", "0.001", "337", "nan"])
def test_hours_out_of_range_are_refused_with_the_range(
    scenario_file: Path, capsys: pytest.CaptureFixture[str], hours: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        simulate(scenario_file, "--hours", hours)
    refused(capsys, int(str(exit_info.value.code)), "hours must be in [0.01, 336]")


def test_the_shortest_run_and_a_cluster_that_costs_nothing_print_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = {**TINY, "pools": [{**TINY["pools"][0], "min": 0, "initial": 0}]}
    empty["services"] = [{**TINY["services"][0], "replicas": 0}]
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(empty))
    assert simulate(path, "--hours", "0.01") == 0
    assert "| lower bound | 0.00 | 0.000 USD | — |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--speed", "1e-300", "speed must be in [1, 3600]"),
        ("--speed", "1e300", "speed must be in [1, 3600]"),
        ("--speed", "inf", "speed must be in [1, 3600]"),
        ("--hours", "1e300", "hours must be in [0.01, 336]"),
    ],
)
def test_demo_refuses_speeds_and_hours_out_of_range(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, expected: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", flag, value])
    refused(capsys, int(str(exit_info.value.code)), expected)


def test_a_long_title_wraps_inside_the_plot() -> None:
    scenario = build({**TINY, "title": ("A title a scenario file may give, " * 6)[:200]})
    outcome = run(scenario, "autoscaler", 1)
    figure = draw(comparison(scenario, 1, (outcome,)))
    try:
        figure.canvas.draw()
        title = figure.axes[0].title
        box = title.get_window_extent()
        assert title.get_text().count("\n") == 2
        assert box.x0 >= 0 and box.x1 <= figure.bbox.width
    finally:
        plt.close(figure)
