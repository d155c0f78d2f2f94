"""Per-record errors in Produce responses (KIP-467): a batch with invalid records is
refused whole, and the response names the records at fault."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer import ProduceResponse

from tests.support.broker import BrokerProcess, module_broker
from tests.support.requests import produce_request, v2_batch
from tests.support.wire import Wire

INVALID_RECORD = 87
INVALID_TIMESTAMP = 32


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("record-errors") / "data") as process:
        yield process


def create_topic(broker: BrokerProcess, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)


def read_all(broker: BrokerProcess, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
        }
    )
    partition = TopicPartition(topic, 0, OFFSET_BEGINNING)
    low, high = consumer.get_watermark_offsets(partition, timeout=10)
    consumer.assign([partition])
    out: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 30
    while len(out) < high - low and time.monotonic() < deadline:
        out += [(m.key(), m.value()) for m in consumer.consume(1000, timeout=1) if not m.error()]
    consumer.close()
    return out


def test_confluent_kafka_fails_exactly_the_keyless_records_on_a_compacted_topic(
    broker: BrokerProcess,
) -> None:
    """100 records in one batch to a compacted topic, 10 of them without a key.

    The broker refuses the batch whole (nothing is appended) with INVALID_RECORD
    and names the 10 keyless records. What librdkafka (since 2.4, KIP-467) makes of
    that: those 10 deliveries fail with INVALID_RECORD ("Broker failed to validate
    record"); the other 90 fail with its own _INVALID_DIFFERENT_RECORD ("an invalid
    record in the same batch caused the failure of this message too"). (librdkafka
    keeps the broker's reason for each record, but confluent-kafka's delivery report
    shows only the code's description.) librdkafka does not resend those 90 itself,
    INVALID_RECORD being permanent, and leaves it to the application, which can now
    tell them apart: resent, all 90 are stored, and the 10 keyless never are. (The
    Java producer does the same.)
    """
    topic = "compacted-keys"
    create_topic(broker, topic, **{"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200})
    reports: dict[int, tuple[int, str]] = {}

    def report(index: int) -> object:
        def delivered(err: KafkaError | None, _msg: object) -> None:
            reports[index] = (err.code(), err.str()) if err else (0, "")

        return delivered

    keyless = set(range(5, 100, 10))
    values = {i: b"value-%d" % i for i in range(100)}
    for i in range(100):
        key = None if i in keyless else b"key-%d" % i
        producer.produce(topic, key=key, value=values[i], on_delivery=report(i))
    assert producer.flush(30) == 0
    assert len(reports) == 100

    failed_as_invalid = {i for i, (code, _) in reports.items() if code == KafkaError.INVALID_RECORD}
    assert failed_as_invalid == keyless
    assert all("validate record" in reports[i][1] for i in keyless)
    innocent = {
        i for i, (code, _) in reports.items() if code == KafkaError._INVALID_DIFFERENT_RECORD
    }
    assert innocent == set(range(100)) - keyless
    assert read_all(broker, topic) == []  # the batch was refused whole

    # The application resends what was refused only for being in that batch.
    for i in sorted(innocent):
        producer.produce(topic, key=b"key-%d" % i, value=values[i], on_delivery=report(i))
    assert producer.flush(30) == 0
    assert {i for i, (code, _) in reports.items() if code == 0} == innocent
    assert read_all(broker, topic) == [(b"key-%d" % i, values[i]) for i in sorted(innocent)]


def produce_v8(wire: Wire, topic: str, batch: bytes) -> object:
    [topic_response] = wire.call(produce_request(8, topic, batch), ProduceResponse).responses
    [partition] = topic_response.partition_responses
    return partition


def batch_of(rows: list[tuple[bytes | None, int]]) -> bytes:
    return v2_batch([(key, b"v", timestamp) for key, timestamp in rows])


def test_each_bad_record_is_named_with_its_index_and_reason(broker: BrokerProcess) -> None:
    topic = "strict"
    create_topic(
        broker, topic, **{"cleanup.policy": "compact", "message.timestamp.before.max.ms": "60000"}
    )
    now = int(time.time() * 1000)
    wire = Wire(broker)
    try:
        # Keys missing at 1 and 3: INVALID_RECORD naming both.
        result = produce_v8(
            wire, topic, batch_of([(b"a", now), (None, now), (b"c", now), (None, now)])
        )
        assert result.error_code == INVALID_RECORD
        assert result.base_offset == -1
        assert [e.batch_index for e in result.record_errors] == [1, 3]
        assert all("without a key" in e.batch_index_error_message for e in result.record_errors)
        assert result.error_message and "2 records" in result.error_message
        # A record an hour old among good ones: INVALID_TIMESTAMP wins over INVALID_RECORD,
        # as in Kafka, and each record is named once, for its first fault.
        result = produce_v8(
            wire, topic, batch_of([(b"a", now), (None, now - 3_600_000), (b"c", now - 3_600_000)])
        )
        assert result.error_code == INVALID_TIMESTAMP
        assert [e.batch_index for e in result.record_errors] == [1, 2]
        assert "without a key" in result.record_errors[0].batch_index_error_message
        assert "out of range" in result.record_errors[1].batch_index_error_message
        # A good batch still goes in.
        result = produce_v8(wire, topic, batch_of([(b"a", now)]))
        assert (result.error_code, result.base_offset, result.record_errors) == (0, 0, [])
    finally:
        wire.close()
    assert Counter(key for key, _ in read_all(broker, topic)) == {b"a": 1}
