"""Group commit: concurrent waiters share fsyncs, and nobody returns before their data is synced."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from herdless.broker.replication.durability import GroupCommit


class SlowDisk:
    """Counts fsyncs; each takes a while, as a real one does."""

    def __init__(self) -> None:
        self.appended = 0
        self.synced = 0
        self.fsyncs = 0
        self.lock = threading.Lock()

    def flush(self) -> None:
        with self.lock:
            target = self.appended
        time.sleep(0.02)
        with self.lock:
            self.synced = max(self.synced, target)
            self.fsyncs += 1


def test_concurrent_waiters_share_fsyncs_and_see_their_data_synced() -> None:
    disk = SlowDisk()
    commit = GroupCommit(disk)

    async def producer() -> None:
        for _ in range(5):
            with disk.lock:
                disk.appended += 1
                mine = disk.appended
            await commit.flush()
            assert disk.synced >= mine, "returned before its append was synced"

    async def main() -> None:
        await asyncio.gather(*(producer() for _ in range(50)))

    asyncio.run(main())
    assert disk.synced == 250
    # 250 waits served by far fewer fsyncs: at most one running plus one gathering.
    assert disk.fsyncs <= 25


def test_an_fsync_error_reaches_every_waiter() -> None:
    class BrokenDisk:
        def flush(self) -> None:
            raise OSError("disk on fire")

    commit = GroupCommit(BrokenDisk())

    async def main() -> list[object]:
        return await asyncio.gather(*(commit.flush() for _ in range(5)), return_exceptions=True)

    results = asyncio.run(main())
    assert all(isinstance(r, OSError) for r in results)


def test_flush_after_error_works_again() -> None:
    calls = []

    class FlakyDisk:
        def flush(self) -> None:
            calls.append(1)
            if len(calls) == 1:
                raise OSError("transient")

    commit = GroupCommit(FlakyDisk())

    async def main() -> None:
        with pytest.raises(OSError):
            await commit.flush()
        await commit.flush()

    asyncio.run(main())
    assert len(calls) == 2
