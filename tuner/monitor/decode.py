"""A ``kubectl get -o json`` List decoded one item at a time, each pruned as soon as it is read.

A 1,000-node dump is about 200 MB of JSON, mostly ``managedFields``, statuses and volumes the
model never reads. Decoded whole it becomes a gigabyte of Python objects. Here ``msgspec`` first
splits the ``items`` array into raw byte slices (syntax checked, no objects built), then each
item is decoded alone and cut to the parsers' fields by :func:`tuner.monitor.prune.pruned`, so
one full item lives at a time. The cyclic garbage collector is paused meanwhile (JSON trees hold
no cycles, and its passes over the growing heap cost more than the decoding itself).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from tuner.errors import InputError
from tuner.monitor.prune import PRUNERS, pruned


class _List(msgspec.Struct):
    """A Kubernetes List: only ``items`` is read, each kept as its raw JSON text."""

    items: list[msgspec.Raw]


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of range (finite numbers only)")
    return value


_LIST = msgspec.json.Decoder(_List)
_ITEM = msgspec.json.Decoder(float_hook=_finite)


def list_items(data: bytes, name: str) -> list[Any]:
    """The items of the List in ``data``, pruned; ``name`` names the input in errors.

    Items of kinds the parsers ignore shrink to their ``kind``; an item that is not an object
    with a string ``kind`` is passed on as it is, for the parser to report with its index.
    """
    try:
        raw_items = _LIST.decode(data).items
    except msgspec.ValidationError:
        raise InputError(f"{name} is not a Kubernetes List (no 'items' array)") from None
    except msgspec.DecodeError as err:
        raise InputError(f"{name} is not valid JSON: {err}") from None
    except RecursionError:
        raise InputError(f"{name} nests too deep") from None
    return [_item(raw, index, name) for index, raw in enumerate(raw_items)]


def _item(raw: msgspec.Raw, index: int, name: str) -> Any:
    try:
        obj = _ITEM.decode(raw)
    except (msgspec.DecodeError, ValueError) as err:
        raise InputError(f"{name} item {index}: {err}") from None
    except RecursionError:
        raise InputError(f"{name} item {index} nests too deep") from None
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if not isinstance(kind, str):
        return obj
    return pruned(kind, obj) if kind in PRUNERS else {"kind": kind}


@contextmanager
def gc_paused(*, keep: bool = False) -> Iterator[None]:
    """Run the block without cyclic garbage collection (for building acyclic data in bulk);
    ``keep``: what exists at the end is frozen out of later collections' passes (data that
    lives until the process ends, such as the cluster a command plans on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if keep:
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
