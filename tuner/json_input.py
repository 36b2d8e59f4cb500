"""Untrusted JSON documents (settings, dumps, knowledge exports) read within fixed limits.

Every JSON file the tuner reads goes through :func:`read_json` (or :func:`parse_json` for text
already in memory), so the limits below are the only ones a user can hit and they live in one
place. Any breach is an :class:`~tuner.errors.InputError` naming the file and the limit.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO

from tuner.errors import InputError

MAX_BYTES = 256 * 2**20
"""Largest JSON document read (256 MiB: a 5,000-node cluster dump is about 100 MiB)."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects (a Kubernetes object nests about 15 deep)."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def read_json(path: Path | str, what: str, stream: BinaryIO | None = None) -> Any:
    """The JSON document in ``path`` (or ``stream``, e.g. stdin, named ``path``), checked
    against the limits; ``what`` names the input in errors (``settings``, ``dump``)."""
    try:
        if stream is not None:
            data = stream.read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as file:
                data = file.read(MAX_BYTES + 1)
    except OSError as err:
        raise InputError(f"cannot read {what} {path}: {err.strerror or err}") from err
    if len(data) > MAX_BYTES:
        raise InputError(f"{what} {path} is larger than {MAX_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{what} {path} is not UTF-8 (byte {err.start})") from None
    return parse_json(text, f"{what} {path}")


def parse_json(text: str, name: str) -> Any:
    """``text`` decoded as strict JSON: finite numbers only (no ``NaN``, ``Infinity`` or
    ``1e400``), nesting at most :data:`MAX_DEPTH` deep. Integers keep Python's limit of 4,300
    digits; each reader bounds the numbers it takes."""
    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise InputError(f"{name} nests {depth} levels deep, more than {MAX_DEPTH}")
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as err:
        raise InputError(f"{name} is not valid JSON: {err.msg} at line {err.lineno}") from None
    except ValueError as err:  # _NotFinite, or an integer of more than 4,300 digits
        raise InputError(f"{name}: {str(err).splitlines()[0]}") from None


class _NotFinite(ValueError):
    """A number JSON cannot hold, or one too large to be meant."""


def _constant(text: str) -> Any:
    raise _NotFinite(f"{text} is not a number (finite numbers only)")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotFinite(f"{text[:40]} is out of range (finite numbers only)")
    return value


def _depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (regular expressions, no recursion)."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(_STEP[b] for b in brackets), default=0)
