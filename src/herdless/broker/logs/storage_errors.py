"""Disk operations that failed (a full disk, a failing one, no descriptors left): each is
counted by operation and errno, and logged in one line without flooding.

A request that met the failure is answered with KAFKA_STORAGE_ERROR by its handler;
this is what the operator sees. The broker goes on: once there is room again, writes
succeed where they left off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from herdless.broker.limited_warnings import LimitedWarnings
from herdless.storage import StorageIOError

log = logging.getLogger(__name__)

# What the client hears for each operation a request waits on.
_ANSWERS = {
    "append": "the request is answered KAFKA_STORAGE_ERROR",
    "flush": "the request is answered KAFKA_STORAGE_ERROR",
}
_FULL = ("ENOSPC", "EDQUOT")


class StorageErrors:
    def __init__(self, count: Callable[[str, str], None] = lambda operation, errno: None) -> None:
        self._count = count
        self._warnings = LimitedWarnings(log)

    def report(self, operation: str, subject: str, error: StorageIOError) -> None:
        """`operation` of `subject` (a partition, a topic) failed with `error`. Thread-safe."""
        errno_name = error.errno_name
        self._count(operation, errno_name)
        answer = _ANSWERS.get(operation)
        advice = "; it succeeds again once there is room" if errno_name in _FULL else ""
        self._warnings.warn(
            f"{operation} failing with {errno_name}",
            f"{operation} of {subject} failed: {error}"
            + (f"; {answer}" if answer else "")
            + advice,
        )

    def sweep(self) -> None:
        self._warnings.sweep()
