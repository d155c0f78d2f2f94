"""A small filesystem that really fills: writes fail with ENOSPC, as on a full disk."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_filesystem(path: Path, size_bytes: int, *, inodes: int | None = None) -> Iterator[Path]:
    """A tmpfs of `size_bytes` (and at most `inodes` files, if given) mounted at `path`.

    Mounting needs root (or CAP_SYS_ADMIN); without it the test fails saying so,
    rather than pass without a full disk.
    """
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size_bytes}" + ("" if inodes is None else f",nr_inodes={inodes}")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"cannot mount a {size_bytes}-byte tmpfs at {path} (this test needs root to make"
            f" a disk that fills): {mounted.stderr.strip()}"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)


class Filler:
    """Files that take every free block and every free inode of a filesystem."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / "filler"
        self.directory.mkdir()
        block = b"\0" * 4096
        fd = os.open(self.directory / "blocks", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            while _room(lambda: os.write(fd, block)):
                pass
        finally:
            os.close(fd)
        names = (self.directory / f"inode-{n}" for n in itertools.count())
        while _room(next(names).touch):
            pass

    def remove(self) -> None:
        shutil.rmtree(self.directory)


def _room(write: Callable[[], object]) -> bool:
    try:
        write()
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        return False
    return True


def free_space(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize
