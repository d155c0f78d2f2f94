"""A full disk where a test wants it: writes to chosen files fail with ENOSPC.

The broker-level tests fill a real filesystem (tests/support/small_disk.py); these
inject the failure at one write at a time, to check each site on its own.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator

import pytest

Match = Callable[[str], bool]


def _path_of(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _no_space(path: str) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


@contextlib.contextmanager
def no_space(monkeypatch: pytest.MonkeyPatch, match: Match) -> Iterator[None]:
    """While inside, writing to a file whose path `match`es, or creating one, fails with
    ENOSPC, as on a full disk. Reading, renaming and removing still work."""
    real_open, real_write, real_pwrite, real_pwritev = os.open, os.write, os.pwrite, os.pwritev

    def open_(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        name = os.fspath(path)
        if flags & os.O_CREAT and match(name) and not os.path.exists(name):
            raise _no_space(name)
        return real_open(path, flags, *args, **kwargs)

    def write(fd: int, data: bytes) -> int:
        if match(_path_of(fd)):
            raise _no_space(_path_of(fd))
        return real_write(fd, data)

    def pwrite(fd: int, data: bytes, position: int) -> int:
        if match(_path_of(fd)):
            raise _no_space(_path_of(fd))
        return real_pwrite(fd, data, position)

    def pwritev(fd: int, buffers: list[memoryview], position: int) -> int:
        if match(_path_of(fd)):
            raise _no_space(_path_of(fd))
        return real_pwritev(fd, buffers, position)

    with monkeypatch.context() as patch:
        patch.setattr(os, "open", open_)
        patch.setattr(os, "write", write)
        patch.setattr(os, "pwrite", pwrite)
        patch.setattr(os, "pwritev", pwritev)
        yield


def ending(*suffixes: str) -> Match:
    return lambda path: path.endswith(suffixes)


def containing(*parts: str) -> Match:
    return lambda path: any(part in path for part in parts)
