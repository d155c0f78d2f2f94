"""One share partition at its leader: the records between the share-partition start
offset and end offset, each Available, Acquired by a member until its lock runs out,
Acknowledged or Archived, with how often it was delivered (Kafka's SharePartition).

Sans-IO: every operation takes the time (monotonic milliseconds) and returns what
changed; the broker reads the log, drives the lock timer and writes each change
through the Persister before it answers.

- acquire: the broker reads the log from next_fetch_offset() and hands over the
  batches it found; Available records among them and new ones past the end offset
  go to the member, a delivery more for each, locked until now + the lock duration.
  Offsets the log skips (compacted away, or batches the read began before) are
  acquired with the records around them: the client acknowledges them as GAP.
- acknowledge: ACCEPT archives a record as Acknowledged, REJECT and GAP as Archived,
  RELEASE makes it Available again; every offset must be Acquired by the member or
  nothing changes (INVALID_RECORD_STATE).
- a lock that runs out, or a member's share session closing, releases its records.
  A record released at the delivery count limit is Archived instead.
- every change says which records it archived unaccepted and why (rejected, or
  the delivery limit reached), for the share group's dead-letter topic; so does a
  partition loaded with records that reached the limit under the leader before.
- the start offset moves past every Acknowledged or Archived record at the front;
  no record is acquired past start offset + max record locks.

Records are kept one slot per offset from the start offset: the window is bounded by
max record locks (2,000 by default), and per offset is how acknowledgements come.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
)
from herdless.coordinator.share_partitions.config import SharePartitionConfig
from herdless.coordinator.share_partitions.dead_letters import ArchivedRecord, ArchiveReason
from herdless.coordinator.share_state.state import PartitionState, RecordState, StateBatch

_AFTER_ACKNOWLEDGEMENT = {
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.GAP: RecordState.ARCHIVED,
}
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class InvalidRecordState(Exception):
    """Kafka's INVALID_RECORD_STATE: an offset acknowledged that the member does not hold
    (never acquired, acquired by another, its lock run out, already acknowledged)."""


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    # When the acquisition lock runs out (monotonic ms); meaningful while Acquired.
    lock_deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A run of offsets acquired in one fetch with one delivery count (ShareFetch's
    AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateChange:
    """What to write through the Persister after an operation: the start offset and the
    batches whose state changed (both ends inclusive); and the records it archived
    unaccepted, in offset order, for the dead-letter topic."""

    start_offset: int
    batches: tuple[StateBatch, ...]
    archived: tuple[ArchivedRecord, ...] = ()


class SharePartition:
    def __init__(
        self,
        config: SharePartitionConfig,
        start_offset: int,
        state_epoch: int = 0,
        batches: Iterable[StateBatch] = (),
    ) -> None:
        self.config = config
        self.state_epoch = state_epoch
        self._start = start_offset
        self._records: list[InFlightRecord] = []
        # (deadline, first offset, last offset) of the runs acquired together; a record of
        # a run that no longer carries that deadline (acknowledged, released, acquired
        # again) is passed over when met.
        self._locks: list[tuple[int, int, int]] = []
        # Records archived unaccepted since the last StateChange, which takes them.
        self._archived: list[ArchivedRecord] = []
        for batch in sorted(batches, key=lambda b: b.first_offset):
            self._load(batch)
        self._advance_start()

    @classmethod
    def loaded(cls, config: SharePartitionConfig, state: PartitionState) -> SharePartition:
        """The partition as persisted: records that were Acquired are Available again, as
        their locks died with the leader that granted them."""
        return cls(config, state.start_offset, state.state_epoch, state.batches)

    def _load(self, batch: StateBatch) -> None:
        state = batch.delivery_state
        if state == RecordState.ACQUIRED:
            state = RecordState.AVAILABLE
        limit_reached = state == RecordState.AVAILABLE and batch.delivery_count >= self.limit
        if limit_reached:
            state = RecordState.ARCHIVED
        for offset in range(max(batch.first_offset, self._start), batch.last_offset + 1):
            self._extend_to(offset)
            self._records[offset - self._start] = InFlightRecord(state, batch.delivery_count)
            if limit_reached:
                self._archived.append(
                    ArchivedRecord(
                        offset, batch.delivery_count, ArchiveReason.DELIVERY_LIMIT_REACHED
                    )
                )

    def _extend_to(self, offset: int) -> None:
        """Make slots up to `offset`, the ones never read Available with no delivery."""
        missing = offset + 1 - self._start - len(self._records)
        if missing > 0:
            self._records.extend([InFlightRecord() for _ in range(missing)])

    def archived_at_load(self) -> StateChange | None:
        """The records loading archived (acquired at their last delivery when the leader
        before went away), to be dead-lettered and written as Archived; None if none."""
        if not self._archived:
            return None
        return self._changed([record.offset for record in self._archived])

    # -- what the broker asks ------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        """The offset after the last one in flight (the start offset when none is)."""
        return self._start + len(self._records)

    @property
    def limit(self) -> int:
        return self.config.delivery_count_limit

    def record(self, offset: int) -> InFlightRecord | None:
        if self._start <= offset < self.end_offset:
            return self._records[offset - self._start]
        return None

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first Available record in flight,
        else the end offset."""
        for index, record in enumerate(self._records):
            if record.state == RecordState.AVAILABLE:
                return self._start + index
        return self.end_offset

    def read_end(self, read_from: int, max_records: int) -> int:
        """The offset a log read for an acquisition of `max_records` from `read_from` may
        stop before: past the Available records in flight and the new ones that make up
        `max_records`, and never past start offset + max record locks. The batch holding
        the last of them still comes whole (a read takes every batch based below it).

        The log holds far more than a fetch acquires when a partition is shared: reading
        and walking all of it, to keep a few hundred records, was most of a ShareFetch's
        cost."""
        room_until = self._start + self.config.max_record_locks
        wanted = max(max_records, 1)
        offset = max(read_from, self._start)
        while offset < self.end_offset:
            if self._records[offset - self._start].state == RecordState.AVAILABLE:
                wanted -= 1
                if wanted == 0:
                    return offset + 1
            offset += 1
        return min(offset + wanted, room_until)

    def can_acquire(self) -> bool:
        """Whether an acquisition could give anything: a record in flight is Available,
        or there is room past the end offset."""
        if len(self._records) < self.config.max_record_locks:
            return True
        return any(record.state == RecordState.AVAILABLE for record in self._records)

    def next_lock_deadline(self) -> int | None:
        """When the earliest acquisition lock runs out, if any record is Acquired."""
        locks = self._locks
        while locks:
            deadline, first, last = locks[0]
            held = self._first_locked(deadline, first, last)
            if held is None:
                heapq.heappop(locks)
            elif held > first:
                # Trimmed, so that the records settled at its front are not walked again.
                heapq.heapreplace(locks, (deadline, held, last))
            else:
                return deadline
        return None

    def _first_locked(self, deadline: int, first: int, last: int) -> int | None:
        """The first offset of first..last still Acquired under `deadline`, if any."""
        start = self._start
        records = self._records
        for offset in range(max(first, start), min(last + 1, start + len(records))):
            record = records[offset - start]
            if record.state == RecordState.ACQUIRED and record.lock_deadline_ms == deadline:
                return offset
        return None

    def counts(self) -> dict[RecordState, int]:
        """How many records in flight are in each state."""
        found = dict.fromkeys(RecordState, 0)
        for record in self._records:
            found[record.state] += 1
        return found

    # -- operations -----------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        read_from: int,
        batches: Sequence[tuple[int, int]],
        max_records: int,
        now_ms: int,
        aborted: Collection[tuple[int, int]] = (),
    ) -> tuple[AcquiredRecords, ...]:
        """Acquire for `member_id` what the log read from `read_from` gave: `batches` as
        (base offset, last offset), in order. Stops at the first batch boundary once
        `max_records` are acquired (a batch is not split for it, as in Kafka), and at
        start offset + max record locks. The batches among `aborted` (records of aborted
        transactions, at read_committed) are archived instead: no one is to get them."""
        deadline = now_ms + self.config.record_lock_duration_ms
        room_until = self._start + self.config.max_record_locks
        acquired = 0
        # Runs of offsets acquired with one delivery count: [first, last, count].
        runs: list[list[int]] = []
        locks = self._locks
        records = self._records
        position = max(read_from, self._start)
        for base, last in batches:
            if acquired >= max_records:
                break
            # Offsets between the previous batch and this one are missing from the log:
            # they go with this batch, to be acknowledged as gaps.
            first, position = position, max(position, last + 1)
            stop = min(last, room_until - 1)
            if stop < first:
                continue
            self._extend_to(stop)
            archive = (base, last) in aborted
            start = self._start
            for offset in range(first, stop + 1):
                record = records[offset - start]
                if record.state != RecordState.AVAILABLE:
                    continue
                if archive and offset >= base:
                    record.state = RecordState.ARCHIVED
                    continue
                record.state = RecordState.ACQUIRED
                count = record.delivery_count = record.delivery_count + 1
                record.member_id = member_id
                record.lock_deadline_ms = deadline
                acquired += 1
                run = runs[-1] if runs else None
                if run is not None and run[1] == offset - 1 and run[2] == count:
                    run[1] = offset
                else:
                    runs.append([offset, offset, count])
            if stop < last:
                break
        # One lock entry per run: its records share the deadline, and expiry walks the run.
        for run_first, run_last, _ in runs:
            heapq.heappush(locks, (deadline, run_first, run_last))
        self._advance_start()
        return tuple(AcquiredRecords(first, last, count) for first, last, count in runs)

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> StateChange:
        """Apply a member's acknowledgements, all or none: InvalidRecordState, with nothing
        changed, unless every offset from the start offset on is Acquired by the member.
        Offsets below the start offset are already settled and are passed over, but a
        batch with none at or past it is refused, as Kafka's SharePartition refuses a
        batch it no longer caches: those records were settled without this member (its
        lock ran out, or its leader's state was read back without its acquisition, and
        another member took and accepted them), and saying yes would confirm one record
        accepted by two members."""
        start, records = self._start, self._records
        for batch in batches:
            if batch.last_offset >= self.end_offset:
                raise InvalidRecordState(
                    f"offsets {batch.first_offset}-{batch.last_offset} reach past the"
                    f" end offset {self.end_offset}: never acquired"
                )
            if batch.last_offset < start:
                raise InvalidRecordState(
                    f"offsets {batch.first_offset}-{batch.last_offset} are below the start"
                    f" offset {start}: settled already"
                )
            first = max(batch.first_offset, start)
            held = records[first - start : batch.last_offset + 1 - start]
            for index, record in enumerate(held):
                if record.state != RecordState.ACQUIRED or record.member_id != member_id:
                    raise InvalidRecordState(
                        f"offset {first + index} is {record.state.name}"
                        + (
                            " by another member"
                            if record.state == RecordState.ACQUIRED
                            else ", not acquired by this member"
                        )
                    )
        changed: list[int] = []
        for batch in batches:
            first = max(batch.first_offset, start)
            offsets = range(first, batch.last_offset + 1)
            changed.extend(offsets)
            if batch.types == (AcknowledgeType.ACCEPT,):
                # The common case, a run accepted whole, without a look-up per offset.
                for record in records[first - start : max(batch.last_offset + 1 - start, 0)]:
                    record.state = RecordState.ACKNOWLEDGED
                    record.member_id = None
                    record.lock_deadline_ms = 0
                continue
            for offset in offsets:
                kind = batch.type_at(offset)
                record = records[offset - start]
                if kind == AcknowledgeType.RELEASE:
                    self._release(offset, record)
                else:
                    self._settle(record, _AFTER_ACKNOWLEDGEMENT[kind])
                    if kind == AcknowledgeType.REJECT:
                        self._archived.append(
                            ArchivedRecord(offset, record.delivery_count, ArchiveReason.REJECTED)
                        )
        return self._changed(changed)

    def release_member(self, member_id: str) -> StateChange | None:
        """Release every record `member_id` holds (its share session closed); None if it
        held none."""
        changed = []
        for index, record in enumerate(self._records):
            if record.state == RecordState.ACQUIRED and record.member_id == member_id:
                self._release(self._start + index, record)
                changed.append(self._start + index)
        return self._changed(changed) if changed else None

    def expire_locks(self, now_ms: int) -> StateChange | None:
        """Release the records whose locks ran out by `now_ms`; None if there were none."""
        changed = []
        locks = self._locks
        while locks and locks[0][0] <= now_ms:
            deadline, first, last = heapq.heappop(locks)
            for offset in range(first, last + 1):
                record = self.record(offset)
                if (
                    record is not None
                    and record.state == RecordState.ACQUIRED
                    and record.lock_deadline_ms == deadline
                ):
                    self._release(offset, record)
                    changed.append(offset)
        return self._changed(changed) if changed else None

    def move_start(self, log_start_offset: int) -> StateChange | None:
        """The log's start moved past the start offset (retention, DeleteRecords): what
        lies before it can no longer be delivered. None if the start offset is past it."""
        if log_start_offset <= self._start:
            return None
        gone = min(log_start_offset - self._start, len(self._records))
        del self._records[:gone]
        self._start = log_start_offset
        self._advance_start()
        return StateChange(self._start, ())

    # -- changes ----------------------------------------------------------------------

    def _release(self, offset: int, record: InFlightRecord) -> None:
        if record.delivery_count >= self.limit:
            self._settle(record, RecordState.ARCHIVED)
            self._archived.append(
                ArchivedRecord(offset, record.delivery_count, ArchiveReason.DELIVERY_LIMIT_REACHED)
            )
        else:
            self._settle(record, RecordState.AVAILABLE)

    @staticmethod
    def _settle(record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = 0

    def _advance_start(self) -> None:
        done = 0
        for record in self._records:
            if record.state not in _DONE:
                break
            done += 1
        if done:
            del self._records[:done]
            self._start += done

    def _changed(self, offsets: list[int]) -> StateChange:
        """Advance the start offset, and describe the changed records beyond it as runs of
        one state and delivery count."""
        self._advance_start()
        start, end, records = self._start, self.end_offset, self._records
        # Runs as [first, last, state, delivery count], made into StateBatches once whole.
        runs: list[list[Any]] = []
        for offset in sorted(set(offsets)):
            if not start <= offset < end:
                continue  # settled and now behind the start offset
            record = records[offset - start]
            state, count = record.state, record.delivery_count
            run = runs[-1] if runs else None
            if run is not None and run[1] == offset - 1 and run[2] == state and run[3] == count:
                run[1] = offset
            else:
                runs.append([offset, offset, state, count])
        batches = [StateBatch(first, last, state, count) for first, last, state, count in runs]
        archived = tuple(sorted(self._archived, key=lambda record: record.offset))
        self._archived.clear()
        return StateChange(self._start, tuple(batches), archived)
