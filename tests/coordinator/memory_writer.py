"""An in-memory PartitionWriter: the runtime's log with no broker, no files, no loop.

Every replica of a partition shares one MemoryLog, as if followers fetched at once;
what a follower could not have yet is what lies above the high watermark, and a new
leader that never had it is modelled by `truncate`. The test moves the high
watermark itself (`MemoryLog.high_watermark`, then the runtime's
high_watermark_moved), unless `auto_commit` makes every append committed at once, as
on a single broker. Appends fail on demand (`refuse`), and leadership can be in doubt
(`in_doubt`) without having moved. A transactional batch remembers its producer, and a
transaction's marker is a record of its own, read back as the broker's writer reads a
control batch.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from herdless.coordinator.records import Record
from herdless.coordinator.result import TransactionalProducer
from herdless.coordinator.runtime import (
    EndTransaction,
    ReplayChunk,
    ReplayItem,
    TopicPartition,
    TransactionalRun,
    WriteError,
)
from herdless.protocol.errors import ErrorCode

# What stands in the log for a marker's record (its meaning is in MemoryLog.markers).
MARKER_RECORD = Record(b"", None)


@dataclass
class MemoryLog:
    records: list[Record] = field(default_factory=list)
    # The log end after each append: where a batch ends, and the high watermark may stop.
    batch_ends: list[int] = field(default_factory=list)
    high_watermark: int = 0
    leader: int | None = None
    in_doubt: bool = False
    auto_commit: bool = False
    # Why each of the next appends fails, in order.
    refusals: deque[str] = field(default_factory=deque)
    # The producer of each transactional batch, by the batch's end offset.
    producers: dict[int, TransactionalProducer] = field(default_factory=dict)
    # Each transaction marker, by its offset.
    markers: dict[int, EndTransaction] = field(default_factory=dict)

    @property
    def log_end(self) -> int:
        return len(self.records)

    def refuse(self, reason: str) -> None:
        self.refusals.append(reason)

    def truncate(self, offset: int) -> None:
        """Drop the records from `offset` on, as a new leader without them would."""
        del self.records[offset:]
        del self.batch_ends[bisect.bisect_right(self.batch_ends, offset) :]
        self.producers = {end: p for end, p in self.producers.items() if end <= offset}
        self.markers = {at: m for at, m in self.markers.items() if at < offset}
        if self.batch_ends[-1:] != [offset] and offset:
            # The cut fell inside a batch: what is left of it is a batch of its own.
            self.batch_ends.append(offset)
        self.high_watermark = min(self.high_watermark, offset)

    def batch_end_after(self, offset: int) -> int:
        """The end of the batch holding `offset` (followers fetch whole batches)."""
        return self.batch_ends[bisect.bisect_right(self.batch_ends, offset)]

    def batch_start(self, end: int) -> int:
        index = self.batch_ends.index(end)
        return self.batch_ends[index - 1] if index else 0


class MemoryWriter:
    """Broker `broker_id`'s view of the shared logs."""

    def __init__(
        self, logs: dict[TopicPartition, MemoryLog], broker_id: int = 0, read_records: int = 3
    ) -> None:
        self.logs = logs
        self.broker_id = broker_id
        # How many records one read for replay returns at most: small, so that loads
        # take several steps.
        self.read_records = read_records

    def log(self, tp: TopicPartition) -> MemoryLog:
        return self.logs.setdefault(tp, MemoryLog())

    def append(
        self,
        tp: TopicPartition,
        records: Sequence[Record],
        producer: TransactionalProducer | None = None,
    ) -> int:
        log = self._writable(tp)
        if producer is not None:
            _check_epoch(log, *producer)
        log.records.extend(records)
        return self._appended(log, producer)

    def append_end_transaction_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> int:
        log = self._writable(tp)
        _check_epoch(log, producer_id, producer_epoch)
        producer = TransactionalProducer(producer_id, producer_epoch)
        log.markers[log.log_end] = EndTransaction(producer, committed)
        log.records.append(MARKER_RECORD)
        return self._appended(log, None)

    def _writable(self, tp: TopicPartition) -> MemoryLog:
        log = self.log(tp)
        if log.leader != self.broker_id:
            raise WriteError(f"broker {self.broker_id} does not lead {tp}")
        if log.refusals:
            raise WriteError(log.refusals.popleft())
        return log

    @staticmethod
    def _appended(log: MemoryLog, producer: TransactionalProducer | None) -> int:
        log.batch_ends.append(log.log_end)
        if producer is not None:
            log.producers[log.log_end] = producer
        if log.auto_commit:
            log.high_watermark = log.log_end
        return log.log_end

    def read(self, tp: TopicPartition, start_offset: int, max_offset: int) -> ReplayChunk:
        log = self.log(tp)
        stop = min(max_offset, start_offset + self.read_records, log.log_end)
        runs: list[ReplayItem] = []
        offset = start_offset
        while offset < stop:
            end = log.batch_end_after(offset)
            marker = log.markers.get(offset)
            if marker is not None:
                runs.append(marker)
                offset += 1
                continue
            if offset == log.batch_start(end) and end <= stop:
                # A whole batch: one run, as the broker cuts them from a batch.
                batch = log.records[offset:end]
                keys, values = [r.key for r in batch], [r.value for r in batch]
                offset = end
            else:
                record = log.records[offset]
                keys, values = [record.key], [record.value]
                offset += 1
            producer = log.producers.get(end)
            runs.append(
                (keys, values) if producer is None else TransactionalRun(producer, keys, values)
            )
        return ReplayChunk(runs, stop)

    def log_start_offset(self, tp: TopicPartition) -> int:
        return 0

    def log_end_offset(self, tp: TopicPartition) -> int:
        return self.log(tp).log_end

    def high_watermark(self, tp: TopicPartition) -> int:
        return self.log(tp).high_watermark

    def is_leader(self, tp: TopicPartition) -> bool:
        log = self.log(tp)
        return log.leader == self.broker_id and not log.in_doubt


def _check_epoch(log: MemoryLog, producer_id: int, producer_epoch: int) -> None:
    """The log's own check of a producer's batch or marker: no epoch older than the last
    one it wrote."""
    written = [*log.producers.values(), *(m.producer for m in log.markers.values())]
    epochs = [p.producer_epoch for p in written if p.producer_id == producer_id]
    if epochs and producer_epoch < max(epochs):
        raise WriteError(
            f"producer {producer_id}: epoch {producer_epoch} is old",
            ErrorCode.INVALID_PRODUCER_EPOCH,
        )
