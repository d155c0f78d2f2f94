"""The share partition leader and a group's dead-letter topic: dead letters are written
before the archive that makes them, a dead letter that cannot be written leaves the
archive unwritten (the records come back, and their dead letters are written on the
next try), records a leader before left at their last delivery are dead-lettered when
loaded, and a group without a dead-letter topic writes none."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from herdless.broker.share.dead_letter_writer import DeadLetterError
from herdless.broker.share.memory_persister import InMemoryPersister
from herdless.broker.share.share_group_settings import DeadLetterTopic
from herdless.broker.share.share_partition_manager import SharePartitionManager
from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
)
from herdless.coordinator.share_partitions.config import SharePartitionConfig
from herdless.coordinator.share_partitions.dead_letters import ArchivedRecord, ArchiveReason
from herdless.coordinator.share_partitions.partition import AcquiredRecords
from herdless.coordinator.share_state.state import RecordState, ShareStateError, StateBatch
from herdless.protocol.errors import ErrorCode
from tests.broker.share.test_share_partition_manager import KEY, LOCK_MS, Log, settings

TARGET = DeadLetterTopic("dlq.t")


class Writer:
    """Records each dead-letter write with how many state writes had happened by then;
    fails while `failing`."""

    def __init__(self, persister: InMemoryPersister) -> None:
        self.persister = persister
        self.written: list[tuple[ArchivedRecord, int]] = []
        self.failing = False

    async def write(
        self,
        group_id: str,
        topic: str,
        partition: int,
        records: Sequence[ArchivedRecord],
        target: DeadLetterTopic,
    ) -> None:
        assert (group_id, topic, partition, target) == (KEY.group_id, "t", 0, TARGET)
        if self.failing:
            raise DeadLetterError(ErrorCode.NOT_ENOUGH_REPLICAS, "the topic cannot take them")
        self.written.extend((record, self.persister.writes) for record in records)


def manager(persister: InMemoryPersister | None = None) -> tuple[SharePartitionManager, Writer]:
    persister = persister or InMemoryPersister()
    writer = Writer(persister)
    dead_letters: Any = writer  # the writer's one call, without a broker behind it
    return SharePartitionManager(persister, lambda t, p: None, dead_letters=dead_letters), writer


async def acquire(
    shares: SharePartitionManager, log: Log, target: DeadLetterTopic | None = TARGET, limit: int = 3
) -> tuple[AcquiredRecords, ...]:
    partition_log: Any = log
    chosen = settings(
        partition=SharePartitionConfig(record_lock_duration_ms=LOCK_MS, delivery_count_limit=limit),
        dead_letter=target,
    )
    got = await shares.acquire(KEY, "t", partition_log, 0, chosen, "a", 100, 1 << 20)
    return got.acquired


def reject(offset: int) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(offset, offset, (AcknowledgeType.REJECT,))]


def test_dead_letters_are_written_before_the_archive() -> None:
    async def run() -> None:
        log = Log()
        log.append(2)
        shares, writer = manager()
        await acquire(shares, log)
        before = writer.persister.writes
        await shares.acknowledge(KEY, "a", reject(1))
        assert writer.written == [(ArchivedRecord(1, 1, ArchiveReason.REJECTED), before)]
        assert writer.persister.writes == before + 1
        shares.close()

    asyncio.run(run())


def test_a_dead_letter_not_written_leaves_the_archive_unwritten_and_is_written_later() -> None:
    async def run() -> None:
        log = Log()
        log.append(1)
        shares, writer = manager()
        await acquire(shares, log)
        writes = writer.persister.writes
        writer.failing = True
        with pytest.raises(ShareStateError):
            await shares.acknowledge(KEY, "a", reject(0))
        assert writer.persister.writes == writes and writer.written == []
        # Read back from the Persister: the record was never archived, and comes again.
        writer.failing = False
        assert await acquire(shares, log) == (AcquiredRecords(0, 0, 1),)
        await shares.acknowledge(KEY, "a", reject(0))
        assert [record for record, _ in writer.written] == [
            ArchivedRecord(0, 1, ArchiveReason.REJECTED)
        ]
        shares.close()

    asyncio.run(run())


def test_records_left_at_their_last_delivery_are_dead_lettered_at_load() -> None:
    async def run() -> None:
        log = Log()
        log.append(3)
        persister = InMemoryPersister()
        await persister.initialize(KEY, 0, 0)
        # The leader before went away with 0-1 out for their third and last delivery.
        await persister.write(KEY, 0, 0, 0, (StateBatch(0, 1, RecordState.ACQUIRED, 3),))
        shares, writer = manager(persister)
        assert await acquire(shares, log) == (AcquiredRecords(2, 2, 1),)
        limit = ArchiveReason.DELIVERY_LIMIT_REACHED
        assert [record for record, _ in writer.written] == [
            ArchivedRecord(0, 3, limit),
            ArchivedRecord(1, 3, limit),
        ]
        # Written as archived: the start offset is past them.
        assert (await persister.read(KEY, 0)).start_offset == 2
        shares.close()

    asyncio.run(run())


def test_a_group_without_a_dead_letter_topic_writes_none() -> None:
    async def run() -> None:
        log = Log()
        log.append(1)
        shares, writer = manager()
        await acquire(shares, log, target=None)
        await shares.acknowledge(KEY, "a", reject(0))
        assert writer.written == []
        shares.close()

    asyncio.run(run())
