"""The data directory's failure handler on a real LogManager: which errors fail the
directory, one change of state however many writes fail (from any thread), probes until
the directory writes again, the logs reopened before the replicas come back, and probes
further apart for a directory that keeps failing."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from herdless.broker.logs import log_dir_failure
from herdless.broker.logs.log_dir_failure import LogDirFailureHandler, fails_directory
from herdless.storage import LogManager, PartitionLog, StorageIOError
from tests.storage.batches import batch, split


def io_error(code: int | None) -> StorageIOError:
    error = StorageIOError("a write failed")
    if code is not None:
        error.__cause__ = OSError(code, os.strerror(code))
    return error


def test_what_fails_the_directory() -> None:
    assert fails_directory("append", io_error(errno.ENOSPC))
    assert fails_directory("flush", io_error(errno.EIO))
    assert fails_directory("checkpoint", io_error(errno.EDQUOT))
    assert fails_directory("retention", io_error(errno.EROFS))
    # The process's limits, not the directory's.
    assert not fails_directory("append", io_error(errno.EMFILE))
    assert not fails_directory("append", io_error(errno.ENFILE))
    # The scrubber reads and records damage; the directory still takes writes.
    assert not fails_directory("scrubbing", io_error(errno.EIO))
    assert not fails_directory("append", io_error(None))


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(tmp_path / "data")
    manager.open(now_ms=0)
    manager.create_topic("t", 2)
    yield manager
    manager.close()


class Broker:
    """What the handler drives: the replicas' state, as the cluster node keeps it."""

    def __init__(self, logs: LogManager) -> None:
        self.logs = logs
        self.offline = 0
        self.announced = 0
        self.online: list[list[PartitionLog]] = []
        self.gauge: list[bool] = []
        self.writes_again = asyncio.Event()

    def handler(self) -> LogDirFailureHandler:
        return LogDirFailureHandler(
            self.logs,
            lambda: 0,
            self.on_offline,
            self.announce_online,
            self.on_online,
            self.gauge.append,
        )

    def on_offline(self) -> None:
        self.offline += 1

    async def announce_online(self) -> None:
        self.announced += 1

    def on_online(self) -> None:
        # The logs are open again, and the controller told, before the replicas come back.
        assert self.announced == len(self.online) + 1
        self.online.append(list(self.logs.logs()))
        self.writes_again.set()


def test_a_failure_takes_the_directory_offline_once_until_a_probe_succeeds(
    logs: LogManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_dir_failure, "PROBE_INTERVAL_S", 0.01)
    broker = Broker(logs)
    probes: list[bool] = []
    real_probe = logs.probe

    def probe(size: int) -> None:
        probes.append(size == log_dir_failure.PROBE_BYTES)
        if len(probes) < 3:
            raise io_error(errno.ENOSPC)  # still full
        real_probe(size)

    monkeypatch.setattr(logs, "probe", probe)
    before = list(logs.logs())

    async def main() -> None:
        handler = broker.handler()
        handler.start()
        # Failures from worker threads and the loop alike; the first one counts.
        threads = [
            threading.Thread(target=handler.report, args=("flush", "t-0", io_error(errno.EIO)))
            for _ in range(5)
        ]
        for thread in threads:
            thread.start()
        handler.report("append", "t-1", io_error(errno.ENOSPC))
        for thread in threads:
            thread.join()
        await asyncio.sleep(0)
        assert handler.offline and broker.offline == 1
        assert all(partition_log.closed for partition_log in before)
        await asyncio.wait_for(broker.writes_again.wait(), 10)
        await asyncio.sleep(0)
        assert not handler.offline
        await handler.stop()

    asyncio.run(main())
    assert probes == [True, True, True]
    assert broker.offline == 1 and len(broker.online) == 1
    reopened = broker.online[0]
    assert len(reopened) == 2 and not set(reopened) & set(before)
    assert not any(partition_log.closed for partition_log in reopened)
    assert reopened[0].append(split(batch(1)), 0).first_offset == 0
    assert broker.gauge == [False, True, False]


def test_errors_that_are_not_the_directorys_change_nothing(logs: LogManager) -> None:
    broker = Broker(logs)

    async def main() -> None:
        handler = broker.handler()
        handler.start()
        handler.report("append", "t-0", io_error(errno.EMFILE))
        handler.report("scrubbing", "t-0", io_error(errno.EIO))
        await asyncio.sleep(0.01)
        assert not handler.offline and broker.offline == 0
        await handler.stop()

    asyncio.run(main())
    assert not any(partition_log.closed for partition_log in logs.logs())


def test_a_directory_that_fails_again_soon_is_probed_less_often(
    logs: LogManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_dir_failure, "PROBE_INTERVAL_S", 0.01)
    broker = Broker(logs)
    intervals: list[float] = []

    async def main() -> None:
        handler = broker.handler()
        handler.start()
        for _ in range(3):
            broker.writes_again.clear()
            handler.report("append", "t-0", io_error(errno.ENOSPC))
            await asyncio.sleep(0)
            intervals.append(handler.probe_interval_s)
            await asyncio.wait_for(broker.writes_again.wait(), 10)
            await asyncio.sleep(0)
        await handler.stop()

    asyncio.run(main())
    assert broker.offline == 3 and len(broker.online) == 3
    assert intervals == [0.01, 0.02, 0.04]
