"""The read side of transactions, as real clients see it: Fetch at read_committed,
ListOffsets at an isolation level, and DescribeProducers.

The partition's transactions are written with the storage API into the data
directory before the broker starts on it (markers come from a coordinator, which is
not what these tests are about). The log, offset by offset:

    0-1    plain-0, plain-1            no transaction
    2-3    committed-0, committed-1    producer 1000, committed at 4
    5-6    aborted-0, aborted-1        producer 2000, aborted at 7
    8      committed-2                 producer 1000 \\ interleaved: 1000 commits at 10,
    9      aborted-2                   producer 2000 /  2000 aborts at 11
    12     plain-2
    13     open-0                      producer 3000, whose transaction is still open
    14     plain-3

so the last stable offset is 13 and the high watermark 15.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.protocol.admin.transactions import DescribeProducersRequest, DescribeProducersResponse
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

from herdless.protocol.control_records import ControlRecordType, EndTransactionMarker
from herdless.storage import LogManager, PartitionLog
from tests.storage.batches import build, split
from tests.support.broker import BrokerProcess, module_broker
from tests.support.wire import Wire

TOPIC = "txn"
TIMEOUT_S = 30
# Records' timestamps: offset o is stamped BASE_TS + o. Recent: producers idle for
# producer.id.expiration.ms (a day) are forgotten when the broker opens the log.
BASE_TS = (int(time.time()) - 3600) * 1000
COMMITTED_PID, ABORTED_PID, OPEN_PID = 1000, 2000, 3000
LAST_STABLE_OFFSET = 13
HIGH_WATERMARK = 15

COMMITTED = [b"plain-0", b"plain-1", b"committed-0", b"committed-1", b"committed-2", b"plain-2"]
EVERY_RECORD = [
    b"plain-0",
    b"plain-1",
    b"committed-0",
    b"committed-1",
    b"aborted-0",
    b"aborted-1",
    b"committed-2",
    b"aborted-2",
    b"plain-2",
    b"open-0",
    b"plain-3",
]


class Writer:
    """Appends to one partition log as producers and a coordinator would."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def send(self, *values: bytes, pid: int = -1) -> None:
        first = self.log.log_end_offset
        sequence = self.sequences.get(pid, 0)
        raw = build(
            list(values),
            timestamps=[BASE_TS + first + i for i in range(len(values))],
            keys=[b"k"] * len(values),
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=sequence if pid >= 0 else -1,
            transactional=pid >= 0,
        )
        if pid >= 0:
            self.sequences[pid] = sequence + len(values)
        self.log.append(split(raw), BASE_TS + first)

    def end(self, pid: int, kind: ControlRecordType) -> None:
        marker = EndTransactionMarker(kind, 0)
        self.log.append_end_txn_marker(pid, 0, marker, BASE_TS + self.log.log_end_offset)


def write_transactions(data_dir: Path) -> None:
    logs = LogManager(data_dir)
    logs.open(BASE_TS)
    logs.create_topic(TOPIC, 1, now_ms=BASE_TS)
    log = logs.partition(TOPIC, 0)
    assert log is not None
    writer = Writer(log)
    writer.send(b"plain-0", b"plain-1")
    writer.send(b"committed-0", b"committed-1", pid=COMMITTED_PID)
    writer.end(COMMITTED_PID, ControlRecordType.COMMIT)
    writer.send(b"aborted-0", b"aborted-1", pid=ABORTED_PID)
    writer.end(ABORTED_PID, ControlRecordType.ABORT)
    writer.send(b"committed-2", pid=COMMITTED_PID)
    writer.send(b"aborted-2", pid=ABORTED_PID)
    writer.end(COMMITTED_PID, ControlRecordType.COMMIT)
    writer.end(ABORTED_PID, ControlRecordType.ABORT)
    writer.send(b"plain-2")
    writer.send(b"open-0", pid=OPEN_PID)
    writer.send(b"plain-3")
    assert (log.last_stable_offset, log.high_watermark) == (LAST_STABLE_OFFSET, HIGH_WATERMARK)
    logs.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("read-committed") / "data"
    write_transactions(data)
    with module_broker(data) as process:
        yield process


