"""Issue 28, worst 2: no regular expression or loop over untrusted text takes time worse than
linear in it. Each check gets 1 MiB of the shape that was worst for it and must finish within
one second of this process's CPU time.

The bound is generous on purpose, not a benchmark: every input here takes well under 0.2 s
now, while the quadratic forms they replace took 20 s at 80 KB and never finished at 1 MiB (a
quadratic scan of 1 MiB is ~10^12 steps). CPU time, not wall time, so that a loaded machine
cannot fail the test; speed targets themselves live in ``bench/``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import pytest

from tuner.arguments import duration
from tuner.cli import _fail
from tuner.errors import InputError
from tuner.json_input import parse_json
from tuner.model.quantity import cpu_millis
from tuner.redact import printable, redact_url
from tuner.settings import settings_from_dict

MIB = 2**20
BOUND_S = 1.0


def _cpu_seconds(check: Callable[[], object]) -> float:
    started = time.process_time()
    check()
    return time.process_time() - started


def _refused(call: Callable[[], object], *errors: type[Exception]) -> Callable[[], None]:
    def check() -> None:
        with pytest.raises(errors or (InputError,)):
            call()

    return check


UNTERMINATED = '"' + '\\"' * (MIB // 2)
"""A string that never ends, made of escaped quotes: every quote started a new scan."""

CASES: dict[str, Callable[[], object]] = {
    "json depth: an unterminated string of escaped quotes": _refused(
        lambda: parse_json(UNTERMINATED, "settings x")
    ),
    "json depth: a valid document of one long string": lambda: parse_json(
        '["' + "\\u0041[" * (MIB // 7) + '"]', "settings x"
    ),
    "json depth: unterminated strings in brackets": _refused(
        lambda: parse_json('["\\' * (MIB // 3), "settings x")
    ),
    "redaction: letters (a scheme that never reaches ://)": lambda: redact_url("a" * MIB),
    "redaction: schemes without a user": lambda: redact_url("a://" * (MIB // 4)),
    "redaction: user information without an end": lambda: redact_url("a://" + "b:" * (MIB // 2)),
    "redaction: many @ after one ://": lambda: redact_url("h://" + "@" * MIB),
    "redaction: a log line of letters and spaces": lambda: redact_url("ab " * (MIB // 3)),
    "printable: control characters": lambda: printable("\x1b\r\u2028" * (MIB // 3)),
    "one-line error of 1 MiB": lambda: _fail("x://" + "é\x1b" * (MIB // 2)),
    "--older-than: digits then spaces": _refused(
        lambda: duration("1" + " " * MIB + "x"), argparse.ArgumentTypeError
    ),
    "quantity of 1 MiB": _refused(lambda: cpu_millis("1" * MIB)),
    "settings: an unknown key of 1 MiB": _refused(lambda: settings_from_dict({"k" * MIB: 1})),
    "settings: a 1 MiB label prefix": _refused(
        lambda: settings_from_dict({"execute": {"label_prefix": "a" * MIB + "\n"}})
    ),
    "settings: a 1 MiB scope": _refused(
        lambda: settings_from_dict({"windows": {"scope": "a" * MIB}})
    ),
}


@pytest.mark.timeout(60)  # a quadratic regression fails here instead of hanging the run
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_mebibyte_of_the_worst_shape_takes_linear_time(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seconds = _cpu_seconds(CASES[name])
    capsys.readouterr()
    assert seconds < BOUND_S, f"{name}: {seconds:.2f} s of CPU"
