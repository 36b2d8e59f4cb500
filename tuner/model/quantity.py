"""Kubernetes resource quantities parsed exactly into integers (millicores, bytes, counts)."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from tuner.errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d{1,40}\.?\d{0,40}|\.\d{1,40}))"
    r"(?:(?P<exp>[eE][+-]?\d{1,3})|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)
"""Kubernetes' quantity syntax, with at most 40 digits either side of the point and a
three-digit exponent, so that no text makes a giant number."""

GIB = 2**30
MAX_EXPONENT = 30
"""Largest decimal exponent taken (``1e30``); 2**63, Kubernetes' own bound, is below 1e19."""
MAX_CPU_MILLIS = 4096 * 1000
MAX_MEMORY_BYTES = 64 * 2**40
"""The largest CPU and memory a quantity may give: 4,096 cores and 64 TiB. AWS's largest
High Memory instances have 24 TiB (AWS EC2 user guide, "Memory optimized instances"); the CPU
bound is a generous ceiling to match. A request beyond them is a mistake, not a real node."""
MAX_COUNT = 1_000_000
"""The largest count a quantity may give (pods per node: the kubelet's default is 110)."""


def parse_quantity(text: str | int | float) -> Fraction:
    """Parse any Kubernetes quantity form (``100m``, ``0.5``, ``1Gi``, ``1G``, ``1e9``) exactly."""
    if isinstance(text, bool):
        raise InputError(f"invalid quantity {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise InputError(f"invalid quantity {text!r}")
        return Fraction(str(text))
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise InputError(f"invalid quantity {text!r}")
    number = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > MAX_EXPONENT:
            raise InputError(f"quantity {text!r}: exponent beyond ±{MAX_EXPONENT}")
        return number * Fraction(10) ** exponent
    suffix = match["suffix"] or ""
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def _bounded(text: str | int | float, scale: int, most: int, unit: str) -> int:
    """``text`` times ``scale``, rounded up as Kubernetes does, within ``0..most``."""
    if isinstance(text, int) and not isinstance(text, bool) and not 0 <= text <= most:
        raise InputError(f"quantity {text!r} is outside 0..{most} {unit}")
    value = math.ceil(parse_quantity(text) * scale)
    if not 0 <= value <= most:
        raise InputError(f"quantity {text!r} is outside 0..{most} {unit}")
    return value


@lru_cache(maxsize=8192, typed=True)
def cpu_millis(text: str | int | float) -> int:
    """CPU quantity in millicores (at most :data:`MAX_CPU_MILLIS`)."""
    return _bounded(text, 1000, MAX_CPU_MILLIS, "millicores")


@lru_cache(maxsize=8192, typed=True)
def memory_bytes(text: str | int | float) -> int:
    """Memory quantity in bytes (at most :data:`MAX_MEMORY_BYTES`)."""
    return _bounded(text, 1, MAX_MEMORY_BYTES, "bytes")


def count(text: str | int | float) -> int:
    """A count given as a quantity, e.g. a node's ``pods`` (at most :data:`MAX_COUNT`)."""
    return _bounded(text, 1, MAX_COUNT, "")


@lru_cache(maxsize=1024, typed=True)
def amount(text: str | int | float) -> int:
    """A resource other than CPU (an extended resource such as ``nvidia.com/gpu``, storage,
    huge pages) in whole units, rounded up (at most :data:`MAX_MEMORY_BYTES`)."""
    return _bounded(text, 1, MAX_MEMORY_BYTES, "")


def format_cpu(millis: int) -> str:
    """Millicores as a short Kubernetes quantity (``2``, ``250m``)."""
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis}m"


def format_memory(value: int) -> str:
    """Bytes as a short binary quantity (``1Gi``, ``512Mi``, ``1536Ki``)."""
    for suffix, factor in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value and value % factor == 0:
            return f"{value // factor}{suffix}"
    if value >= 2**30:
        return f"{value / 2**30:.2f}Gi"
    return str(value)