def drain(poll: object, expected: int, settle_s: float = 1.0) -> list[bytes]:
    """Values polled until `expected` arrived, then for `settle_s` more: what a
    consumer gets, and nothing past it."""
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    settled: float | None = None
    while time.monotonic() < (settled or deadline):
        got.extend(poll())  # type: ignore[operator]
        if settled is None and len(got) >= expected:
            settled = time.monotonic() + settle_s
    return got


def confluent_values(broker: BrokerProcess, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"rc-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])

    def poll() -> list[bytes]:
        message = consumer.poll(0.2)
        if message is None or message.error():
            return []
        return [message.value()]

    try:
        return drain(poll, expected)
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("isolation", "expected"),
    [("read_committed", COMMITTED), ("read_uncommitted", EVERY_RECORD)],
)
def test_confluent_kafka_reads_at_its_isolation_level(
    broker: BrokerProcess, isolation: str, expected: list[bytes]
) -> None:
    assert confluent_values(broker, isolation, len(expected)) == expected


def kafka_python_consumer(broker: BrokerProcess, isolation: str) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    consumer.assign([KafkaTopicPartition(TOPIC, 0)])
    return consumer


def kafka_python_poll(consumer: KafkaConsumer) -> list[bytes]:
    batches = consumer.poll(timeout_ms=200)
    return [record.value for records in batches.values() for record in records]


def test_aiokafka_reads_committed(broker: BrokerProcess) -> None:
    async def read(isolation: str, expected: int) -> list[bytes]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            isolation_level=isolation,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            tp = AioTopicPartition(TOPIC, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            settled: float | None = None
            while time.monotonic() < (settled or deadline):
                batches = await consumer.getmany(timeout_ms=200)
                got.extend(r.value for records in batches.values() for r in records)
                if settled is None and len(got) >= expected:
                    settled = time.monotonic() + 1.0
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(read("read_committed", len(COMMITTED))) == COMMITTED


def test_a_fetch_at_read_committed_names_the_aborted_transactions(broker: BrokerProcess) -> None:
    """On the wire: read_committed stops at the last stable offset and names each
    aborted transaction among the records; read_uncommitted reads to the high watermark
    and names none. Both are told the last stable offset."""
    wire = Wire(broker)
    try:
        for version in (4, 11, 12):
            answers = {}
            for isolation in (0, 1):
                request = FetchRequest[version](
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=1 << 20,
                    isolation_level=isolation,
                    topics=[
                        FetchRequest.FetchTopic(
                            topic=TOPIC,
                            partitions=[
                                FetchRequest.FetchTopic.FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                                )
                            ],
                        )
                    ],
                )
                response = wire.call(request, FetchResponse)
                answers[isolation] = response.responses[0].partitions[0]  # type: ignore[attr-defined]
            committed, uncommitted = answers[1], answers[0]
            assert committed.error_code == uncommitted.error_code == 0
            assert committed.last_stable_offset == uncommitted.last_stable_offset == 13
            assert committed.high_watermark == uncommitted.high_watermark
            aborted = [(t.producer_id, t.first_offset) for t in committed.aborted_transactions]
            assert aborted == [(ABORTED_PID, 5), (ABORTED_PID, 9)], version
            assert not uncommitted.aborted_transactions
            assert len(committed.records) < len(uncommitted.records)
    finally:
        wire.close()


