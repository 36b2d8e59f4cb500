"""Provider commands (``execute.node_removal_command``, ``node_provision_command``) as real
processes: output that is not UTF-8, output without end, control characters on stderr, a
command that hangs or leaves a child behind. A success stays a success; a failure is one
clean line; memory and time stay bounded."""

from __future__ import annotations

import resource
import sys
import time

import pytest

from tuner.execute.command import KEEP, Captured, run_command
from tuner.execute.retry import ActionFailed

SH = "/bin/sh"


def test_a_successful_command_that_prints_bytes_that_are_not_utf8_succeeds() -> None:
    run_command([SH, "-c", r"printf 'node ok \377\376\n'; printf '\377' >&2"], "provision", 10)


def test_a_failure_is_one_line_with_control_characters_escaped() -> None:
    script = r"printf 'first\n'; printf 'out of \033[31mquota\a\r\342\200\250x \377\n' >&2; exit 3"
    with pytest.raises(ActionFailed) as failed:
        run_command([SH, "-c", script], "node removal command", 10)
    message = str(failed.value)
    assert message.isprintable()
    assert message == (
        "node removal command exited 3: out of \\x1b[31mquota\\x07\\r\\u2028x \ufffd"
    )


def test_a_long_error_line_is_cut() -> None:
    with pytest.raises(ActionFailed) as failed:
        run_command([SH, "-c", "head -c 100000 /dev/zero | tr '\\0' e >&2; exit 1"], "x", 10)
    assert len(str(failed.value)) < 400


def test_800_mb_of_output_keeps_only_its_ends_in_memory() -> None:
    """The peak memory of this process grows by far less than the output (``ru_maxrss`` is
    the process' high-water mark, in KiB on Linux)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_command([SH, "-c", "head -c 800000000 /dev/zero; head -c 800000 /dev/zero >&2"], "x", 120)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 50, grown_mib


def test_captured_keeps_the_first_and_last_bytes() -> None:
    captured = Captured()
    for _ in range(10):
        captured.feed(b"a" * KEEP)
    captured.feed(b"end")
    assert len(captured.head) == len(captured.tail) == KEEP
    assert captured.dropped == 8 * KEEP + 3
    assert captured.text().endswith("end") and "bytes not kept" in captured.text()


def test_a_command_that_hangs_is_ended_with_its_children() -> None:
    started = time.monotonic()
    with pytest.raises(ActionFailed, match="timed out after 1 s"):
        run_command([SH, "-c", "sleep 60 & sleep 60"], "provision", 1)
    assert time.monotonic() - started < 30


def test_a_child_left_behind_holding_the_output_does_not_hold_a_success() -> None:
    started = time.monotonic()
    run_command([SH, "-c", "sleep 60 & echo started"], "provision", 30)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/bin/true\x00"], r"/bin/true\\x00: embedded null byte"),
        (["/nonexistent/tool"], "No such file or directory"),
    ],
)
def test_a_command_that_cannot_start_is_a_failed_action(argv: list[str], message: str) -> None:
    with pytest.raises(ActionFailed, match=message):
        run_command(argv, "provision", 5)


def test_the_environment_is_passed() -> None:
    run_command(
        [sys.executable, "-c", "import os, sys; sys.exit(os.environ['TUNER_POOL'] != 'p')"],
        "provision",
        30,
        env={"TUNER_POOL": "p"},
    )
