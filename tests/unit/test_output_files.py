"""Files a command writes (``tuner.output_files``): the mode a plain write would give, links
written through, and targets that could not be written refused before the work, on a real file
system (a full tmpfs, a read-only one, FIFOs, devices, dangling links)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.filesystems import small_disk, umask
from tuner.errors import InputError
from tuner.output_files import check_directory, check_file, write_atomic


@pytest.fixture
def umask_027() -> Iterator[None]:
    with umask(0o027):
        yield


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_umask_default_not_0600(tmp_path: Path, umask_027: None) -> None:
    target = tmp_path / "results.md"
    write_atomic(target, "table")
    assert target.read_text() == "table"
    assert _mode(target) == 0o640


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, umask_027: None) -> None:
    target = tmp_path / "README.md"
    target.write_text("old")
    target.chmod(0o664)
    write_atomic(target, "new")
    assert target.read_text() == "new"
    assert _mode(target) == 0o664


def test_a_link_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "README.md"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink()
    assert real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "real.md"]


@pytest.mark.timeout(20)
def test_a_fifo_or_a_device_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "README.md"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO, not a regular file"):
        check_file(fifo, "--readme", 1000)
    with pytest.raises(InputError, match="is a character device"):
        check_file(Path("/dev/null"), "--readme", 1000)


def test_directories_that_cannot_be_made_are_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=r"is under '.*file', not a directory"):
        check_directory(tmp_path / "file" / "out", "--output", 1000)
    with pytest.raises(InputError, match="is an existing file, not a directory"):
        check_directory(tmp_path / "file", "--output", 1000)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(InputError, match="which does not exist"):
        check_directory(tmp_path / "dangling", "--output", 1000)
    with pytest.raises(InputError, match="which does not exist"):
        check_directory(tmp_path / "dangling" / "deeper", "--output", 1000)
    check_directory(tmp_path / "new" / "deeper", "--output", 1000)  # made later, under tmp_path
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "file"]  # no probe left


def test_a_link_among_outputs_that_must_stay_inside_is_refused(tmp_path: Path) -> None:
    (tmp_path / "results.json").symlink_to("/etc/hostname")
    with pytest.raises(InputError, match="is a link; outputs stay inside"):
        check_file(tmp_path / "results.json", "--output", 0, inside=tmp_path)


def test_a_full_disk_is_refused_before_and_a_failed_write_leaves_the_old_file(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path / "disk", "64k") as disk:
        with pytest.raises(InputError, match="no room for 1,048,576 bytes"):
            check_directory(disk / "out", "--output", 2**20)
        check_directory(disk / "out", "--output", 16_000)
        target = disk / "kept.md"
        target.write_text("old")
        with pytest.raises(InputError, match=r"cannot write .*kept\.md.*No space left"):
            write_atomic(target, b"x" * 2**20)
        assert target.read_text() == "old"
        assert sorted(p.name for p in disk.iterdir()) == ["kept.md"]


def test_a_read_only_disk_is_refused(tmp_path: Path) -> None:
    with (
        small_disk(tmp_path / "disk", read_only=True) as disk,
        pytest.raises(InputError, match=r"cannot write in .*Read-only file system"),
    ):
        check_directory(disk / "out", "--output", 1000)
