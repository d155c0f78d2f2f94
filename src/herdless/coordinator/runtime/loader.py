"""Replay of a partition into its shard, one bounded read at a time (Kafka's
CoordinatorLoader, cut into steps so that the broker serves other partitions between
them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from herdless.coordinator.records import Record
from herdless.coordinator.result import TransactionalProducer
from herdless.coordinator.runtime.contract import (
    CoordinatorShard,
    ReplaysRuns,
    ReplaysTransactions,
)
from herdless.coordinator.runtime.writer import (
    EndTransaction,
    PartitionWriter,
    TopicPartition,
    TransactionalRun,
)

ReplayRun = Callable[[Sequence[bytes], Sequence[bytes | None]], None]


def run_replayer(shard: CoordinatorShard) -> ReplayRun | None:
    """The shard's way to apply a run of records at once, if it has one."""
    return shard.replay_records if isinstance(shard, ReplaysRuns) else None


def replay_step(
    writer: PartitionWriter,
    tp: TopicPartition,
    shard: CoordinatorShard,
    replay_run: ReplayRun | None,
    start_offset: int,
    bound: int,
) -> tuple[int, int]:
    """Replay one read of `tp` from `start_offset` below `bound` into `shard`.

    Returns where the next read starts and how many records were replayed."""
    chunk = writer.read(tp, start_offset, bound)
    if not start_offset < chunk.next_offset <= bound:
        # A writer that does not move on would have the broker replay for ever.
        raise ValueError(
            f"{tp}: a read from {start_offset} below {bound} ended at {chunk.next_offset}"
        )
    replayed = 0
    for run in chunk.runs:
        if isinstance(run, _TRANSACTIONAL):
            replayed += replay_transactional(shard, run)
            continue
        keys, values = run
        if len(keys) == 1:
            shard.replay(keys[0], values[0])
        elif replay_run is not None:
            replay_run(keys, values)
        else:
            for key, value in zip(keys, values, strict=True):
                shard.replay(key, value)
        replayed += len(keys)
    return chunk.next_offset, replayed


_TRANSACTIONAL = (TransactionalRun, EndTransaction)


def replay_transactional(shard: CoordinatorShard, item: TransactionalRun | EndTransaction) -> int:
    """Replay a transaction's records or its end into `shard`; how many records it was."""
    takes_part = isinstance(shard, ReplaysTransactions)
    producer_id, producer_epoch = item.producer
    if isinstance(item, EndTransaction):
        if takes_part:
            shard.replay_end_transaction(producer_id, producer_epoch, item.committed)
        return 1
    for key, value in zip(item.keys, item.values, strict=True):
        if takes_part:
            shard.replay_transactional(producer_id, producer_epoch, key, value)
        else:
            shard.replay(key, value)
    return len(item.keys)


def replay_written(
    shard: CoordinatorShard, producer: TransactionalProducer, records: Sequence[Record]
) -> None:
    """A transaction's records the log just took from a write, applied as loading applies
    them (TransactionalProducer)."""
    keys = [record.key for record in records]
    values = [record.value for record in records]
    replay_transactional(shard, TransactionalRun(producer, keys, values))
