"""The coordinator runtime's PartitionWriter over this broker's replica manager and logs.

What "committed" means to the runtime is what an acks=all producer waits for: the
records are below the high watermark and as durable as the topic's flush policy asks
(ReplicaManager.committed). The log's own high watermark says only the first half on a
single broker, where it follows the log end, so for a partition it leads the writer
reports the offset it last knew committed, and names every append that was not
committed at once in `uncommitted`, for the glue to wait on and report back with the
runtime's high_watermark_moved. A follower reports its log's high watermark, which the
leader only moves past records the in-sync replicas hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from herdless.broker import clock
from herdless.broker.replication.replica_manager import ACKS_ALL, PartitionError, ReplicaManager
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
from herdless.protocol.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    InvalidControlRecord,
    build_marker_batch,
    marker_of,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.record_columns import iter_key_value_runs
from herdless.protocol.records import (
    TRANSACTIONAL_FLAG,
    BatchHeader,
    build_batch,
    encode_batch,
    iter_batches,
    iter_records,
    parse_header,
)
from herdless.storage import LogManager, PartitionLog, StorageError

# How much of the partition one replay step reads before yielding to the loop: small
# enough that groups on loaded partitions keep being served while others load
# (with 4 MiB, a benchmark saw 1.5 s stalls of OffsetFetch during a 1M-record load).
LOAD_READ_BYTES = 256 * 1024


class Leadership:
    """One spell of this broker leading a partition: its log, and what it knows
    committed in it."""

    __slots__ = ("committed", "log")

    def __init__(self, log: PartitionLog) -> None:
        # Kept for the spell: the log is found once, not on every append.
        self.log = log
        # Every record below this offset is committed.
        self.committed = log.high_watermark


@dataclass(frozen=True, slots=True)
class CommitWait:
    """Records of `tp` below `end_offset`, appended in `leadership`, not yet committed."""

    tp: TopicPartition
    log: PartitionLog
    end_offset: int
    leadership: Leadership


class ReplicaWriter:
    def __init__(self, logs: LogManager, replicas: ReplicaManager) -> None:
        self.logs = logs
        self.replicas = replicas
        self._leading: dict[TopicPartition, Leadership] = {}
        # Appends not committed at once, in order, for the glue to wait on.
        self.uncommitted: list[CommitWait] = []

    def log(self, tp: TopicPartition) -> PartitionLog:
        partition_log = self.logs.partition(tp.topic, tp.partition)
        if partition_log is None:
            raise WriteError(f"{tp} is not hosted here")
        return partition_log

    def append(
        self,
        tp: TopicPartition,
        records: Sequence[Record],
        producer: TransactionalProducer | None = None,
    ) -> int:
        # The records' timestamp is written: the wall clock's.
        if producer is None:
            return self._append(tp, build_batch(records, clock.wall_ms()))
        # A TxnOffsetCommit's: the producer's transactional batch, at sequence 0 as Kafka's
        # coordinator writes it (the log checks no sequence of a coordinator's batch).
        now = clock.wall_ms()
        batch = encode_batch(
            [(now, record.key, record.value) for record in records],
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=0,
            flags=TRANSACTIONAL_FLAG,
        )
        return self._append(tp, batch)

    def append_end_transaction_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
    ) -> int:
        kind = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
        marker = EndTransactionMarker(kind, coordinator_epoch)
        # Checked by the log against the producer's state as any marker is (storage's
        # append_end_txn_marker), through the replica manager, which keeps acks=all.
        return self._append(
            tp, build_marker_batch(marker, producer_id, producer_epoch, clock.wall_ms())
        )

    def _append(self, tp: TopicPartition, batch: bytes) -> int:
        try:
            # Looked up here, not through _leadership(): two calls less on every commit.
            leadership = self._leading.get(tp) or self._leadership(tp, self.log(tp))
            partition_log = leadership.log
            # Every record of a coordinator's has a key (Record.key is never None).
            info = self.replicas.append(
                partition_log,
                [(parse_header(batch), memoryview(batch))],
                ACKS_ALL,
                keyed=True,
            )
        except (StorageError, PartitionError) as exc:
            # A full disk is counted and logged where it happened (rate-limited).
            raise WriteError(str(exc), exc.error_code) from exc
        except Exception as exc:
            # Whatever failed, the state ran ahead of the log: the runtime rebuilds it.
            raise WriteError(
                f"{type(exc).__name__}: {exc}", ErrorCode.UNKNOWN_SERVER_ERROR
            ) from exc
        end = info.last_offset + 1
        if self.replicas.committed_now(partition_log, ACKS_ALL, end):
            if end > leadership.committed:
                leadership.committed = end
        else:
            self.uncommitted.append(CommitWait(tp, partition_log, end, leadership))
        return end

    def _leadership(self, tp: TopicPartition, partition_log: PartitionLog) -> Leadership:
        leadership = self._leading.get(tp)
        if leadership is None:
            leadership = self._leading[tp] = Leadership(partition_log)
        return leadership

    def await_tail(self, tp: TopicPartition) -> None:
        """A new leader serves from now on: have the glue wait for its log's uncommitted
        tail, if it has one, as for an append of its own."""
        partition_log = self.log(tp)
        leadership = self._leadership(tp, partition_log)
        if leadership.committed < partition_log.log_end_offset:
            self.uncommitted.append(
                CommitWait(tp, partition_log, partition_log.log_end_offset, leadership)
            )

    def committed(self, wait: CommitWait) -> int | None:
        """The records `wait` waited for are committed: the offset now known committed,
        None if this broker's leadership of the partition changed meanwhile."""
        leadership = wait.leadership
        if self._leading.get(wait.tp) is not leadership:
            return None
        leadership.committed = max(leadership.committed, wait.end_offset)
        return leadership.committed

    def forget(self, tp: TopicPartition) -> None:
        """This broker's role for `tp` changed: what it knew committed as leader is void."""
        self._leading.pop(tp, None)

    def read(self, tp: TopicPartition, start_offset: int, max_offset: int) -> ReplayChunk:
        data = self.log(tp).read(start_offset, LOAD_READ_BYTES, max_offset=max_offset)
        if not data:
            # Compaction left nothing between here and the bound.
            return ReplayChunk((), max_offset)
        runs: list[ReplayItem] = []
        next_offset = start_offset
        view = memoryview(data)
        for position, header in iter_batches(view):
            batch = view[position : position + header.size]
            if header.is_transactional:
                # A TxnOffsetCommit's batch, or the marker that ends its transaction.
                item = _transactional_item(batch, header, start_offset, max_offset)
                if item is not None:
                    runs.append(item)
                next_offset = max(next_offset, min(header.last_offset + 1, max_offset))
                continue
            if start_offset <= header.base_offset and header.last_offset < max_offset:
                # All of the batch is replayed, so its records' offsets are not needed:
                # its keys and values come a run at a time, cut out in C.
                runs.extend(
                    (keys, values)  # type: ignore[misc]
                    for keys, values in iter_key_value_runs(batch, header)
                    if keys[0] is not None
                )
                next_offset = header.last_offset + 1
                continue
            for record in iter_records(batch, header):
                if record.offset < start_offset or record.key is None:
                    continue
                if record.offset >= max_offset:
                    return ReplayChunk(runs, max_offset)
                runs.append(((record.key,), (record.value,)))
                next_offset = record.offset + 1
            next_offset = max(next_offset, min(header.last_offset + 1, max_offset))
        # A read always moves on, even over a batch that held nothing to replay.
        return ReplayChunk(runs, max(next_offset, min(start_offset + 1, max_offset)))

    def log_start_offset(self, tp: TopicPartition) -> int:
        return self.log(tp).log_start_offset

    def log_end_offset(self, tp: TopicPartition) -> int:
        return self.log(tp).log_end_offset

    def high_watermark(self, tp: TopicPartition) -> int:
        leadership = self._leading.get(tp)
        return self.log(tp).high_watermark if leadership is None else leadership.committed

    def is_leader(self, tp: TopicPartition) -> bool:
        return self.replicas.leads(tp.topic, tp.partition)


def _transactional_item(
    batch: memoryview, header: BatchHeader, start_offset: int, max_offset: int
) -> ReplayItem | None:
    """What replay makes of a transactional batch's records from `start_offset` below
    `max_offset`: a transaction's keyed records, or the end of the transaction its control
    batch marks (None: nothing in range, or a control record that is not a transaction
    marker, which Kafka passes over too)."""
    producer = TransactionalProducer(header.producer_id, header.producer_epoch)
    if header.is_control:
        if not start_offset <= header.base_offset < max_offset:
            return None
        try:
            marker = marker_of(batch, header)
        except InvalidControlRecord:
            return None
        return EndTransaction(producer, not marker.aborted)
    records = [
        r
        for r in iter_records(batch, header)
        if start_offset <= r.offset < max_offset and r.key is not None
    ]
    if not records:
        return None
    return TransactionalRun(producer, [r.key for r in records], [r.value for r in records])
