"""df.write / df.writeStream .format("herdless"): rows become records, one idempotent producer
per task.

Columns are Spark's Kafka sink columns: value (required), key, headers,
partition and topic (or the option topic). The idempotent producer keeps
broker-side retries from duplicating or reordering records; like Spark's Kafka
sink the write is at-least-once when Spark itself retries a task or replays a
batch. With the option transactionalIdPrefix a streaming write is exactly-once
instead (transactions.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from herdless.spark.client import quiet_producer
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.options import WriteOptions
from herdless.spark.produce import DeliveryFailures, produce_rows
from herdless.spark.schema import HEADER_SPARK, WRITE_COLUMNS
from herdless.spark.transaction_control import OpenTransaction
from herdless.spark.transactions import abort_batch, commit_batch, current_task, write_once


@dataclass
class Written(WriterCommitMessage):
    records: int
    transaction: OpenTransaction | None = None  # exactly-once: left open for commit()


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    names = schema.fieldNames()
    unknown = [n for n in names if n not in WRITE_COLUMNS]
    if unknown:
        raise HerdlessSparkError(
            f"column {', '.join(unknown)} cannot be written; the herdless format writes the "
            f"columns {', '.join(WRITE_COLUMNS)}"
        )
    if "value" not in names:
        raise HerdlessSparkError("the herdless format needs a value column to write")
    if options.topic is None and "topic" not in names:
        raise HerdlessSparkError("set the option topic or write a topic column")
    if options.topic is not None and "topic" in names:
        raise HerdlessSparkError("set the option topic or write a topic column, not both")
    types = {f.name: f.dataType for f in schema.fields}
    for column in ("key", "value"):
        if column in types and not isinstance(types[column], BinaryType | StringType):
            raise HerdlessSparkError(
                f"column {column} must be binary or string, not {types[column].simpleString()}"
            )
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise HerdlessSparkError("column partition must be an int")
    wanted_headers = f"array<{HEADER_SPARK.simpleString()}>"
    if "headers" in types and types["headers"].simpleString() != wanted_headers:
        raise HerdlessSparkError(
            f"column headers must be {wanted_headers}, not {types['headers'].simpleString()}"
        )


def produce_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> Written:
    producer = quiet_producer(options.connection)
    delivered = DeliveryFailures()
    count = produce_rows(producer, options, batches, delivered)
    remaining = producer.flush(options.connection.connect_timeout_s * 6)
    if delivered:
        raise HerdlessSparkError(
            f"writing to the broker at {options.connection.bootstrap} failed: "
            f"{delivered.describe()}"
        )
    if remaining:
        raise HerdlessSparkError(
            f"{remaining} records were not acknowledged by the broker at "
            f"{options.connection.bootstrap} in time"
        )
    return Written(count)


class HerdlessWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # every record was acknowledged before its task reported success


class HerdlessStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.options.exactly_once:
            return Written(*write_once(self.options, current_task(), iterator))
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            commit_batch(self.options, _open_transactions(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Idempotent writes stay: at-least-once, as Spark's Kafka sink.
        if self.options.exactly_once:
            abort_batch(self.options, _open_transactions(messages))


def _open_transactions(messages: list[WriterCommitMessage | None]) -> list[OpenTransaction]:
    return [m.transaction for m in messages if isinstance(m, Written) and m.transaction is not None]
