"""``tuner run`` whose memory can be looked into, for :mod:`bench.daemon_soak` (``--trace``,
``--probe``).

    python -m bench.daemon_soak_child plain|trace|probe|leak=BYTES DUMP_PREFIX run --settings S

Runs the CLI's ``main`` with the arguments after ``DUMP_PREFIX``. As each cycle ends (before
the daemon counts it in its metrics) it writes SQLite's own allocations, in bytes, to
``DUMP_PREFIX.sqlite``: the page cache of the knowledge base, which grows with the store up to
its bound (:data:`bench.daemon_soak.SQLITE_CACHE_MB`). Every SIGUSR1 runs a full
collection and writes ``DUMP_PREFIX.N.types.json``: live objects the garbage collector tracks,
counted by type (and weak references by what they point to, the dead ones by who holds them),
where the memory is (:func:`memory`), how many full collections the daemon had run before and
how many unreachable objects this one found (cyclic garbage left between full collections).

``trace``: the first SIGUSR1 also starts tracemalloc (``FRAMES`` frames a trace: the imports
and start-up are not traced, which under tracemalloc take minutes on a loaded machine), and
every one after the first writes ``DUMP_PREFIX.N.snapshot`` too: what was allocated since the
first and is still alive. ``probe``: no tracemalloc (whose own tables grow with every new
traceback), so the figures are the daemon's, but for what the dumps themselves allocate (the
list of every object: a few MB of heap the first time, reused by the later ones).
``leak=BYTES``: the daemon keeps a block of ``BYTES`` more at the end of every cycle, a leak
put there to show that the bench's judgement catches one.
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
import threading
import tracemalloc
import weakref
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

FRAMES = 12
MEMORY = "(memory)"
"""The key of :func:`memory`'s figures in the types file."""
COUNTS = frozenset(
    {
        "malloc_arenas",
        "pymalloc_arenas",
        "threads",
        "gc_objects",
        "gc_full_collections",
        "gc_unreachable",
    }
)
"""Those of :data:`MEMORY`'s figures that are counts, not MB."""


def _stderr_of(call: Callable[[], object], scratch: str) -> str:
    """What ``call`` prints on the process's stderr (file descriptor 2)."""
    saved = os.dup(2)
    with open(scratch, "wb") as out:
        os.dup2(out.fileno(), 2)
        try:
            call()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return Path(scratch).read_text(errors="replace")


def _figure(text: str, label: str) -> int:
    """The number after ``=`` on the line of ``text`` that starts with ``label``."""
    line = next(line for line in text.splitlines() if line.startswith(label))
    return int(line.split("=")[1].replace(",", ""))


def _mappings() -> dict[str, float]:
    """Resident kB by kind of mapping (``/proc/self/smaps``): the brk heap, thread stacks and
    other anonymous memory (glibc's other arenas, pymalloc's arenas, large blocks), files."""
    kinds = {"heap": 0, "anon": 0, "file": 0}
    kind = "anon"
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as smaps:
        for line in smaps:
            head = line.split(None, 6)
            if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                path = head[5].strip() if len(head) > 5 else ""
                kind = "heap" if path == "[heap]" else "file" if path.startswith("/") else "anon"
            elif line.startswith("Rss:"):
                kinds[kind] += int(line.split()[1])
    return {f"rss_{kind}": kb / 1024 for kind, kb in kinds.items()}


def memory(scratch: str) -> dict[str, float]:
    """Where the process's memory is, in MB: resident (in all and by kind of mapping), glibc
    malloc's heap over every arena (``malloc_stats``' totals: obtained from the system, and in
    use; and the number of arenas), pymalloc's (CPython's small-object allocator: its 1 MiB
    arenas held, and the bytes in blocks in use), SQLite's own allocations
    (``sqlite3_memory_used``, the library the ``sqlite3`` module links against), what
    tracemalloc's own tables take (part of malloc's in-use figure while it traces), and the
    number of threads."""
    with open("/proc/self/status", encoding="ascii") as status:
        rss = next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))
    libc = ctypes.CDLL(None)
    stats = _stderr_of(libc.malloc_stats, scratch)
    totals = stats.split("Total (incl. mmap):")[-1]
    system, in_use = (int(line.split("=")[1]) for line in totals.strip().splitlines()[:2])
    pymalloc = _stderr_of(sys._debugmallocstats, scratch)
    return {
        "rss": rss,
        **_mappings(),
        "malloc_system": system / 2**20,
        "malloc_in_use": in_use / 2**20,
        "malloc_arenas": stats.count("Arena "),
        "pymalloc_arenas": _figure(pymalloc, "# arenas allocated current"),
        "pymalloc_in_use": _figure(pymalloc, "# bytes in allocated blocks") / 2**20,
        "sqlite": sqlite_bytes() / 2**20,
        "tracemalloc_itself": tracemalloc.get_tracemalloc_memory() / 2**20,
        "threads": threading.active_count(),
        "gc_objects": len(gc.get_objects()),
    }


