"""Executor side, through librdkafka: for connections that need TLS or SASL.

The plaintext path (fetch.py) decodes the broker's record batches in bulk;
librdkafka hands out one Python message per record instead, which costs
several times more, but it speaks every security protocol Kafka has. The rows
are the same either way (tests/spark/test_fetch.py compares the two).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from herdless.spark.client import quiet_consumer
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import OffsetRange
from herdless.spark.options import ClientOptions
from herdless.spark.schema import HEADERS_ARROW, arrow_schema

BATCH_ROWS = 10_000
EXECUTOR_GROUP = "herdless-spark-executor"  # assign() only: never joins, never commits


def read_range_rdkafka(
    connection: ClientOptions, offsets: OffsetRange, poll_timeout_s: float, headers: bool
) -> Iterator[pa.RecordBatch]:
    schema = arrow_schema(headers)
    consumer = quiet_consumer(
        connection,
        EXECUTOR_GROUP,
        # librdkafka stops prefetching when its queue is full and, by default,
        # waits a whole second before fetching again: a 1 s stall in a 0.2 s read.
        defaults={"fetch.queue.backoff.ms": 10, "client.id": "herdless-spark-executor"},
        **{
            # Records before the range were deleted: fail loudly, never skip silently.
            "auto.offset.reset": "error",
            # The end of the log ends a range whose last offsets hold no record
            # (compaction, transaction markers).
            "enable.partition.eof": True,
        },
    )
    try:
        consumer.assign([KafkaTopicPartition(offsets.topic, offsets.partition, offsets.start)])
        position = offsets.start
        last_progress = time.monotonic()
        while position < offsets.until:
            wanted = min(BATCH_ROWS, offsets.until - position)
            messages = consumer.consume(wanted, timeout=1.0)
            records = []
            at_end = False
            for message in messages:
                error = message.error()
                if error is None:
                    if message.offset() < offsets.until:
                        records.append(message)
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end = True
                else:
                    raise HerdlessSparkError(
                        f"reading {offsets.topic}-{offsets.partition} offsets "
                        f"{offsets.start}..{offsets.until}: {error.str()}"
                    )
            if records:
                position = records[-1].offset() + 1
                last_progress = time.monotonic()
                yield _to_arrow(records, schema, headers)
            if at_end:
                break
            if time.monotonic() - last_progress > poll_timeout_s:
                raise HerdlessSparkError(
                    f"no record of {offsets.topic}-{offsets.partition} arrived for "
                    f"{poll_timeout_s:g}s at offset {position} "
                    f"(reading up to {offsets.until}); is the broker at "
                    f"{connection.bootstrap} up?"
                )
    finally:
        consumer.close()


def _to_arrow(messages: list, schema: pa.Schema, headers: bool) -> pa.RecordBatch:
    n = len(messages)
    first = messages[0]
    stamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([first.topic()] * n, pa.string()),
        pa.array([first.partition()] * n, pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        # Kafka stamps milliseconds; Spark wants microseconds.
        pa.array([s[1] * 1000 for s in stamps], pa.int64()).cast(schema.field(5).type),
        # librdkafka: 1 create time, 2 log append time; Spark (Java's ids): 0 and 1.
        pa.array([s[0] - 1 for s in stamps], pa.int32()),
    ]
    if headers:
        raw = [m.headers() for m in messages]
        if any(raw):
            columns.append(pa.array(raw, HEADERS_ARROW))
        else:
            columns.append(pa.nulls(n, HEADERS_ARROW))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
