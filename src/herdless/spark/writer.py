"""df.write / df.writeStream .format("herdless"): rows become records, one idempotent producer
per task.

Columns are Spark's Kafka sink columns: value (required), key, headers,
partition and topic (or the option topic). The idempotent producer keeps
broker-side retries from duplicating or reordering records; like Spark's Kafka
sink the write is at-least-once when Spark itself retries a task or replays a
batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from herdless.spark.client import quiet_producer
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.options import WriteOptions
from herdless.spark.schema import HEADER_SPARK, WRITE_COLUMNS

# Keep librdkafka's queue from filling up: wait for deliveries every so often.
POLL_EVERY = 10_000


@dataclass
class Written(WriterCommitMessage):
    records: int


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
    failures: list[str] = []

    def delivered(error, message) -> None:
        if error is not None and len(failures) < 5:
            failures.append(f"{message.topic()}-{message.partition()}: {error.str()}")

    count = 0
    for batch in batches:
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
        n = batch.num_rows
        keys = columns.get("key", [None] * n)
        values = columns["value"]
        headers = columns.get("headers", [None] * n)
        partitions = columns.get("partition", [None] * n)
        topics = columns.get("topic", [options.topic] * n)
        for i in range(n):
            extra = {}
            if partitions[i] is not None:
                extra["partition"] = partitions[i]
            if headers[i]:
                extra["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            topic = topics[i]
            if topic is None:
                raise HerdlessSparkError("a row has a null topic")
            while True:
                try:
                    producer.produce(topic, values[i], keys[i], on_delivery=delivered, **extra)
                    break
                except BufferError:
                    producer.poll(0.1)  # local queue full: let deliveries drain
                except KafkaException as exc:
                    raise HerdlessSparkError(f"producing to {topic}: {exc}") from None
            count += 1
            if count % POLL_EVERY == 0:
                producer.poll(0)
            if failures:
                break
    remaining = producer.flush(options.connection.connect_timeout_s * 6)
    if failures:
        raise HerdlessSparkError(
            f"writing to the broker at {options.connection.bootstrap} failed: {'; '.join(failures)}"
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
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # records already acknowledged stay: at-least-once, as Spark's Kafka sink
