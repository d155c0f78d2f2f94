"""When appended records reach the disk: the flush policy, and group commit.

The policy is the topic's `flush.messages` / `flush.ms` (PartitionLog.flush_due
says when one is met); this module is the one place that acts on it, after an
append and on the broker's flush schedule.

Group commit: fsync runs in a worker thread so the event loop never blocks on
the disk. While one fsync runs, later waiters gather behind a single follow-up
fsync instead of queueing one each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol

from herdless.storage import PartitionLog, StorageIOError


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


class Durability:
    """Flushes partition logs when their topic's flush policy asks, sharing fsyncs."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._group_commits: dict[int, GroupCommit] = {}

    async def flush(self, partition_log: PartitionLog) -> None:
        group_commit = self._group_commits.get(id(partition_log))
        if group_commit is None:
            group_commit = self._group_commits[id(partition_log)] = GroupCommit(partition_log)
        await group_commit.flush()

    async def after_append(self, partition_log: PartitionLog) -> None:
        """Return once an append just made is as durable as the topic asks."""
        if not self.durable_now(partition_log):
            await self.flush(partition_log)

    def durable_now(self, partition_log: PartitionLog) -> bool:
        """An append just made is as durable as the topic asks, with no flush to wait for."""
        return not partition_log.flush_due(self._clock())

    async def flush_due(self, logs: Iterable[PartitionLog]) -> None:
        """The flush schedule: flush every log whose policy is met now (flush.ms).

        A log whose flush fails (a full disk) is reported to its on_io_error and
        tried again next time; the others are flushed all the same.
        """
        now = self._clock()
        for partition_log in list(logs):
            if partition_log.flush_due(now):
                try:
                    await self.flush(partition_log)
                except StorageIOError as exc:
                    partition_log.on_io_error("flush", partition_log.name, exc)

    def forget(self, partition_log: PartitionLog) -> None:
        self._group_commits.pop(id(partition_log), None)
