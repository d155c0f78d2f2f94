"""Fetch sessions (KIP-227) as clients use them, and as the wire shows them.

kafka-python opens a session with its first fetch and then fetches
incrementally; librdkafka (confluent-kafka, kcat) and aiokafka fetch without
one (session id 0, epoch -1). Either way every record arrives once and in
order, and a broker restart, which loses every session, costs a client one
FETCH_SESSION_ID_NOT_FOUND and a full fetch.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.protocol.consumer import FetchResponse

from tests.support.broker import BrokerProcess, free_port
from tests.support.members import wait_until
from tests.support.wire import Wire
from tests.test_data_path import create_topic, fetch_request
from tests.test_metrics import _answers, scrape, value
from tests.test_protocol_versions import topic_id_of

PARTITIONS = 16
ROUND = 240
TIMEOUT_S = 30

# Fetch's top-level session errors.
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106


def metered_broker(data_dir: Path) -> tuple[BrokerProcess, int]:
    port = free_port()
    broker = BrokerProcess(data_dir, "--metrics-port", str(port)).start()
    wait_until(lambda: _answers(port), TIMEOUT_S, "the metrics endpoint answers", broker.log)
    return broker, port


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    broker, port = metered_broker(tmp_path_factory.mktemp("sessions") / "data")
    yield broker, port
    assert broker.stop() == 0, broker.log_tail()


class Readers:
    """A kafka-python and a confluent-kafka consumer reading every partition of a topic,
    each keeping the values it got per partition."""

    def __init__(self, broker: BrokerProcess, topic: str, partitions: int) -> None:
        self.topic = topic
        self.kafka_python = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest"
        )
        self.kafka_python.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
        self.confluent = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "unused",
                "enable.auto.commit": False,
            }
        )
        self.confluent.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        self.got: dict[str, dict[int, list[int]]] = {
            "kafka-python": {p: [] for p in range(partitions)},
            "confluent-kafka": {p: [] for p in range(partitions)},
        }

    def read_until(self, total: int, broker_log: Callable[[], str]) -> None:
        """Poll both until each has `total` records."""

        def seen() -> str:
            counts = {client: sum(map(len, got.values())) for client, got in self.got.items()}
            return f"records read: {counts}\n{broker_log()}"

        def read() -> bool:
            for records in self.kafka_python.poll(100).values():
                for record in records:
                    self.got["kafka-python"][record.partition].append(int(record.value))
            for message in self.confluent.consume(1000, timeout=0.1):
                assert message.error() is None, message.error()
                self.got["confluent-kafka"][message.partition()].append(int(message.value()))
            return all(sum(map(len, got.values())) >= total for got in self.got.values())

        wait_until(read, TIMEOUT_S, f"{total} records read by each client", seen)

    def close(self) -> None:
        self.kafka_python.close()
        self.confluent.close()


def produce_round(producer: Producer, topic: str, sent: dict[int, list[int]], round_: int) -> int:
    """ROUND records, none to a quarter of the partitions (they stay idle this round);
    each record's value is its sequence number within its partition."""
    partitions = [p for p in sent if (p + round_) % 4 != 0]
    for i in range(ROUND):
        partition = partitions[i % len(partitions)]
        sent[partition].append(len(sent[partition]))
        producer.produce(topic, value=b"%d" % sent[partition][-1], partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    return sum(map(len, sent.values()))


def test_kafka_python_fetches_in_a_session_and_every_record_arrives_once_in_order(
    metered: tuple[BrokerProcess, int],
) -> None:
    broker, port = metered
    topic = "spread"
    create_topic(broker, topic, PARTITIONS)
    readers = Readers(broker, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    sent: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    before = session_figures(port)
    try:
        for round_ in range(3):
            total = produce_round(producer, topic, sent, round_)
            readers.read_until(total, broker.log)
        after = session_figures(port)
    finally:
        readers.close()
    for client, got in readers.got.items():
        assert got == sent, client
    # kafka-python's session, holding every partition, served it all without a session
    # error (librdkafka opens none).
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, PARTITIONS, 0]


def test_clients_recover_from_a_restart_that_loses_their_sessions(tmp_path: Path) -> None:
    broker, port = metered_broker(tmp_path / "data")
    topic = "restarted"
    create_topic(broker, topic, PARTITIONS)
    readers = Readers(broker, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    sent: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    try:
        readers.read_until(produce_round(producer, topic, sent, 0), broker.log)
        # kafka-python sends fetches from poll(): past fetch.max.wait.ms (500) after the
        # last poll it has none in flight, so the restart cannot fail one (which would
        # make it give up the session itself) and its next fetch names the lost session.
        time.sleep(1.0)
        broker.restart()
        wait_until(lambda: _answers(port), TIMEOUT_S, "the metrics endpoint answers", broker.log)
        readers.read_until(produce_round(producer, topic, sent, 1), broker.log)
        samples = scrape(port)
    finally:
        readers.close()
        broker.kill()
    for client, got in readers.got.items():
        assert got == sent, client
    # kafka-python's next incremental fetch named the session the restart lost; it
    # opened a new one with a full fetch.
    not_found = value(
        samples, "herdless_fetch_session_errors_total", error="FETCH_SESSION_ID_NOT_FOUND"
    )
    assert not_found == 1
    assert value(samples, "herdless_fetch_sessions") == 1


def session_figures(port: int) -> tuple[float, float, float]:
    """Sessions held, partitions they hold, and session errors answered so far."""
    samples = scrape(port)
    errors = sum(
        v for (name, _), v in samples.items() if name == "herdless_fetch_session_errors_total"
    )
    return (
        value(samples, "herdless_fetch_sessions") or 0,
        value(samples, "herdless_fetch_session_partitions") or 0,
        errors,
    )


def answered(response: Any) -> dict[int, Any]:
    """The partitions an answer carries, by index."""
    return {p.partition_index: p for topic in response.responses for p in topic.partitions}


def produce(broker: BrokerProcess, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0


def by_id(topic_id: uuid.UUID, offsets: dict[int, int], version: int = 16, **session: int) -> Any:
    """A fetch naming its topic by id (v13+), without waiting."""
    request = fetch_request("", offsets, 0, 0, version=version, **session)
    request.topics[0].topic_id = topic_id
    return request


def test_incremental_fetches_answer_what_changed_and_long_poll_the_whole_session(
    metered: tuple[BrokerProcess, int],
) -> None:
    broker, _ = metered
    topic = "on-the-wire"
    create_topic(broker, topic, 4)
    produce(broker, topic, 0, 2)
    wire = Wire(broker)
    try:
        offsets = dict.fromkeys(range(4), 0)
        opened = wire.call(fetch_request(topic, offsets, 0, 0, session_epoch=0), FetchResponse)
        session = opened.session_id
        assert opened.error_code == 0 and session != 0
        assert sorted(answered(opened)) == [0, 1, 2, 3]
        assert answered(opened)[0].high_watermark == 2 and answered(opened)[0].records

        # Partition 0 moves on; nothing has changed anywhere: nothing is answered.
        moved = wire.call(
            fetch_request(topic, {0: 2}, 0, 0, session_id=session, session_epoch=1), FetchResponse
        )
        assert (moved.error_code, moved.session_id, answered(moved)) == (0, session, {})

        # Naming no partition, the fetch waits on all four, and an append to one wakes it.
        waiting = fetch_request(topic, {}, 20_000, 1, session_id=session, session_epoch=2)
        timer = threading.Timer(1.0, produce, (broker, topic, 3, 1))
        timer.start()
        started = time.monotonic()
        woken = wire.call(waiting, FetchResponse)
        waited = time.monotonic() - started
        timer.join()
        assert 0.5 < waited < 15
        assert list(answered(woken)) == [3]
        assert answered(woken)[3].high_watermark == 1 and answered(woken)[3].records

        # A forgotten partition is neither read nor answered.
        forget = fetch_request(topic, {}, 0, 0, session_id=session, session_epoch=3, forgotten=(3,))
        assert answered(wire.call(forget, FetchResponse)) == {}
        produce(broker, topic, 3, 1)
        after = fetch_request(topic, {}, 0, 0, session_id=session, session_epoch=4)
        assert answered(wire.call(after, FetchResponse)) == {}

        # Epoch -1 closes the session; the answer is full and opens none.
        close = fetch_request(topic, {1: 0}, 0, 0, session_id=session, session_epoch=-1)
        closed = wire.call(close, FetchResponse)
        assert (closed.session_id, list(answered(closed))) == (0, [1])
        gone = fetch_request(topic, {}, 0, 0, session_id=session, session_epoch=5)
        assert wire.call(gone, FetchResponse).error_code == FETCH_SESSION_ID_NOT_FOUND
    finally:
        wire.close()


def test_session_errors(metered: tuple[BrokerProcess, int]) -> None:
    broker, _ = metered
    topic = "session-errors"
    create_topic(broker, topic, 2)
    wire = Wire(broker)
    try:
        topic_id = topic_id_of(wire, topic)
        opened = wire.call(fetch_request(topic, {0: 0, 1: 0}, 0, 0, session_epoch=0), FetchResponse)
        session = opened.session_id
        next_fetch = fetch_request(topic, {}, 0, 0, session_id=session, session_epoch=1)
        assert wire.call(next_fetch, FetchResponse).error_code == 0
        # The same epoch again (a retried request) is refused and changes nothing.
        again = wire.call(next_fetch, FetchResponse)
        assert (again.error_code, again.session_id, again.responses) == (
            INVALID_FETCH_SESSION_EPOCH,
            0,
            [],
        )
        # A session opened naming topics cannot go on naming them by id (v13+).
        renamed = by_id(topic_id, {0: 0}, version=13, session_id=session, session_epoch=2)
        assert wire.call(renamed, FetchResponse).error_code == FETCH_SESSION_TOPIC_ID_ERROR
        later = fetch_request(topic, {}, 0, 0, session_id=session, session_epoch=2)
        assert wire.call(later, FetchResponse).error_code == 0
        unknown_id = session + 1 if session < 2**31 - 1 else 1
        unknown = fetch_request(topic, {}, 0, 0, session_id=unknown_id, session_epoch=1)
        assert wire.call(unknown, FetchResponse).error_code == FETCH_SESSION_ID_NOT_FOUND
    finally:
        wire.close()


def test_sessions_by_topic_id(metered: tuple[BrokerProcess, int]) -> None:
    broker, _ = metered
    topic = "sessions-by-id"
    create_topic(broker, topic, 2)
    produce(broker, topic, 1, 3)
    wire = Wire(broker)
    try:
        topic_id = topic_id_of(wire, topic)
        opened = wire.call(by_id(topic_id, {0: 0, 1: 0}, session_epoch=0), FetchResponse)
        session = opened.session_id
        assert session != 0 and opened.responses[0].topic_id == topic_id
        produce(broker, topic, 0, 1)
        moved = by_id(topic_id, {1: 3}, session_id=session, session_epoch=1)
        [changed] = wire.call(moved, FetchResponse).responses
        assert changed.topic_id == topic_id
        assert [(p.partition_index, p.high_watermark) for p in changed.partitions] == [(0, 1)]
        # An id no topic has stays in the session and is answered UNKNOWN_TOPIC_ID.
        unknown_id = uuid.uuid4()
        unknown = by_id(unknown_id, {0: 1}, session_id=session, session_epoch=2)
        topics = {t.topic_id: t for t in wire.call(unknown, FetchResponse).responses}
        assert [p.error_code for p in topics[unknown_id].partitions] == [100]
    finally:
        wire.close()
