"""``tuner demo``: the real moderator loop on the simulated cluster, end to end."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tuner.cli import main

RUN = "from tuner.cli import main; raise SystemExit(main({args!r}))"


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    code = RUN.format(args=["demo", *args])
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )


def test_demo_prints_each_cycle_and_the_transitions_it_carries_out() -> None:
    done = demo("--hours", "1.5", "--speed", "1800")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("tuner demo: Online Boutique x3")
    # the six nodes the peak left are each above the autoscaler's 50 %: the tuner empties one
    assert "decision: remove_nodes" in out
    assert "remove_node  pool-" in out
    assert "migrate" in out
    assert "stayed" in out  # the first window only starts the candidate-delay timers
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("done: ")
    actions = re.search(r"; (\d+) actions carried out; (\d+) stable deployments", summary)
    assert actions is not None
    assert int(actions[1]) > 0 and int(actions[2]) > 0
    assert "Traceback" not in done.stderr
    # every deployment it recorded reads back: no window starts before the simulation's time 0
    assert "skipping malformed execution" not in done.stderr


def test_demo_stops_when_its_reader_goes_away() -> None:
    code = RUN.format(args=["demo", "--hours", "24", "--speed", "600"])
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("tuner demo:")
        process.stdout.close()  # like `tuner demo | head -1`
        try:
            assert process.wait(timeout=600) == 0
        finally:
            process.kill()


def test_bad_speed_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--speed", "0"])
    assert exit_info.value.code == 2
    assert "speed must be in [1, 3600]" in capsys.readouterr().err


def test_unknown_scenario_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--scenario", "no-such-scenario"]) == 2
    assert "unknown scenario" in capsys.readouterr().err
