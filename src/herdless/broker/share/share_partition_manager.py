"""The share partitions this broker leads, one per (share group, topic, partition), made
on the first ShareFetch for them (Kafka's SharePartitionManager).

Each is loaded from the Persister before its first use; one never consumed starts where
share.auto.offset.reset says, and is initialized there. Operations on one share
partition run one at a time (an asyncio lock), since each may wait on the Persister.
Every acknowledgement, release and lock expiry is written through the Persister before
it is answered; a write that fails unloads the share partition, so that the next use
reads back what was durable rather than serve what was not.

Where the share group names a dead-letter topic (KIP-1191), the records a change
archives unaccepted are written there first, and the change only once they are
(dead_letter_writer.py): a failure of either unloads the share partition alike.

Acquisition locks run on the event loop: one timer per share partition, at its
earliest lock deadline. Records that become Available again (released, lock run out)
wake long-polling share fetches as an append does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from herdless.broker.share.dead_letter_writer import DeadLetterWriter
from herdless.broker.share.persister import Persister
from herdless.broker.share.share_group_settings import (
    AutoOffsetReset,
    IsolationLevel,
    ShareGroupSettings,
)
from herdless.broker.share.share_partition_metrics import SharePartitionMetrics
from herdless.clock import monotonic_ms
from herdless.coordinator.share_partitions.acknowledgements import AcknowledgementBatch
from herdless.coordinator.share_partitions.partition import (
    AcquiredRecords,
    InvalidRecordState,
    SharePartition,
    StateChange,
)
from herdless.coordinator.share_state.state import RecordState, SharePartitionKey, ShareStateError
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import BatchHeader, iter_batches
from herdless.storage import PartitionLog

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Acquisition:
    """What a ShareFetch gives a member from one share partition."""

    acquired: tuple[AcquiredRecords, ...]
    records: bytes


NOTHING = Acquisition((), b"")


@dataclass(eq=False)
class _Led:
    """A share partition led here: its state once loaded, and its lock timer."""

    topic: str
    partition: int
    leader_epoch: int
    state: SharePartition | None = None
    # The group's settings as the last fetch read them: acknowledgements and lock expiry
    # write dead letters where they said.
    settings: ShareGroupSettings | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None


class SharePartitionManager:
    def __init__(
        self,
        persister: Persister,
        wake: Callable[[str, int], None],
        clock: Callable[[], int] = monotonic_ms,
        dead_letters: DeadLetterWriter | None = None,
        metrics: SharePartitionMetrics | None = None,
    ) -> None:
        self.persister = persister
        self._metrics = metrics if metrics is not None else SharePartitionMetrics()
        # None: no dead letters are written, whatever the groups say (tests of the rest).
        self._dead_letters = dead_letters
        # Wakes the fetches long-polling a partition (the replica manager's appends).
        self._wake = wake
        self._clock = clock
        self._led: dict[SharePartitionKey, _Led] = {}

    def __len__(self) -> int:
        return len(self._led)

    def in_flight(self) -> list[tuple[SharePartitionKey, str, dict[RecordState, int]]]:
        """Each share partition loaded here, its topic and how many records in flight are
        in each state (for the metrics; on the loop)."""
        return [
            (key, led.topic, led.state.counts())
            for key, led in self._led.items()
            if led.state is not None
        ]

    def share_partition(self, key: SharePartitionKey) -> SharePartition | None:
        led = self._led.get(key)
        return None if led is None else led.state

    def ready(self, key: SharePartitionKey, partition_log: PartitionLog) -> bool:
        """Whether a fetch could acquire anything now: records Available in flight, or
        records in the log past the end offset with room for them. A share partition
        not loaded yet is ready: loading tells."""
        led = self._led.get(key)
        if led is None or led.state is None:
            return True
        state = led.state
        if not state.can_acquire():
            return False
        return state.next_fetch_offset() < state.end_offset or (
            partition_log.high_watermark > state.end_offset
        )

    async def acquire(
        self,
        key: SharePartitionKey,
        topic: str,
        partition_log: PartitionLog,
        leader_epoch: int,
        settings: ShareGroupSettings,
        member_id: str,
        max_records: int,
        max_bytes: int,
    ) -> Acquisition:
        """Acquire for `member_id` what the log holds for it, up to `max_records` (whole
        batches) and about `max_bytes`; raises ShareStateError if the share partition
        cannot be loaded."""
        led = self._leading(key, topic, partition_log.partition, leader_epoch)
        async with led.lock:
            led.settings = settings
            state = await self._loaded(led, key, partition_log, settings)
            state.config = settings.partition
            change = state.move_start(partition_log.log_start_offset)
            if change is not None:
                await self._write(led, key, change)
            offset = state.next_fetch_offset()
            read_committed = settings.isolation_level == IsolationLevel.READ_COMMITTED
            limit = (
                partition_log.last_stable_offset if read_committed else partition_log.high_watermark
            )
            if offset >= limit or not state.can_acquire():
                return NOTHING
            end = min(limit, state.read_end(offset, max_records))
            data = partition_log.read(offset, max(max_bytes, 1), max_offset=end)
            batches = [(pos, header) for pos, header in iter_batches(data)]
            acquired = state.acquire(
                member_id,
                offset,
                [(h.base_offset, h.last_offset) for _, h in batches],
                max_records,
                self._clock(),
                aborted=_aborted(partition_log, offset, data, batches) if read_committed else (),
            )
            self._schedule(led, key)
            if not acquired:
                return NOTHING
            self._metrics.acquired(key.group_id, acquired)
            first, last = acquired[0].first_offset, acquired[-1].last_offset
            kept = [
                (pos, h) for pos, h in batches if h.last_offset >= first and h.base_offset <= last
            ]
            start = kept[0][0]
            end = kept[-1][0] + kept[-1][1].size
            return Acquisition(acquired, data[start:end])

    async def acknowledge(
        self,
        key: SharePartitionKey,
        member_id: str,
        batches: Sequence[AcknowledgementBatch],
    ) -> None:
        """Apply a member's acknowledgements and write them; InvalidRecordState (nothing
        changed) if the member does not hold them all, ShareStateError if the write
        failed (then nothing is kept either)."""
        led = self._led.get(key)
        if led is None or led.state is None:
            # Nothing was acquired here since this broker led it: nothing is held.
            raise InvalidRecordState("no records of this share partition are acquired here")
        async with led.lock:
            state = led.state
            if state is None:
                raise InvalidRecordState("no records of this share partition are acquired here")
            change = state.acknowledge(member_id, batches)
            await self._write(led, key, change)
            self._metrics.acknowledged(key.group_id, batches)
            self._schedule(led, key)
            self._wake(led.topic, led.partition)

    async def release_member(self, keys: Sequence[SharePartitionKey], member_id: str) -> None:
        """Release what `member_id` holds of `keys` (its share session ended)."""
        for key in keys:
            led = self._led.get(key)
            if led is None or led.state is None:
                continue
            async with led.lock:
                if led.state is None:
                    continue
                change = led.state.release_member(member_id)
                if change is None:
                    continue
                try:
                    await self._write(led, key, change)
                except Exception:
                    log.exception("cannot write the records %s released of %s", member_id, key)
                    continue
                self._schedule(led, key)
                self._wake(led.topic, led.partition)

    async def forget(self, key: SharePartitionKey) -> None:
        """Drop what is held of a share partition whose state an admin changed (its start
        offset altered, its state deleted): the next use reads the Persister again. Waits
        for an operation in progress, so that none writes after the change."""
        led = self._led.get(key)
        if led is None:
            return
        async with led.lock:
            _unload(led)
            if self._led.get(key) is led:
                del self._led[key]

    async def reload_idle(self, keys: Sequence[SharePartitionKey]) -> None:
        """Drop the state of those share partitions no member holds records of, so that
        their next use reads the Persister: an admin may have moved their start offset
        (AlterShareGroupOffsets, DeleteShareGroupOffsets) through another broker since.
        Nothing is lost: what is not acquired is as durable as it is held."""
        for key in keys:
            led = self._led.get(key)
            if led is None or led.state is None:
                continue
            async with led.lock:
                state = led.state
                if state is not None and not state.counts()[RecordState.ACQUIRED]:
                    _unload(led)

    def close(self) -> None:
        """Stop every lock timer (the broker is stopping)."""
        for led in self._led.values():
            if led.timer is not None:
                led.timer.cancel()
                led.timer = None

    # -- loading ----------------------------------------------------------------------

    def _leading(self, key: SharePartitionKey, topic: str, partition: int, epoch: int) -> _Led:
        led = self._led.get(key)
        if led is not None and led.topic == topic and epoch < led.leader_epoch:
            # A fetch that learned the leader epoch before it was raised (a long poll)
            # must not lead the share partition back to the older epoch: that would
            # read it back afresh, forgetting what members hold under the newer one.
            raise ShareStateError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"{key} is led at leader epoch {led.leader_epoch}, not {epoch}",
            )
        if (
            led is not None
            and led.state is not None
            and led.topic == topic
            and epoch == led.leader_epoch + 1
        ):
            # The next epoch with this broker still leading: the controller raised it
            # with the leader unchanged (ZooKeeper-era Kafka does on an ISR shrink; KRaft
            # raises only the partition epoch). No other broker led in between, so what
            # members hold here is still theirs: reading it back would forget it.
            led.leader_epoch = epoch
            return led
        if led is None or led.leader_epoch != epoch or led.topic != topic:
            # Led afresh (a new leader epoch, or the topic id now names another topic):
            # what was held under the old leadership is read back from the Persister.
            if led is not None and led.timer is not None:
                led.timer.cancel()
            led = self._led[key] = _Led(topic, partition, epoch)
        return led

    async def _loaded(
        self,
        led: _Led,
        key: SharePartitionKey,
        partition_log: PartitionLog,
        settings: ShareGroupSettings,
    ) -> SharePartition:
        if led.state is not None:
            return led.state
        persisted = await self.persister.read(key, led.leader_epoch)
        if persisted.initialized:
            state = led.state = SharePartition.loaded(settings.partition, persisted)
            archived = state.archived_at_load()
            if archived is not None:
                await self._write(led, key, archived)
            return state
        if settings.auto_offset_reset == AutoOffsetReset.EARLIEST:
            start = partition_log.log_start_offset
        else:
            start = partition_log.high_watermark
        await self.persister.initialize(key, persisted.state_epoch, start)
        log.info(
            "share group %s starts %s-%d at offset %d (share.auto.offset.reset=%s)",
            key.group_id,
            led.topic,
            led.partition,
            start,
            settings.auto_offset_reset.value,
        )
        led.state = SharePartition(settings.partition, start, persisted.state_epoch)
        return led.state

    # -- writes and timers ------------------------------------------------------------

    async def _write(self, led: _Led, key: SharePartitionKey, change: StateChange) -> None:
        state = led.state
        assert state is not None
        try:
            if change.archived:
                await self._write_dead_letters(led, key, change)
            await self.persister.write(
                key, state.state_epoch, led.leader_epoch, change.start_offset, change.batches
            )
            self._metrics.archived(key.group_id, change.archived)
        except Exception:
            # Memory is now ahead of what is durable: forget it, and read back what is.
            _unload(led)
            raise

    async def _write_dead_letters(
        self, led: _Led, key: SharePartitionKey, change: StateChange
    ) -> None:
        """Before the archive is durable, its dead letters are: DeadLetterError if they
        could not be written (then neither is the archive)."""
        target = None if led.settings is None else led.settings.dead_letter
        if target is None or self._dead_letters is None:
            return
        await self._dead_letters.write(
            key.group_id, led.topic, led.partition, change.archived, target
        )

    def _schedule(self, led: _Led, key: SharePartitionKey) -> None:
        if led.timer is not None:
            led.timer.cancel()
            led.timer = None
        state = led.state
        deadline = None if state is None else state.next_lock_deadline()
        if deadline is None:
            return
        delay = max(deadline - self._clock(), 0) / 1000
        led.timer = asyncio.get_running_loop().call_later(delay, self._locks_due, led, key)

    def _locks_due(self, led: _Led, key: SharePartitionKey) -> None:
        led.timer = None
        task = asyncio.get_running_loop().create_task(self._expire(led, key))
        task.add_done_callback(_log_failure)

    async def _expire(self, led: _Led, key: SharePartitionKey) -> None:
        async with led.lock:
            state = led.state
            if state is None or self._led.get(key) is not led:
                return
            change = state.expire_locks(self._clock())
            if change is not None:
                try:
                    await self._write(led, key, change)
                except Exception:
                    log.exception("cannot write the expired locks of %s", key)
                    return
                self._metrics.locks_expired(key.group_id, change)
                self._wake(led.topic, led.partition)
            self._schedule(led, key)


def _aborted(
    partition_log: PartitionLog, offset: int, data: bytes, batches: list[tuple[int, BatchHeader]]
) -> set[tuple[int, int]]:
    """The batches read whose transaction was aborted, as a read_committed consumer drops
    them: a transactional batch of a producer between the first offset of one of its
    aborted transactions and that transaction's abort marker."""
    transactions = partition_log.aborted_transactions_read(offset, data)
    if not transactions:
        return set()
    return {
        (h.base_offset, h.last_offset)
        for _, h in batches
        if h.is_transactional
        and not h.is_control
        and any(
            t.producer_id == h.producer_id and t.first_offset <= h.base_offset <= t.last_offset
            for t in transactions
        )
    }


def _unload(led: _Led) -> None:
    """Forget the share partition's state and its lock timer: the next use reads it back."""
    if led.timer is not None:
        led.timer.cancel()
        led.timer = None
    led.state = None


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("share partition lock expiry failed", exc_info=task.exception())
