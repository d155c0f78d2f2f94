"""Small files replaced atomically: write a temporary, fsync, rename over it, fsync the directory.

After a crash the file holds either the old or the new content, never a mix.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
_VERSION = "0"


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_offset(path: Path, offset: int) -> None:
    """An offset checkpoint: a version line, then the offset, like Kafka's checkpoint files."""
    atomic_write(path, f"{_VERSION}\n{offset}\n".encode())


def read_offset(path: Path) -> int | None:
    """The checkpointed offset, or None if the file is absent or unreadable."""
    try:
        lines = path.read_text(encoding="ascii").split()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return None
    if len(lines) != 2 or lines[0] != _VERSION or not lines[1].isdigit():
        log.warning("ignoring malformed checkpoint %s", path)
        return None
    return int(lines[1])
