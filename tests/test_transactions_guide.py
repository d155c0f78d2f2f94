"""docs/transactions.md runs as written: each of its Python blocks against a broker at
Kafka's port, then what each consume-transform-produce block wrote is checked: every
input record once in its output topic, read with read_committed, and its group's
committed offsets at the end of the input."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, loopback_host_with_free, module_broker
from tests.support.exactly_once import read_committed

GUIDE = Path(__file__).parents[1] / "docs" / "transactions.md"
KAFKA_PORT = 9092
PARTITIONS = 3
RECORDS = 30  # in `orders`, spread over its partitions
# The guide's consume-transform-produce blocks: output topic, group, transform.
PIPELINES = {
    "order-totals": bytes.upper,
    "order-copies": bytes,
    "order-archive": bytes,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """At Kafka's port on a loopback address of its own: the guide's `127.0.0.1:9092`."""
    host = loopback_host_with_free(KAFKA_PORT)
    data = tmp_path_factory.mktemp("guide") / "data"
    with module_broker(
        data, "--set", "group.initial.rebalance.delay.ms=0", host=host, port=KAFKA_PORT
    ) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        # One partition of invoices: each one read holds records, as the reader needs.
        topics = [NewTopic(name, PARTITIONS, 1) for name in ["orders", *PIPELINES]]
        topics.append(NewTopic("invoices", 1, 1))
        for future in admin.create_topics(topics).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": process.bootstrap})
        for i in range(RECORDS):
            producer.produce("orders", key=b"k%d" % i, value=b"order-%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        yield process


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), flags=re.M | re.S)


def values(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> list[bytes]:
    found = read_committed(broker.bootstrap, topic, partitions, 30)
    return [value for partition in found.values() for value in partition]


def test_the_guide_runs_and_each_pipeline_writes_every_record_once(
    broker: BrokerProcess,
) -> None:
    blocks = python_blocks()
    assert len(blocks) == 6
    for block in blocks:
        code = block.replace("127.0.0.1:9092", broker.bootstrap)
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "guide"})  # noqa: S102

    invoices = sorted(values(broker, "invoices", 1))
    # Committed: alice, bob, dave, erin; carol was aborted.
    assert invoices == sorted([b"42.00", b"17.50", b"5.00", b"8.25"])
    expected = sorted(b"order-%d" % i for i in range(RECORDS))
    for output, transform in PIPELINES.items():
        assert sorted(values(broker, output)) == sorted(transform(v) for v in expected), output
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": output})
        try:
            committed = consumer.committed(
                [KafkaPartition("orders", p) for p in range(PARTITIONS)], 30
            )
        finally:
            consumer.close()
        assert [tp.offset for tp in committed] == [RECORDS // PARTITIONS] * PARTITIONS, output