def holder(ref: object, ignore: tuple[object, ...]) -> str:
    """What holds ``ref`` (but the ``ignore`` lists): its referrers' types, and for a dict, a
    set or a list, who holds that."""

    def held(o: object) -> bool:
        return not isinstance(o, FrameType) and all(o is not i for i in ignore)

    found = []
    for r in filter(held, gc.get_referrers(ref)):
        name = type(r).__qualname__
        if isinstance(r, (dict, set, list)):
            outer = [type(o).__qualname__ for o in filter(held, gc.get_referrers(r))]
            name += f" in {'/'.join(sorted(set(outer))[:3])}"
        found.append(name)
    return ", ".join(sorted(found)) or "nothing tracked"


def sqlite_bytes() -> int:
    """``sqlite3_memory_used()`` of the SQLite library the ``sqlite3`` module links against."""
    sqlite = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    return int(sqlite.sqlite3_memory_used())


def count_sqlite(path: Path) -> None:
    """Make the daemon write :func:`sqlite_bytes` to ``path`` as each cycle ends."""
    from tuner.daemon.run import Daemon

    on_cycle = Daemon._on_cycle
    partial = path.with_suffix(".partial")

    def counting(self: Daemon, report: Any, seconds: float) -> None:
        partial.write_text(str(sqlite_bytes()), encoding="ascii")
        partial.replace(path)
        on_cycle(self, report, seconds)

    Daemon._on_cycle = counting  # type: ignore[method-assign]


def leak(size: int) -> None:
    """Make the daemon keep ``size`` bytes more (a block of glibc's heap) after every cycle."""
    from tuner.daemon.run import Daemon

    kept: list[bytearray] = []
    on_cycle = Daemon._on_cycle

    def leaking(self: Daemon, report: Any, seconds: float) -> None:
        kept.append(bytearray(size))
        on_cycle(self, report, seconds)

    Daemon._on_cycle = leaking  # type: ignore[method-assign]


def main() -> int:
    mode, prefix = sys.argv[1:3]
    dumps = itertools.count(1)

    def dump(_number: int, _frame: FrameType | None) -> None:
        n = next(dumps)
        full = gc.get_stats()[2]["collections"]
        found = gc.collect()
        if tracemalloc.is_tracing():
            tracemalloc.take_snapshot().dump(f"{prefix}.{n}.snapshot")
        elif mode == "trace":
            tracemalloc.start(FRAMES)
        live = gc.get_objects()
        types: dict[str, Any] = dict(Counter(type(o).__qualname__ for o in live))
        types.update(  # what the weak references point to ("weakref -> T")
            Counter(
                f"weakref -> {type(o()).__qualname__}" for o in live if isinstance(o, weakref.ref)
            )
        )
        dead = [o for o in live if isinstance(o, weakref.ref) and o() is None]
        types.update(  # who holds the weak references whose referent is gone
            Counter(f"dead weakref held by {holder(o, (live, dead))}" for o in dead)
        )
        del live, dead
        types[MEMORY] = memory(f"{prefix}.{n}.malloc") | {
            "gc_full_collections": full,
            "gc_unreachable": found,
        }
        written = Path(f"{prefix}.{n}.types.json")
        partial = written.with_suffix(".partial")
        partial.write_text(json.dumps(types), encoding="utf-8")
        partial.replace(written)  # last, at once: the bench waits for this file

    signal.signal(signal.SIGUSR1, dump)
    count_sqlite(Path(f"{prefix}.sqlite"))
    if mode.startswith("leak="):
        leak(int(mode.removeprefix("leak=")))
    from tuner.cli import main as cli

    return cli(sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
