"""Give the heap a cycle freed back to the system (glibc's ``malloc_trim``).

A cycle allocates and frees tens of MB (the cluster's parsed objects, the forecast's arrays,
the knowledge base's rows). glibc keeps what is freed inside its heaps for reuse, and the holes
the next cycles leave between long-lived blocks add up to resident memory that creeps for
hundreds of cycles (``make bench-soak``, docs/performance.md). ``malloc_trim(0)`` at the end
of each cycle hands every free page of every arena back to the kernel. Where the C library is
not glibc (musl, macOS) there is no such call and the trim does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

Trim = Callable[[int], int]
"""``malloc_trim(pad)``: 1 when memory was returned to the system, 0 otherwise."""


def malloc_trim_of(library: Any) -> Trim | None:
    """``library``'s ``malloc_trim`` (a :class:`ctypes.CDLL`), or None when it has none."""
    try:
        trim = library.malloc_trim
    except AttributeError:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


@functools.cache
def process_trim() -> Trim | None:
    """The running process's ``malloc_trim`` (from the C library it is linked with), or None."""
    try:
        return malloc_trim_of(ctypes.CDLL(None))
    except (OSError, TypeError):  # no handle on the process's own symbols (Windows)
        return None


def trim_heap(trim: Trim | None) -> bool:
    """``trim(0)``: every free page back to the system; nothing when there is no ``trim``.
    True when memory was returned."""
    return trim is not None and trim(0) == 1
