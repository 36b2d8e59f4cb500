"""Where ``tuner kb export -o FILE`` writes, and how, without destroying anything.

- The knowledge store itself (however spelled: relative, ``..``, a hard or symbolic link,
  ``/proc/self/cwd/...``), a folder, a block device or a socket: refused.
- A FIFO or a character device (``/dev/stdout`` into a pipe, a terminal, ``/dev/null``): opened
  and written as it is, never read, never replaced. A FIFO blocks until a reader opens it, as a
  shell redirection does.
- A symbolic link: written through, to the file it leads to; the link stays.
- A regular file: replaced only when it is a previous export (or with ``--force``), by writing
  a temporary file beside it and renaming it over it, with the replaced file's permissions
  (a new file gets the usual ``0666`` less the umask).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from knowledge.transfer import FORMAT
from tuner.errors import InputError
from tuner.json_input import read_json
from tuner.output_files import write_atomic
from tuner.settings import Knowledge


@dataclass(frozen=True)
class ExportTarget:
    """The file an export goes to, checked: see :func:`export_target`."""

    given: Path
    """``--output`` as the user wrote it (named in messages)."""
    path: Path
    """The file written: ``given``, or the file its symbolic links lead to."""
    in_place: bool
    """A FIFO or character device: opened and written, never replaced."""

    def write(self, text: str) -> None:
        """Write ``text``; raises InputError naming ``--output`` when that fails (a full disk,
        a read-only folder, a FIFO whose reader went away)."""
        if not self.in_place:
            write_atomic(self.path, text)
            return
        try:
            with open(self.path, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as err:
            raise InputError(f"cannot write {self.given}: {err.strerror or err}") from err


def export_target(path: Path, knowledge: Knowledge, *, force: bool) -> ExportTarget:
    """Check ``--output`` before anything is read or written; raises InputError for a target
    the export would destroy or cannot use."""
    store = Path(knowledge.path)
    embedded = knowledge.backend == "embedded"
    if embedded and store.exists() and path.exists() and path.samefile(store):
        raise InputError(f"--output {path} is the knowledge store itself")
    try:
        mode: int | None = path.stat().st_mode  # through symbolic links
    except FileNotFoundError:
        mode = None  # a new file, or a symbolic link to one
    except OSError as err:
        raise InputError(f"--output {path}: {err.strerror or err}") from err
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            return ExportTarget(path, path, in_place=True)
        kind = "a folder" if stat.S_ISDIR(mode) else "neither a file, a FIFO nor a terminal"
        raise InputError(f"--output {path} is {kind}")
    real = Path(os.path.realpath(path))
    if not real.parent.is_dir():
        raise InputError(f"--output {path}: folder {real.parent} does not exist")
    if mode is not None and not force and not _is_export(real):
        raise InputError(f"--output {path} exists and is not an export (--force overwrites)")
    return ExportTarget(path, real, in_place=False)


def _is_export(path: Path) -> bool:
    """True when the regular file ``path`` holds a tuner knowledge export."""
    try:
        previous = read_json(path, "file")
    except InputError:
        return False
    return isinstance(previous, dict) and previous.get("format") == FORMAT
