"""``tuner run`` whose allocations can be traced, for :mod:`bench.daemon_soak --trace`.

    python -m bench.daemon_soak_child DUMP_PREFIX run --settings SETTINGS

Runs the CLI's ``main`` with the arguments after ``DUMP_PREFIX``. The first SIGUSR1 starts
tracemalloc (``FRAMES`` frames a trace: the imports and start-up are not traced, which under
tracemalloc take minutes on a loaded machine); every SIGUSR1 writes
``DUMP_PREFIX.N.types.json`` (live objects the garbage collector tracks, counted by type), and
every one after the first ``DUMP_PREFIX.N.snapshot`` too: what was allocated since the first
and is still alive. The bench sends the first after the warm-up and the second at the end.
"""

from __future__ import annotations

import gc
import itertools
import json
import signal
import sys
import tracemalloc
from collections import Counter
from pathlib import Path
from types import FrameType

FRAMES = 12


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
        types = Counter(type(o).__qualname__ for o in gc.get_objects())
        written = Path(f"{prefix}.{n}.types.json")
        partial = written.with_suffix(".partial")
        partial.write_text(json.dumps(dict(types)), encoding="utf-8")
        partial.replace(written)  # last, at once: the bench waits for this file

    signal.signal(signal.SIGUSR1, dump)
    from tuner.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
