"""Untrusted JSON documents (settings, knowledge exports) read within fixed limits.

The limits of every JSON input live here. Settings and exports go through :func:`read_json`;
cluster dumps, which can be a gigabyte, are split and decoded item by item by
:mod:`tuner.monitor.decode` within :data:`MAX_DUMP_BYTES`. Any breach is an
:class:`~tuner.errors.InputError` naming the file and the limit.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO

from tuner.errors import InputError

MAX_BYTES = 256 * 2**20
"""Largest settings file or knowledge export read (256 MiB)."""
MAX_DUMP_BYTES = 2**30
"""Largest cluster dump read (1 GiB: about 5,000 nodes with 30 pods each, at ~6.5 KB a pod);
dumps are decoded item by item by :mod:`tuner.monitor.decode`, finite numbers only."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects (a Kubernetes object nests about 15 deep)."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
"""A JSON string, or an unterminated one up to the end of the text: every character belongs to
at most one match and the alternatives never overlap, so the scan is linear (the form
``"(?:[^"\\]|\\.)*"`` re-scanned an unterminated string from each of its quotes: quadratic)."""
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def read_json(path: Path | str, what: str, stream: BinaryIO | None = None) -> Any:
    """The JSON document in ``path`` (or ``stream``, e.g. stdin, named ``path``), checked
    against the limits; ``what`` names the input in errors (``settings``, ``dump``)."""
    data = read_bounded(path, what, MAX_BYTES, stream)
    return parse_json(data.decode("utf-8"), f"{what} {path}")


def read_bounded(path: Path | str, what: str, limit: int, stream: BinaryIO | None = None) -> bytes:
    """The bytes of ``path`` (or ``stream``), refused when over ``limit`` or not UTF-8, or when
    ``path`` is a character device (``/dev/zero`` would be read to the limit; a pipe or a FIFO,
    such as ``<(kubectl get …)``, is read)."""
    try:
        if stream is not None:
            data = stream.read(limit + 1)
        else:
            with open(path, "rb") as file:
                mode = os.fstat(file.fileno()).st_mode
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                    raise InputError(f"{what} {path} is a device, not a file")
                data = file.read(limit + 1)
    except OSError as err:
        raise InputError(f"cannot read {what} {path}: {err.strerror or err}") from err
    if len(data) > limit:
        raise InputError(f"{what} {path} is larger than {limit // 2**20} MiB")
    require_utf8(data, f"{what} {path}")
    return data


def require_utf8(data: bytes, name: str) -> None:
    """Refuse ``data`` unless it is UTF-8 throughout, checked 16 MiB at a time (a dump's
    decoder skips the fields it does not read without looking at their bytes)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    step = 16 * 2**20
    try:
        for start in range(0, len(data), step):
            decoder.decode(data[start : start + step])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as err:
        raise InputError(f"{name} is not UTF-8 (byte {start + err.start})") from None


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
    """The deepest nesting of brackets outside strings (regular expressions, no recursion;
    linear in the length of ``text``)."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(_STEP[b] for b in brackets), default=0)
