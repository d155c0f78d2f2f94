"""Exactly-once streaming writes: each task's part of a micro-batch in one Kafka transaction,
committed by the driver once Spark has decided the batch succeeded.

A task's transactional id is `{prefix}-{query id}-{task partition}`. The query
id survives restarts from the checkpoint, and a replayed batch is planned into
the same task partitions (for a replayable source with deterministic batches),
so every attempt at the same part of the same batch uses the same id, and
init_transactions() fences and aborts any earlier attempt: a failed or
speculative task, or one cut off when the driver died.

Progress rides in the same transaction: a group named like the transactional
id commits offset batchId + 1 on partition 0 of the output topic, with
send_offsets_to_transaction. A group offset is not a read position here, only
a number that becomes visible atomically with the task's records. So an
attempt first reads that offset (with require_stable, which read_committed
consumers ask for, so a transaction still committing is waited for): at
batchId + 1 or beyond, this part is already written and the attempt writes
nothing.

The task does not commit: write() returning does not mean its input was whole
(Spark ends the input of a task whose upstream failed as if it were complete,
and fails the task only afterwards). It returns the open transaction's
producer id and epoch, and the driver commits every task's transaction in
commit(messages, batchId) (transaction_control.py). If the driver dies between
two of those commits, the replayed batch skips the committed parts and the
retried tasks' init_transactions() abort the rest, which are written again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from herdless.spark.client import (
    committed_offsets,
    kafka_reason,
    quiet_consumer,
    quiet_producer,
)
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.options import WriteOptions
from herdless.spark.produce import DeliveryFailures, produce_rows
from herdless.spark.transaction_control import OpenTransaction, TransactionControl

# Local properties Spark's micro-batch execution sets on every task it runs.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class BatchTask:
    """Which part of which batch of which query a write() is."""

    query_id: str
    batch_id: int
    partition: int

    def transactional_id(self, prefix: str) -> str:
        return f"{prefix}-{self.query_id}-{self.partition}"


def current_task() -> BatchTask:
    """This task's place in its streaming query, as Spark's TaskContext tells it."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if context is None or query_id is None or batch_id is None:
        raise HerdlessSparkError(
            "option transactionalIdPrefix: Spark did not tell this task its streaming query "
            "id and batch id; exactly-once writes work in writeStream micro-batch queries only"
        )
    return BatchTask(query_id, int(batch_id), context.partitionId())


# A task's producer must outlive write(): its transaction stays open for the driver to
# commit, and a destroyed producer could end it. The next attempt with the same
# transactional id in this worker replaces it (its init_transactions fences it anyway).
_open_producers: dict[str, Producer] = {}


def write_once(
    options: WriteOptions, task: BatchTask, batches: Iterator[pa.RecordBatch]
) -> tuple[int, OpenTransaction | None]:
    """Write this task's rows and its progress in one transaction, left open for the driver:
    (rows written, the transaction), or (0, None) when this part was committed before."""
    assert options.transactional_id_prefix is not None and options.topic is not None
    connection = options.connection
    transactional_id = task.transactional_id(options.transactional_id_prefix)
    progress_partition = (options.topic, 0)
    timeout = connection.connect_timeout_s * 6
    _open_producers.pop(transactional_id, None)
    producer = quiet_producer(connection, transactional_id)
    progress = quiet_consumer(connection, transactional_id, **{"isolation.level": "read_committed"})
    began = False
    try:
        producer.init_transactions(timeout)
        done = committed_offsets(progress, connection, [progress_partition])
        if done.get(progress_partition, 0) > task.batch_id:
            return 0, None
        producer.begin_transaction()
        began = True
        delivered = DeliveryFailures()
        count = produce_rows(producer, options, batches, delivered)
        if not delivered:
            producer.send_offsets_to_transaction(
                [KafkaTopicPartition(options.topic, 0, task.batch_id + 1)],
                progress.consumer_group_metadata(),
                timeout,
            )
        remaining = producer.flush(timeout)
        if delivered or remaining:
            raise HerdlessSparkError(
                f"writing to the broker at {connection.bootstrap} failed: "
                f"{delivered.describe() or f'{remaining} records not acknowledged in time'}"
            )
        transaction = TransactionControl(connection.bootstrap, timeout).describe(transactional_id)
        _open_producers[transactional_id] = producer
        return count, transaction
    except KafkaException as exc:
        if began:
            _abort(producer, timeout)
        raise HerdlessSparkError(
            f"transaction {transactional_id} (batch {task.batch_id}) failed on the broker at "
            f"{connection.bootstrap}: {kafka_reason(exc)}"
        ) from None
    except BaseException:
        if began:
            _abort(producer, timeout)
        raise
    finally:
        progress.close()


def commit_batch(options: WriteOptions, transactions: list[OpenTransaction]) -> None:
    """The driver's half: commit every task's transaction of a batch that succeeded."""
    control = TransactionControl(
        options.connection.bootstrap, options.connection.connect_timeout_s * 6
    )
    for transaction in transactions:
        control.end(transaction, commit=True)


def abort_batch(options: WriteOptions, transactions: list[OpenTransaction]) -> None:
    """Abort what the tasks of a failed batch left open; whatever cannot be aborted now is
    aborted by the replay's init_transactions() or at the transaction's timeout."""
    connection = options.connection
    control = TransactionControl(connection.bootstrap, connection.connect_timeout_s)
    for transaction in transactions:
        with contextlib.suppress(HerdlessSparkError):
            control.end(transaction, commit=False)


def _abort(producer: Producer, timeout: float) -> None:
    """Abort what this attempt wrote; if that fails too, the next attempt's
    init_transactions() aborts it, or the coordinator does at its timeout."""
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(timeout)
