"""A follower whose disk refuses a truncation reports it, as every other failed write is
reported, so that its data directory goes offline; nothing escapes as a traceback."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from herdless.broker.replication.durability import Durability
from herdless.broker.replication.fetcher import FollowedPartition, ReplicaFetcher
from herdless.cluster.metadata import BrokerEndpoint
from herdless.protocol.records import build_batch, parse_header
from herdless.storage import LogManager, PartitionLog, StorageIOError


@pytest.fixture
def follower_log(tmp_path: Path) -> Iterator[PartitionLog]:
    logs = LogManager(tmp_path / "data", high_watermark_follows_log_end=False)
    logs.open(0)
    logs.create_topic("t", 1)
    partition_log = logs.partition("t", 0)
    assert partition_log is not None
    for _ in range(3):
        batch = memoryview(build_batch([(b"k", b"v")], 0))
        partition_log.append([(parse_header(batch), batch)], 0, leader_epoch=1)
    yield partition_log
    logs.close()


def full_disk(*_: object) -> None:
    raise StorageIOError("cannot write: no space left") from OSError(errno.ENOSPC, "full")


def test_a_truncation_the_disk_refuses_is_reported_and_tried_again_later(
    follower_log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[tuple[str, str, str]] = []
    follower_log.on_io_error = lambda op, name, exc: reported.append((op, name, exc.errno_name))
    monkeypatch.setattr(follower_log, "truncate_to", full_disk)

    async def main() -> tuple[bool, float]:
        fetcher = ReplicaFetcher(
            2, BrokerEndpoint(1, "127.0.0.1", 1, None), Durability(lambda: 0), lambda: 0
        )
        partition = FollowedPartition(follower_log, leader_epoch=2)
        # The leader's epoch 1 ended at offset 1: the follower must cut its last 2 records.
        done = fetcher._truncate_one(partition, 1, 1)  # noqa: SLF001
        return done, partition.delayed_until - asyncio.get_running_loop().time()

    done, delayed_for = asyncio.run(main())
    assert not done
    assert reported == [("truncation", follower_log.name, "ENOSPC")]
    assert delayed_for > 0
    assert follower_log.log_end_offset == 3
