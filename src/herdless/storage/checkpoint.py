"""Small files replaced atomically: write a temporary, fsync, rename over it, fsync the directory.

After a crash the file holds either the old or the new content, never a mix.
Two layouts, both Kafka's: an offset (a version line, then the offset) and a
list of entries (a version line, a count line, then one entry of numbers a line).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
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


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """`mode`: the file's exact permissions (whatever the umask), e.g. 0o600 for secrets."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
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
    lines = _read_lines(path)
    if lines is None:
        return None
    if len(lines) != 2 or lines[0] != _VERSION or not lines[1].isdigit():
        log.warning("ignoring malformed checkpoint %s", path)
        return None
    return int(lines[1])


def write_entries(path: Path, entries: Iterable[Sequence[int]]) -> None:
    """Entries of numbers, one a line after the version and the count, as Kafka's CheckpointFile."""
    lines = [" ".join(str(number) for number in entry) for entry in entries]
    atomic_write(
        path, "".join(f"{line}\n" for line in (_VERSION, str(len(lines)), *lines)).encode()
    )


def read_entries(path: Path, width: int) -> list[tuple[int, ...]] | None:
    """The entries of `width` numbers each, or None if the file is absent or unreadable."""
    lines = _read_lines(path)
    if lines is None:
        return None
    try:
        if len(lines) < 2 or lines[0] != _VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("wrong version or count")
        entries = [tuple(int(field) for field in line.split()) for line in lines[2:]]
        if any(len(entry) != width for entry in entries):
            raise ValueError(f"an entry without {width} fields")
    except ValueError as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return None
    return entries


def _read_lines(path: Path) -> list[str] | None:
    """The file's non-blank lines, stripped; None if absent or unreadable."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return None
    return [line.strip() for line in text.splitlines() if line.strip()]