def test_list_offsets_answers_latest_at_the_isolation_level(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(TOPIC, 0)

    def offset(spec: OffsetSpec, isolation: IsolationLevel) -> int:
        futures = admin.list_offsets({tp: spec}, isolation_level=isolation)
        return futures[tp].result(timeout=TIMEOUT_S).offset

    committed, uncommitted = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
    assert offset(OffsetSpec.latest(), committed) == LAST_STABLE_OFFSET
    assert offset(OffsetSpec.latest(), uncommitted) >= HIGH_WATERMARK
    assert offset(OffsetSpec.earliest(), committed) == 0
    # A time whose first record lies below the last stable offset is found at either
    # level; one past it only read_uncommitted (Kafka answers -1, unknown, to the other).
    assert offset(OffsetSpec.for_timestamp(BASE_TS + 12), committed) == 12
    assert offset(OffsetSpec.for_timestamp(BASE_TS + 14), committed) == -1
    assert offset(OffsetSpec.for_timestamp(BASE_TS + 14), uncommitted) == 14


def test_list_offsets_v1_knows_no_isolation_level(broker: BrokerProcess) -> None:
    wire = Wire(broker)
    try:
        Topic = ListOffsetsRequest.ListOffsetsTopic
        request = ListOffsetsRequest[1](
            replica_id=-1,
            topics=[
                Topic(
                    name=TOPIC,
                    partitions=[Topic.ListOffsetsPartition(partition_index=0, timestamp=-1)],
                )
            ],
        )
        response = wire.call(request, ListOffsetsResponse)
        assert response.topics[0].partitions[0].offset >= HIGH_WATERMARK  # type: ignore[attr-defined]
    finally:
        wire.close()


def test_describe_producers_tells_each_producer_and_its_open_transaction(
    broker: BrokerProcess,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        tp = KafkaTopicPartition(TOPIC, 0)
        states = admin.describe_producers([tp])[tp].active_producers
        found = {
            s.producer_id: (s.producer_epoch, s.last_sequence, s.current_transaction_start_offset)
            for s in states
        }
        assert found == {
            COMMITTED_PID: (0, 2, -1),
            ABORTED_PID: (0, 2, -1),
            OPEN_PID: (0, 0, LAST_STABLE_OFFSET),
        }
        # The coordinator epoch of the producer's last marker; -1 before any.
        epochs = {s.producer_id: s.coordinator_epoch for s in states}
        assert epochs == {COMMITTED_PID: 0, ABORTED_PID: 0, OPEN_PID: -1}
        assert all(s.last_timestamp >= BASE_TS for s in states)
    finally:
        admin.close()


def test_describe_producers_of_a_partition_not_here(broker: BrokerProcess) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION (3) for what this broker does not host, and
    INVALID_TOPIC_EXCEPTION (17) naming the rule for a name no topic can have."""
    wire = Wire(broker)
    try:
        Topic = DescribeProducersRequest.TopicRequest
        request = DescribeProducersRequest[0](
            topics=[
                Topic(name=TOPIC, partition_indexes=[5]),
                Topic(name="nope", partition_indexes=[0]),
                Topic(name="no/such", partition_indexes=[0, -1]),
            ]
        )
        response = wire.call(request, DescribeProducersResponse)
        answers = [
            (t.name, p.partition_index, p.error_code, p.active_producers)
            for t in response.topics  # type: ignore[attr-defined]
            for p in t.partitions
        ]
        assert answers == [
            (TOPIC, 5, 3, []),
            ("nope", 0, 3, []),
            ("no/such", 0, 17, []),
            ("no/such", -1, 17, []),
        ]
        invalid = response.topics[2].partitions[0]  # type: ignore[attr-defined]
        assert "may contain only" in invalid.error_message
    finally:
        wire.close()


def test_kafka_python_reads_committed_over_its_fetch_session(broker: BrokerProcess) -> None:
    """kafka-python fetches incrementally in a session: a record appended later, past
    the open transaction, reaches the read_uncommitted consumer and not the other.
    Last in the module: the record it appends is there for every test after it."""
    committed = kafka_python_consumer(broker, "read_committed")
    uncommitted = kafka_python_consumer(broker, "read_uncommitted")
    try:
        assert drain(lambda: kafka_python_poll(committed), len(COMMITTED)) == COMMITTED
        assert drain(lambda: kafka_python_poll(uncommitted), len(EVERY_RECORD)) == EVERY_RECORD
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(TOPIC, b"late", key=b"k")
        assert producer.flush(TIMEOUT_S) == 0
        assert drain(lambda: kafka_python_poll(uncommitted), 1) == [b"late"]
        assert drain(lambda: kafka_python_poll(committed), 0) == []
        tp = KafkaTopicPartition(TOPIC, 0)
        assert committed.end_offsets([tp]) == {tp: LAST_STABLE_OFFSET}
        assert uncommitted.end_offsets([tp]) == {tp: HIGH_WATERMARK + 1}
    finally:
        committed.close()
        uncommitted.close()
