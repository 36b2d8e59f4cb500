"""Real file systems that fail the way disks do: a small tmpfs that fills up, one mounted
read-only (mounting needs root or CAP_SYS_ADMIN; without it the test is skipped, saying why); and
a process umask set for a block.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")


@contextmanager
def small_disk(where: Path, size: str = "64k", *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (created), read-only if asked; unmounted after."""
    where.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    try:
        if read_only:
            _mount("-o", "remount,ro", str(where))
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True, check=False)


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """The process umask set to ``mask`` for the block."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)
