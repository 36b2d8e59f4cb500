"""One field of a Kubernetes API object read within limits: its metadata, a string, a list, a
map of strings, a whole number, resource amounts, a label selector; each refuses a value of the
wrong shape with an :class:`~tuner.errors.InputError` naming the field (the parsers of
:mod:`tuner.monitor.dump` name the object)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tuner.errors import InputError
from tuner.model.constraints import LabelSelector, Requirement, freeze_labels
from tuner.model.quantity import MAX_COUNT, amount, cpu_millis, memory_bytes
from tuner.model.resources import Resources
from tuner.monitor.prune import OBJECT
from tuner.redact import shown

Obj = Mapping[str, Any]
"""An API object, or a part of one, as parsed JSON."""


def metadata(obj: Obj) -> tuple[Obj, str]:
    """The object's ``metadata`` and its name, both checked."""
    meta = obj.get("metadata")
    if not isinstance(meta, OBJECT):
        raise InputError("metadata is missing or not an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"metadata.name is {name!r}, not a name")
    namespace = meta.get("namespace", "default")
    if not isinstance(namespace, str):
        raise InputError(f"metadata.namespace is {namespace!r}, not a name")
    return meta, name


def whole(value: Any, field: str, most: int = MAX_COUNT) -> int:
    """A whole number in 0..most (a count in an object)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise InputError(f"{field} is {value!r}, not a whole number in 0..{most}")
    return value


def frozen(mapping: Any, field: str = "metadata.labels") -> Mapping[str, str]:
    """Labels, annotations, a node selector: strings to strings."""
    mapping = mapping or {}
    if not isinstance(mapping, OBJECT) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise InputError(f"{field} is not a map of strings")
    return MappingProxyType(dict(mapping))


def text(value: Any, field: str) -> str:
    """A field that must be a string (a list or a map there is refused, never hashed later)."""
    if not isinstance(value, str):
        raise InputError(f"{field} is {shown(value)}, not a string")
    return value


def texts(values: Any, field: str) -> tuple[str, ...]:
    """A field that must be a list of strings (null: empty)."""
    values = values or ()
    if not isinstance(values, list | tuple):
        raise InputError(f"{field} is {shown(values)}, not a list of strings")
    return tuple(text(v, f"{field}[{i}]") for i, v in enumerate(values))


def objects(values: Any, field: str) -> list[Obj]:
    """A field that must be a list of objects (null: empty)."""
    values = values or ()
    if not isinstance(values, list | tuple) or not all(isinstance(v, OBJECT) for v in values):
        raise InputError(f"{field} is {shown(values)}, not a list of objects")
    return list(values)


def resources(values: Any) -> Resources:
    values = values or {}
    if not isinstance(values, OBJECT):
        raise InputError(f"resources {values!r} are not a map")
    return Resources(
        cpu_millis(values["cpu"]) if "cpu" in values else 0,
        memory_bytes(values["memory"]) if "memory" in values else 0,
    )


CORE_RESOURCES = ("cpu", "memory")


def scalars(values: Any, field: str, also: tuple[str, ...] = ()) -> dict[str, int]:
    """The resources of a requests or allocatable map other than CPU, memory and ``also``,
    as whole amounts."""
    if not values:
        return {}
    if not isinstance(values, OBJECT):
        raise InputError(f"{field} is not a map")
    if len(values) == ("cpu" in values) + ("memory" in values) + sum(k in values for k in also):
        return {}
    out: dict[str, int] = {}
    for name, value in values.items():
        if name not in CORE_RESOURCES and name not in also:
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise InputError(f"{field}.{name} is {value!r}, not a quantity")
            out[str(name)] = amount(value)
    return out


def requirements(expressions: Any, field: str) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(
            text(e.get("key"), f"{field}[{i}].key"),
            text(e.get("operator"), f"{field}[{i}].operator"),
            texts(e.get("values"), f"{field}[{i}].values"),
        )
        for i, e in enumerate(objects(expressions, field))
    )


def label_selector(obj: Obj | None, field: str = "selector") -> LabelSelector:
    """A LabelSelector from its API form (``field`` names it in errors)."""
    obj = obj or {}
    if not isinstance(obj, OBJECT):
        raise InputError(f"{field} is {shown(obj)}, not an object")
    return LabelSelector(
        freeze_labels(frozen(obj.get("matchLabels"), f"{field}.matchLabels")),
        requirements(obj.get("matchExpressions"), f"{field}.matchExpressions"),
    )


def listed(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{field} is not a list")
    return value
