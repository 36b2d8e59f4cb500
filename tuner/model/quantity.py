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
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)

GIB = 2**30


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
        return number * Fraction(10) ** int(match["exp"][1:])
    suffix = match["suffix"] or ""
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


@lru_cache(maxsize=8192, typed=True)
def cpu_millis(text: str | int | float) -> int:
    """CPU quantity in millicores, rounded up as Kubernetes does."""
    return math.ceil(parse_quantity(text) * 1000)


@lru_cache(maxsize=8192, typed=True)
def memory_bytes(text: str | int | float) -> int:
    """Memory (or any count) quantity in whole units, rounded up as Kubernetes does."""
    return math.ceil(parse_quantity(text))


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
