"""The port: all the coordinator runtime needs of the log of one internal-topic partition.

Kafka's coordinator runtime reaches the log only through its `PartitionWriter`; ours
does the same, so that the runtime can be driven in tests by an in-memory writer and
the broker implements it in one small adapter over its replica manager.

What the port offers, and why no more:
- `append`: the records of one operation, as one batch. Synchronous, as the broker's
  append to a partition it leads is; being written is not being committed. A
  transactional write (TxnOffsetCommit) names its producer, and its batch is that
  producer's transactional batch.
- `append_end_transaction_marker`: the COMMIT or ABORT marker that ends a producer's
  transaction in the partition (Kafka's PartitionWriter appends it as any records;
  here it is a method of its own, since the log checks it against the producer's
  state and the runtime must know that nothing was written when it refuses).
- `read`: records for replay, one bounded step at a time, transactional ones and the
  markers that end their transactions told apart, in log order, so that the caller can let
  other work run between steps of a long load. The runtime chooses the bound: the
  high watermark for a standby (what lies above may still be truncated away by a new
  leader), the log end for a leader (its log is the truth from its election on).
- the log start, the log end and the high watermark, to know where replay starts and
  stops, and whether the log was truncated under what was replayed.
- `is_leader`: whether this broker can prove now that it leads the partition. Losing
  leadership is an input to the runtime; doubt about it (a lapsed ZooKeeper session
  that may yet be renewed) is not an event anyone announces, so it is asked.

Commit progress is not polled: the broker tells the runtime when a partition's high
watermark moved (`CoordinatorRuntime.high_watermark_moved`), as Kafka's writer
calls its high-watermark listener. The one read of it is right after an append, which
on a single broker (or with every follower already caught up) commits at once: the
replies go out in that same input, where a listener call from inside the append would
have to re-enter the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from herdless.coordinator.records import Record
from herdless.coordinator.result import TransactionalProducer
from herdless.protocol.errors import ErrorCode


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# Keys and values of consecutive records of one batch, in log order: a shard that can
# apply a run at once (the group shard's OffsetCommit runs) saves a call per record.
RecordRun = tuple[Sequence[bytes], Sequence[bytes | None]]


@dataclass(frozen=True, slots=True)
class TransactionalRun:
    """Consecutive records of one transactional batch: they count once a COMMIT marker
    of the same producer follows them, and never if an ABORT does."""

    producer: TransactionalProducer
    keys: Sequence[bytes]
    values: Sequence[bytes | None]


@dataclass(frozen=True, slots=True)
class EndTransaction:
    """A control batch: the marker that ends `producer_id`'s transaction here."""

    producer: TransactionalProducer
    committed: bool


# What one read hands to replay, in log order.
ReplayItem = RecordRun | TransactionalRun | EndTransaction


@dataclass(frozen=True, slots=True)
class ReplayChunk:
    """What one bounded read for replay found.

    `runs` are the keyed records from the read's start offset on, below its bound, in
    log order (records without a key are left out: a coordinator never writes one),
    with the records of transactional batches and the markers of control batches
    each in an item of their own.
    `next_offset` is where the next read starts: past the last record read, or the
    bound itself when nothing is left below it (compaction may leave gaps). It is
    always beyond the read's start offset, so replay always moves on.
    """

    runs: Sequence[ReplayItem]
    next_offset: int


class WriteError(Exception):
    """The append was refused or failed: not the leader any more, a full or failed disk.

    The message names why; the runtime reloads the shard, whose state ran ahead of the
    log, and reports the reason for the broker to log. `error_code` is Kafka's answer
    for it, for a caller answered with the error itself (a marker refused)."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.NOT_COORDINATOR) -> None:
        super().__init__(message)
        self.error_code = error_code


class PartitionWriter(Protocol):
    def append(
        self,
        tp: TopicPartition,
        records: Sequence[Record],
        producer: TransactionalProducer | None = None,
    ) -> int:
        """Append `records` as one batch, a transactional batch of `producer` when given;
        return the offset after the last one written.

        Raises WriteError naming why nothing was written."""
        ...

    def append_end_transaction_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> int:
        """Append the COMMIT (or ABORT) marker of `producer_id`'s transaction; return the
        offset after it.

        Raises WriteError naming why nothing was written, with Kafka's error for it
        (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS...)."""
        ...

    def read(self, tp: TopicPartition, start_offset: int, max_offset: int) -> ReplayChunk:
        """The records from `start_offset` below `max_offset`, as much as one bounded
        step reads (start_offset < max_offset)."""
        ...

    def log_start_offset(self, tp: TopicPartition) -> int: ...

    def log_end_offset(self, tp: TopicPartition) -> int: ...

    def high_watermark(self, tp: TopicPartition) -> int: ...

    def is_leader(self, tp: TopicPartition) -> bool:
        """Whether this broker leads `tp` and can prove it now."""
        ...
