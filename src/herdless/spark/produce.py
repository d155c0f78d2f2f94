"""Rows of Arrow batches handed to a producer as records, for both kinds of write."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from herdless.spark.errors import HerdlessSparkError
from herdless.spark.options import WriteOptions

# Keep librdkafka's queue from filling up: wait for deliveries every so often.
POLL_EVERY = 10_000


class DeliveryFailures:
    """The first few records the broker refused, as the producer's delivery reports say."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def __call__(self, error, message) -> None:
        if error is not None and len(self.failures) < 5:
            self.failures.append(f"{message.topic()}-{message.partition()}: {error.str()}")

    def __bool__(self) -> bool:
        return bool(self.failures)

    def describe(self) -> str:
        return "; ".join(self.failures)


def produce_rows(
    producer: Producer,
    options: WriteOptions,
    batches: Iterator[pa.RecordBatch],
    delivered: DeliveryFailures,
) -> int:
    """Hand every row to the producer; stops early once a delivery has failed."""
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
            if delivered:
                return count
    return count
