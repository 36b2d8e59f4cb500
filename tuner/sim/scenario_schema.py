"""A scenario file's JSON Schema check (``tuner/sim/scenario.schema.json``), with one line per
problem naming the field (``pools[0].initial``) and its value, shortened."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

MAX_DIGITS = 40
"""Longest integer read (more digits are refused naming the field, before Python's own limit
of 4,300 digits would end the reading with no field named)."""

CONTROL = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Unicode categories no text of a scenario file may hold: control and format characters, line
and paragraph separators, lone surrogates."""


@cache
def schema() -> dict[str, Any]:
    """The scenario file's JSON Schema, shipped in the package."""
    text = resources.files("tuner.sim").joinpath("scenario.schema.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def _whole(_checker: Any, instance: Any) -> bool:
    """JSON Schema's ``integer`` as the simulator reads it: no ``2.0`` (the draft allows it),
    no boolean."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _whole),
)


class _LongInteger(str):
    """An integer of more than :data:`MAX_DIGITS` digits, kept as its text so that the check
    names its field."""


def parse_integer(text: str) -> int | _LongInteger:
    """A JSON integer, or its text when it is too long to read (``json.loads``' ``parse_int``)."""
    return _LongInteger(text) if len(text.lstrip("-")) > MAX_DIGITS else int(text)


def _where(path: Iterator[str | int] | Any) -> str:
    """A field's path as ``pools[0].initial``; odd keys quoted (``[' \\n']``), so one line."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(top level)"


def short(value: Any) -> str:
    """``repr(value)``, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def shortened(reason: str, value: Any) -> str:
    """``reason`` with ``value`` in it shortened (a message keeps its end: what is wrong)."""
    return reason.replace(repr(value), short(value))


def _unreadable(doc: Any, path: tuple[str | int, ...] = ()) -> str | None:
    """What is wrong with the first value the simulator cannot take, with its field: NaN, an
    infinity, an integer of more than :data:`MAX_DIGITS` digits, or text (a value or a key)
    with a control or format character (a newline would end the one-line error or the table's
    heading early, an escape sequence would reach the terminal)."""
    if isinstance(doc, _LongInteger):
        return f"{_where(path)}: an integer of {len(doc):,} digits is out of range"
    if isinstance(doc, float) and not math.isfinite(doc):
        return f"{_where(path)}: {short(doc)} is not a finite number"
    if isinstance(doc, str) and _controlled(doc):
        return f"{_where(path)}: {short(doc)} has a control character"
    items: Any = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        if isinstance(key, str) and _controlled(key):
            return f"{_where(path)}: key {short(key)} has a control character"
        found = _unreadable(value, (*path, key))
        if found is not None:
            return found
    return None


def _controlled(text: str) -> bool:
    return any(unicodedata.category(c) in CONTROL for c in text)


def _message(error: ValidationError) -> str:
    """One line: the field, its value (shortened) and the reason (whole, with the value in it
    shortened too)."""
    where = _where(error.absolute_path)
    if error.validator == "additionalProperties":
        rule: Any = error.schema
        instance: Any = error.instance
        unknown = sorted(k for k in instance if k not in rule.get("properties", {}))
        return f"{where}: unknown key {short(unknown[0])}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    reason = shortened(error.message.splitlines()[0], error.instance)
    return f"{where}: {short(error.instance)} is not allowed ({reason})"


def schema_problem(doc: Any) -> str | None:
    """The first value the simulator cannot read or the first field that breaks the schema, as
    one line; None when there is none."""
    bad = _unreadable(doc)
    if bad is not None:
        return bad
    error = best_match(_Validator(schema()).iter_errors(doc))
    return None if error is None else _message(error)
