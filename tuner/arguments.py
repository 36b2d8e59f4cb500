"""Numbers on the command line: each parser takes only finite values within sane bounds, or
raises the ``argparse`` error that the CLI prints as one line with exit status 2."""

from __future__ import annotations

import argparse
import re

MAX_LOAD = 1e12
"""Largest load (requests per second, or any rate a load query returns)."""
MAX_SECONDS = 10 * 366 * 86400
"""Longest window or age: ten years."""
MAX_COUNT = 1_000_000
"""Largest count (``--limit``, ``--keep``)."""
MAX_HOURS = 24 * 14
"""Longest simulation (``tuner simulate --hours``, ``tuner demo --hours``): two weeks."""
MIN_HOURS = 0.01
"""Shortest simulation: 36 s, a few of the simulator's 5-second ticks (less records nothing to
compare)."""
MAX_SPEED = 3600.0
"""Fastest ``tuner demo``: a simulated hour per second. Faster, the simulated clock outruns the
simulation (each cycle has more to simulate than the last, without end) and the take-back job
fires more often than a cycle can finish."""
MAX_JOBS = 64
"""Most simulations at once (``tuner simulate --jobs``)."""
MAX_PHASES = 60
"""Most phases of ``tuner simulate --phases``: a 10-minute window's worth, 10 s apart."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be a number, not {text!r}") from None
    return value


def load(text: str) -> float:
    """A load: a finite number in 0..:data:`MAX_LOAD`."""
    value = _number(text, "load")
    if not 0 <= value <= MAX_LOAD:
        raise argparse.ArgumentTypeError(
            f"load must be a finite number >= 0 and <= {MAX_LOAD:g}, not {text!r}"
        )
    return value


def seconds(text: str) -> float:
    """A length of time in seconds: > 0 and at most :data:`MAX_SECONDS`."""
    value = _number(text, "window")
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"window must be > 0 and <= {MAX_SECONDS} seconds, not {text!r}"
        )
    return value


def duration(text: str) -> float:
    """``90``, ``3600s``, ``30m``, ``12h``, ``30d``, ``2w`` -> seconds (at most ten years)."""
    # Stripped first: "\s*" on both sides of an optional unit backtracks quadratically.
    match = re.fullmatch(r"(\d{1,12}(?:\.\d{1,6})?)\s*([smhdw]?)", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"a duration is like 30d, 12h or 3600s, not {text!r}")
    value = float(match[1]) * _UNITS[match[2] or "s"]
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"a duration is at most ten years, not {text!r}")
    return value


def count(text: str) -> int:
    """A whole number in 0..:data:`MAX_COUNT`."""
    digits = text.strip()
    whole = digits.isascii() and digits.isdigit() and len(digits) <= 7
    value = int(digits) if whole else -1
    if not 0 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected a whole number in 0..{MAX_COUNT}, not {text!r}")
    return value


def hours(text: str) -> float:
    """Simulated hours: within :data:`MIN_HOURS` .. :data:`MAX_HOURS`."""
    value = _number(text, "hours")
    if not MIN_HOURS <= value <= MAX_HOURS:
        raise argparse.ArgumentTypeError(
            f"hours must be in [{MIN_HOURS:g}, {MAX_HOURS}], not {text!r}"
        )
    return value


def speed(text: str) -> float:
    """Simulated seconds per wall second (``tuner demo --speed``): 1 .. :data:`MAX_SPEED`."""
    value = _number(text, "speed")
    if not 1 <= value <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"speed must be in [1, {MAX_SPEED:g}], not {text!r}")
    return value


def jobs(text: str) -> int:
    """Simulations at once: a whole number in 1..:data:`MAX_JOBS`."""
    return _whole(text, "jobs", MAX_JOBS)


def phases(text: str) -> int:
    """Phases of the phase spread (``tuner simulate --phases``): 1..:data:`MAX_PHASES`."""
    return _whole(text, "phases", MAX_PHASES)


def _whole(text: str, name: str, most: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name} must be a whole number, not {text!r}") from None
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"{name} must be in 1..{most}, not {text!r}")
    return value
