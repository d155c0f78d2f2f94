"""The share partition leader's glue: loading from the Persister and starting where
share.auto.offset.reset says, writing every acknowledgement before it is answered,
forgetting what a failed write left unwritten, lock timers on the event loop that wake
fetches, and read_committed's aborted transactions archived.

The log is a small stand-in holding real batches: what the manager reads of a
PartitionLog is its offsets and whole batches from an offset."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from herdless.broker.share.memory_persister import InMemoryPersister
from herdless.broker.share.share_group_settings import (
    AutoOffsetReset,
    IsolationLevel,
    ShareGroupSettings,
)
from herdless.broker.share.share_partition_manager import SharePartitionManager
from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
)
from herdless.coordinator.share_partitions.config import SharePartitionConfig
from herdless.coordinator.share_partitions.partition import AcquiredRecords, InvalidRecordState
from herdless.coordinator.share_state.state import (
    RecordState,
    SharePartitionKey,
    ShareStateError,
    StateBatch,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import (
    TRANSACTIONAL_FLAG,
    encode_batch,
    iter_batches,
    rewrite_base_offset,
)
from herdless.storage.transaction_index import AbortedTxn

KEY = SharePartitionKey("group", uuid.uuid4(), 0)
LOCK_MS = 100


@dataclass
class Log:
    """Batches at offsets, with the offsets a PartitionLog tells."""

    partition: int = 0
    log_start_offset: int = 0
    batches: list[bytes] = field(default_factory=list)
    aborted: list[AbortedTxn] = field(default_factory=list)
    lso: int | None = None

    @property
    def high_watermark(self) -> int:
        return sum(self._count(b) for b in self.batches)

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark if self.lso is None else self.lso

    @staticmethod
    def _count(batch: bytes) -> int:
        [(_, header)] = list(iter_batches(batch))
        return header.last_offset_delta + 1

    def append(self, count: int, producer_id: int = -1) -> None:
        batch = bytearray(
            encode_batch(
                [(0, None, b"%d" % i) for i in range(count)],
                producer_id=producer_id,
                producer_epoch=0 if producer_id >= 0 else -1,
                base_sequence=0 if producer_id >= 0 else -1,
                flags=TRANSACTIONAL_FLAG if producer_id >= 0 else 0,
            )
        )
        rewrite_base_offset(batch, self.high_watermark)
        self.batches.append(bytes(batch))

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        out = b""
        for batch in self.batches:
            [(_, header)] = list(iter_batches(batch))
            if header.last_offset < offset or (
                max_offset is not None and header.base_offset >= max_offset
            ):
                continue
            if out and len(out) + len(batch) > max_bytes:
                break
            out += batch
        return out

    def aborted_transactions_read(self, offset: int, records: bytes) -> list[AbortedTxn]:
        return self.aborted


def settings(**overrides: object) -> ShareGroupSettings:
    values: dict[str, object] = {
        "partition": SharePartitionConfig(record_lock_duration_ms=LOCK_MS),
        "auto_offset_reset": AutoOffsetReset.EARLIEST,
        "isolation_level": IsolationLevel.READ_UNCOMMITTED,
    }
    values.update(overrides)
    return ShareGroupSettings(**values)  # type: ignore[arg-type]


class Manager:
    def __init__(self, persister: InMemoryPersister | None = None) -> None:
        self.persister = persister or InMemoryPersister()
        self.woken: list[tuple[str, int]] = []
        self.manager = SharePartitionManager(self.persister, lambda t, p: self.woken.append((t, p)))

    async def acquire(
        self, log: Log, member: str = "a", with_settings: ShareGroupSettings | None = None
    ) -> tuple[AcquiredRecords, ...]:
        partition_log: Any = log  # a stand-in for a PartitionLog
        chosen = with_settings or settings()
        got = await self.manager.acquire(KEY, "t", partition_log, 0, chosen, member, 100, 1 << 20)
        return got.acquired


def accept(first: int, last: int) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(first, last, (AcknowledgeType.ACCEPT,))]


def test_a_new_share_partition_starts_where_auto_offset_reset_says() -> None:
    async def run() -> None:
        log = Log()
        log.append(3)
        latest = Manager()
        assert (
            await latest.acquire(
                log, with_settings=settings(auto_offset_reset=AutoOffsetReset.LATEST)
            )
            == ()
        )
        assert (await latest.persister.read(KEY, 0)).start_offset == 3
        earliest = Manager()
        assert await earliest.acquire(log) == (AcquiredRecords(0, 2, 1),)

    asyncio.run(run())


def test_acknowledgements_are_written_and_a_new_leader_reads_them_back() -> None:
    async def run() -> None:
        log = Log()
        log.append(2)
        log.append(2)
        first = Manager()
        assert await first.acquire(log) == (AcquiredRecords(0, 3, 1),)
        await first.manager.acknowledge(
            KEY, "a", accept(0, 0) + [AcknowledgementBatch(2, 2, (AcknowledgeType.RELEASE,))]
        )
        assert first.persister.writes == 1
        # Another leader (same Persister): acquired records come back, accepted ones never.
        second = Manager(first.persister)
        assert await second.acquire(log, "b") == (
            AcquiredRecords(1, 1, 1),
            AcquiredRecords(2, 2, 2),
            AcquiredRecords(3, 3, 1),
        )
        first.manager.close()
        second.manager.close()

    asyncio.run(run())


def test_a_fetch_from_before_a_leader_epoch_bump_does_not_lead_the_partition_back() -> None:
    """A long poll resolved at leader epoch 0 wakes after a fetch at epoch 1 loaded the
    share partition: it is told NOT_LEADER_OR_FOLLOWER, and what members hold at epoch 1
    stays theirs rather than being read back afresh and handed out again."""

    async def run() -> None:
        log = Log()
        log.append(2)
        leader = Manager()
        partition_log: Any = log
        chosen = settings()
        newer = await leader.manager.acquire(KEY, "t", partition_log, 1, chosen, "a", 100, 1 << 20)
        assert newer.acquired == (AcquiredRecords(0, 1, 1),)
        with pytest.raises(ShareStateError) as refused:
            await leader.manager.acquire(KEY, "t", partition_log, 0, chosen, "b", 100, 1 << 20)
        assert refused.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        await leader.manager.acknowledge(KEY, "a", accept(0, 1))
        leader.manager.close()

    asyncio.run(run())


def test_the_next_leader_epoch_on_the_same_leader_keeps_what_members_hold() -> None:
    """The controller raised the epoch with this broker leading throughout (an ISR
    shrink): a's records stay a's, not read back and handed to b as new."""

    async def run() -> None:
        log = Log()
        log.append(2)
        leader = Manager()
        partition_log: Any = log
        chosen = settings()
        got = await leader.manager.acquire(KEY, "t", partition_log, 1, chosen, "a", 100, 1 << 20)
        assert got.acquired == (AcquiredRecords(0, 1, 1),)
        log.append(1)
        got = await leader.manager.acquire(KEY, "t", partition_log, 2, chosen, "b", 100, 1 << 20)
        assert got.acquired == (AcquiredRecords(2, 2, 1),)
        await leader.manager.acknowledge(KEY, "a", accept(0, 1))
        # Two epochs on, another broker led in between: read back from the Persister.
        got = await leader.manager.acquire(KEY, "t", partition_log, 4, chosen, "c", 100, 1 << 20)
        assert got.acquired == (AcquiredRecords(2, 2, 1),)
        leader.manager.close()

    asyncio.run(run())


def test_acknowledging_what_is_not_held_is_refused() -> None:
    async def run() -> None:
        manager = Manager()
        with pytest.raises(InvalidRecordState):
            await manager.manager.acknowledge(KEY, "a", accept(0, 0))
        log = Log()
        log.append(1)
        await manager.acquire(log)
        with pytest.raises(InvalidRecordState):
            await manager.manager.acknowledge(KEY, "b", accept(0, 0))
        assert manager.persister.writes == 0
        manager.manager.close()

    asyncio.run(run())


def test_a_failed_write_keeps_nothing_it_did_not_write() -> None:
    class Failing(InMemoryPersister):
        async def write(self, *args: object, **kwargs: object) -> None:
            raise ShareStateError(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def run() -> None:
        log = Log()
        log.append(2)
        manager = Manager(Failing())
        await manager.acquire(log)
        with pytest.raises(ShareStateError):
            await manager.manager.acknowledge(KEY, "a", accept(0, 1))
        # Read back from what was durable: nothing accepted, nothing held.
        assert await manager.acquire(log, "b") == (AcquiredRecords(0, 1, 1),)
        manager.manager.close()

    asyncio.run(run())


def test_a_lock_that_runs_out_is_written_and_wakes_fetches() -> None:
    async def run() -> None:
        log = Log()
        log.append(2)
        manager = Manager()
        await manager.acquire(log)
        await asyncio.sleep(LOCK_MS / 1000 * 2.5)
        assert manager.woken == [("t", 0)]
        state = await manager.persister.read(KEY, 0)
        assert state.batches == (StateBatch(0, 1, RecordState.AVAILABLE, 1),)
        assert await manager.acquire(log, "b") == (AcquiredRecords(0, 1, 2),)
        manager.manager.close()

    asyncio.run(run())


def test_read_committed_archives_aborted_transactions_and_stops_at_the_lso() -> None:
    async def run() -> None:
        log = Log()
        log.append(2, producer_id=7)  # aborted: 0-1, its marker at 2
        log.append(1)  # the marker's place, as a plain batch here
        log.append(2)  # 3-4
        log.append(1, producer_id=8)  # 5: still open
        log.aborted = [AbortedTxn(7, 0, 2, 3)]
        log.lso = 5
        manager = Manager()
        got = await manager.acquire(
            log, with_settings=settings(isolation_level=IsolationLevel.READ_COMMITTED)
        )
        assert got == (AcquiredRecords(2, 4, 1),)
        share_partition = manager.manager.share_partition(KEY)
        assert share_partition is not None and share_partition.start_offset == 2
        manager.manager.close()

    asyncio.run(run())
