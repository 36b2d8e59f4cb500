"""Files a command writes: checked before the work that fills them, then written whole or not
at all.

- :func:`check_directory` and :func:`check_file` run before the work (hours of simulation, say)
  and refuse, as one :class:`~tuner.errors.InputError` line, a target that could not be written
  after it: a folder under a file, a dangling link, a special file (reading a FIFO blocks, a
  device is no file), a read-only file system, or one without the room the output needs (a
  probe file of that size is allocated, then removed).
- :func:`write_atomic` writes the bytes to a temporary file beside the target, flushes them to
  disk and renames the file over the target, so that a reader sees the old file or the new one.
  The new file keeps the mode of the file it replaces, or gets the mode a plain ``open`` gives
  (0666 less the umask); a link is written through (its target is replaced, the link stays).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from tuner.errors import InputError

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _shown(path: Path) -> str:
    """A path for a one-line message: quoted, escapes kept, at most 200 characters."""
    text = repr(str(path))
    return text if len(text) <= 200 else text[:197] + "..."


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def check_directory(path: Path, flag: str, room: int) -> None:
    """Refuse ``path`` as the directory ``flag`` names, to be created if missing and to receive
    ``room`` bytes: it must be a directory (or not exist yet, under a directory), not a dangling
    link, on a file system that is writable and has the room."""
    try:
        existing = path
        while not existing.exists():
            _refuse_dangling(existing, flag)
            existing = existing.parent
        if not existing.is_dir():
            if existing == path:
                raise InputError(f"{flag}: {_shown(path)} is an existing file, not a directory")
            raise InputError(f"{flag}: {_shown(path)} is under {_shown(existing)}, not a directory")
        _probe(existing, flag, room)
    except OSError as err:
        raise InputError(f"{flag}: {_shown(path)}: {err.strerror or err}") from None


def check_file(path: Path, flag: str, room: int, *, inside: Path | None = None) -> None:
    """Refuse ``path`` as a file ``flag`` will replace with ``room`` bytes: when it exists it
    must be a regular file (a link to one is written through, unless the file must stay
    ``inside`` a directory: then a link is refused), and its directory writable with the room
    (not probed when ``room`` is 0)."""
    try:
        if inside is not None and path.is_symlink():
            raise InputError(f"{flag}: {_shown(path)} is a link; outputs stay inside {inside}")
        _refuse_dangling(path, flag)
        if path.exists():
            mode = path.stat().st_mode
            if not stat.S_ISREG(mode):
                raise InputError(f"{flag}: {_shown(path)} is {_kind(mode)}, not a regular file")
            if room > 0:
                _probe(path.resolve().parent, flag, room)
    except OSError as err:
        raise InputError(f"{flag}: {_shown(path)}: {err.strerror or err}") from None


def _refuse_dangling(path: Path, flag: str) -> None:
    if path.is_symlink() and not path.exists():
        missing = _shown(path.readlink())
        raise InputError(f"{flag}: {_shown(path)} is a link to {missing}, which does not exist")


def _probe(directory: Path, flag: str, room: int) -> None:
    """Create a file of ``room`` bytes in ``directory`` and remove it: the directory takes a
    file that large now (writable, not read-only, not full)."""
    probe = directory / f".tuner-probe-{secrets.token_hex(6)}"
    try:
        handle = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise InputError(f"{flag}: cannot write in {_shown(directory)}: {err.strerror}") from None
    try:
        os.posix_fallocate(handle, 0, room)
    except OSError as err:
        raise InputError(
            f"{flag}: no room for {room:,} bytes in {_shown(directory)}: {err.strerror}"
        ) from None
    finally:
        os.close(handle)
        probe.unlink(missing_ok=True)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file renamed over it,
    keeping the replaced file's mode (a new file: 0666 less the umask); a link is written
    through. A failure leaves ``path`` as it was and is one InputError line."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    temporary = target.parent / f".{target.name[:200]}.{secrets.token_hex(6)}"
    try:
        try:
            mode: int | None = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = None
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            with os.fdopen(handle, "wb") as out:
                if mode is not None:
                    os.fchmod(out.fileno(), mode)
                out.write(payload)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
    except OSError as err:
        raise InputError(f"cannot write {_shown(path)}: {err.strerror or err}") from None
