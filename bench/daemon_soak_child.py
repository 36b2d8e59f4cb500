"""``tuner run`` whose allocations can be traced, for :mod:`bench.daemon_soak --trace`.

    python -m bench.daemon_soak_child DUMP_PREFIX run --settings SETTINGS

Runs the CLI's ``main`` with the arguments after ``DUMP_PREFIX``. The first SIGUSR1 starts
tracemalloc (``FRAMES`` frames a trace: the imports and start-up are not traced, which under
tracemalloc take minutes on a loaded machine); every SIGUSR1 writes
``DUMP_PREFIX.N.types.json`` (live objects the garbage collector tracks, counted by type, and
where the memory is: :func:`memory`), and
every one after the first ``DUMP_PREFIX.N.snapshot`` too: what was allocated since the first
and is still alive. The bench sends the first after the warm-up and the second at the end.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import itertools
import json
import os
import signal
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

FRAMES = 12
MEMORY = "(memory)"
"""The key of :func:`memory`'s figures in the types file."""


def memory(scratch: str) -> dict[str, float]:
    """Where the process's memory is, in MB: resident, glibc malloc's heap over every arena
    (``malloc_stats``' totals: obtained from the system, and in use), SQLite's own allocations
    (``sqlite3_memory_used``, the library the ``sqlite3`` module links against), and what
    tracemalloc's own tables take (part of malloc's in-use figure while it traces)."""
    with open("/proc/self/status", encoding="ascii") as status:
        rss = next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))
    libc = ctypes.CDLL(None)
    saved = os.dup(2)
    with open(scratch, "wb") as out:  # malloc_stats prints to stderr
        os.dup2(out.fileno(), 2)
        try:
            libc.malloc_stats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    totals = Path(scratch).read_text(errors="replace").split("Total (incl. mmap):")[-1]
    system, in_use = (int(line.split("=")[1]) for line in totals.strip().splitlines()[:2])
    sqlite = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    return {
        "rss": rss,
        "malloc_system": system / 2**20,
        "malloc_in_use": in_use / 2**20,
        "sqlite": sqlite.sqlite3_memory_used() / 2**20,
        "tracemalloc_itself": tracemalloc.get_tracemalloc_memory() / 2**20,
    }


def main() -> int:
    prefix = sys.argv[1]
    dumps = itertools.count(1)

    def dump(_number: int, _frame: FrameType | None) -> None:
        n = next(dumps)
        gc.collect()
        if tracemalloc.is_tracing():
            tracemalloc.take_snapshot().dump(f"{prefix}.{n}.snapshot")
        else:
            tracemalloc.start(FRAMES)
        types: dict[str, Any] = dict(Counter(type(o).__qualname__ for o in gc.get_objects()))
        types[MEMORY] = memory(f"{prefix}.{n}.malloc")
        written = Path(f"{prefix}.{n}.types.json")
        partial = written.with_suffix(".partial")
        partial.write_text(json.dumps(types), encoding="utf-8")
        partial.replace(written)  # last, at once: the bench waits for this file

    signal.signal(signal.SIGUSR1, dump)
    from tuner.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
