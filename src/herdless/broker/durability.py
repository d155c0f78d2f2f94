"""Group commit: producers waiting on one partition's fsync share it.

fsync runs in a worker thread so the event loop never blocks on the disk. While
one fsync runs, later waiters gather behind a single follow-up fsync instead of
queueing one each.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class Flushable(Protocol):
    def flush(self) -> None: ...


class GroupCommit:
    def __init__(self, log: Flushable) -> None:
        self._log = log
        self._running: asyncio.Task[None] | None = None
        self._next: asyncio.Future[None] | None = None

    async def flush(self) -> None:
        """Return once everything appended before this call is on disk."""
        waiters = self._next
        if waiters is None:
            waiters = self._next = asyncio.get_running_loop().create_future()
            if self._running is None:
                self._start()
        # Shielded: a cancelled waiter must not cancel the fsync others share.
        await asyncio.shield(waiters)

    def _start(self) -> None:
        waiters, self._next = self._next, None
        assert waiters is not None
        self._running = asyncio.get_running_loop().create_task(self._run(waiters))

    async def _run(self, waiters: asyncio.Future[None]) -> None:
        try:
            await asyncio.to_thread(self._log.flush)
        except Exception as exc:  # an fsync error fails every waiter, not the broker
            waiters.set_exception(exc)
        else:
            waiters.set_result(None)
        finally:
            self._running = None
            if self._next is not None:
                self._start()
