"""The oldest and the newest versions Kafka 3.9 serves.

Clients speaking Kafka 0.9 to 0.11's protocol: Produce v1-v3 and Fetch v1-v5, message
sets (magic v0, v1), ListOffsets v0, the first versions of the group APIs.

herdless stores v2 batches only: what such a client produces is up-converted on
the way in and down-converted on the way out. Each client produces, consumes in a
consumer group and commits, and must read back exactly what it wrote, with the
timestamps its format carries. The versions each client really sent are taken
from its own logs, so a client quietly upgrading itself cannot pass for an old one.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.protocol.consumer import FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceResponse
from kafka.record.memory_records import MemoryRecords

from tests.support.broker import BrokerProcess, module_broker
from tests.support.kafka_python import subscribe_safely
from tests.support.requests import (
    fetch_request,
    list_offsets_v0_request,
    produce_request,
    v2_batch,
)
from tests.support.wire import Wire

PARTITIONS = 2
COUNT = 300
BASE_TIMESTAMP = 1_700_000_000_000
# librdkafka 2.x keeps fixed protocol tables only for brokers older than 0.10.0: given
# any fallback from 0.10.0 on it asks the broker (ApiVersions) whatever
# api.version.request says, and speaks today's versions. 0.9.0 is the newest it can be
# held to: Produce v1 and Fetch v1 with magic v0 messages, ListOffsets v0, Metadata v0,
# and the group APIs at v0 (OffsetCommit v2).
RDKAFKA_0_9 = {"api.version.request": False, "broker.version.fallback": "0.9.0"}

# (partition, offset) -> (key, value, timestamp, headers)
Log = dict[tuple[int, int], tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes], ...]]]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("old-clients") / "data"
    with module_broker(data, "--set", "group.initial.rebalance.delay.ms=0") as process:
        yield process


def create_topic(broker: BrokerProcess, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1, config=configs)])[name].result(30)


def records(with_headers: bool = False) -> list[tuple[bytes | None, bytes | None, int, tuple]]:
    """Keyed and keyless records, empty and null values, each stamped differently."""
    out = []
    for i in range(COUNT):
        key = None if i % 50 == 7 else b"key-%d" % (i % 37)
        value = (
            None if i % 60 == 11 else (b"" if i % 60 == 12 else b"value-%d-" % i + b"x" * (i % 40))
        )
        headers = (("seq", str(i).encode()),) if with_headers else ()
        out.append((key, value, BASE_TIMESTAMP + i * 1000, headers))
    return out


def in_partition_order(log: Log) -> dict[int, list[tuple]]:
    by_partition: dict[int, list[tuple]] = defaultdict(list)
    for (partition, _), record in sorted(log.items()):
        by_partition[partition].append(record)
    return dict(by_partition)


class RequestLog(logging.Handler):
    """Requests kafka-python sent, by name and version, from its debug log."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sent: Counter[tuple[str, int]] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if record.args and len(record.args) == 3:
            request = record.args[-1]
            if hasattr(request, "API_VERSION") and hasattr(request, "name"):
                self.sent[(request.name, request.API_VERSION)] += 1


@pytest.fixture
def kafka_python_requests() -> Iterator[RequestLog]:
    handler = RequestLog()
    logger = logging.getLogger("kafka.net.connection")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def kafka_python_round_trip(
    broker: BrokerProcess, topic: str, api_version: tuple[int, ...], compression: str | None
) -> None:
    with_headers = api_version >= (0, 11)
    sent = records(with_headers)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        compression_type=compression,
        linger_ms=5,
    )
    futures = [
        producer.send(topic, key=k, value=v, timestamp_ms=ts, headers=list(h) or None)
        for k, v, ts, h in sent
    ]
    producer.flush(30)
    produced: Log = {}
    for (k, v, ts, h), future in zip(sent, futures, strict=True):
        metadata = future.get(timeout=0)
        produced[(metadata.partition, metadata.offset)] = (k, v, ts, h)
    producer.close()

    group = f"{topic}-group"
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    subscribe_safely(consumer, [topic])
    consumed: Log = {}
    deadline = time.monotonic() + 60
    while len(consumed) < COUNT and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=1000).values():
            for m in messages:
                assert m.timestamp_type == 0  # CreateTime, as produced
                consumed[(m.partition, m.offset)] = (m.key, m.value, m.timestamp, tuple(m.headers))
    consumer.commit()
    consumer.close()
    assert in_partition_order(consumed) == in_partition_order(produced)

    # The group's offsets are where it stopped: a new member reads nothing more.
    again = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, api_version=api_version, group_id=group
    )
    for partition, rows in in_partition_order(produced).items():
        assert again.committed(KpTopicPartition(topic, partition)) == len(rows)
    again.close()


def test_kafka_python_speaking_0_10_1_with_gzip(
    broker: BrokerProcess, kafka_python_requests: RequestLog
) -> None:
    create_topic(broker, "kp-0-10")
    kafka_python_round_trip(broker, "kp-0-10", (0, 10, 1), "gzip")
    sent = kafka_python_requests.sent
    assert {version for (name, version) in sent if name == "ProduceRequest"} == {2}
    assert {version for (name, version) in sent if name == "FetchRequest"} == {3}
    assert sent[("OffsetCommitRequest", 2)] and sent[("JoinGroupRequest", 1)]


def test_kafka_python_speaking_0_11(
    broker: BrokerProcess, kafka_python_requests: RequestLog
) -> None:
    create_topic(broker, "kp-0-11")
    kafka_python_round_trip(broker, "kp-0-11", (0, 11), None)
    sent = kafka_python_requests.sent
    assert {version for (name, version) in sent if name == "ProduceRequest"} == {3}
    assert {version for (name, version) in sent if name == "FetchRequest"} == {5}


class RdkafkaRequests(logging.Handler):
    """Requests librdkafka sent, by name and version, from its protocol debug log."""

    SENT = re.compile(r"Sent (\w+)Request \(v(\d+)")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sent: Counter[tuple[str, int]] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        found = self.SENT.search(record.getMessage())
        if found:
            self.sent[(found.group(1), int(found.group(2)))] += 1


def test_librdkafka_speaking_0_9_0_with_snappy(broker: BrokerProcess) -> None:
    topic = "rdkafka-0-9"
    create_topic(broker, topic)
    requests = RdkafkaRequests()
    logger = logging.getLogger("rdkafka-old")
    logger.addHandler(requests)
    logger.setLevel(logging.DEBUG)
    debug = {"debug": "protocol", "logger": logger}
    sent = records()
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "snappy", "linger.ms": 5}
        | RDKAFKA_0_9
        | debug
    )
    produced: Log = {}
    errors = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            # Magic v0 carries no timestamp, so none is compared.
            produced[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), None, ())

    for k, v, ts, _ in sent:
        producer.produce(topic, key=k, value=v, timestamp=ts, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == [] and len(produced) == COUNT

    group = f"{topic}-group"
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group} | RDKAFKA_0_9 | debug
    consumer = Consumer(config | {"auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    consumed: Log = {}
    deadline = time.monotonic() + 60
    while len(consumed) < COUNT and time.monotonic() < deadline:
        for m in consumer.consume(500, timeout=1):
            assert m.error() is None, m.error()
            assert m.timestamp()[0] == 0  # TIMESTAMP_NOT_AVAILABLE: magic v0 has none
            consumed[(m.partition(), m.offset())] = (m.key(), m.value(), None, ())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert in_partition_order(consumed) == in_partition_order(produced)

    again = Consumer(config)
    committed = again.committed([CkTopicPartition(topic, p) for p in range(PARTITIONS)], 30)
    rows = in_partition_order(produced)
    assert {tp.partition: tp.offset for tp in committed} == {p: len(rows[p]) for p in rows}
    again.close()
    producer.poll(0)

    versions = requests.sent
    assert {v for (name, v) in versions if name == "Produce"} == {1}
    assert {v for (name, v) in versions if name == "Fetch"} == {1}
    assert {v for (name, v) in versions if name == "ListOffsets"} == {0}
    assert versions[("OffsetCommit", 2)] and versions[("JoinGroup", 0)]
    assert ("ApiVersion", 3) not in versions


def list_offsets_v0(wire: Wire, topic: str, timestamp: int, max_num_offsets: int) -> object:
    request = list_offsets_v0_request(topic, timestamp, max_num_offsets)
    [topic_response] = wire.call(request, ListOffsetsResponse).topics
    [partition] = topic_response.partitions
    return partition


def test_list_offsets_v0_answers_old_style_offsets(broker: BrokerProcess) -> None:
    topic = "list-offsets-v0"
    create_topic(broker, topic, **{"segment.bytes": "1024"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for _i in range(40):
        producer.produce(topic, value=b"v" * 100, partition=0)
        producer.flush(10)  # one batch each: segments roll every ~9 of them
    wire = Wire(broker)
    try:
        latest = list_offsets_v0(wire, topic, -1, 100)
        assert latest.error_code == 0
        # Newest first: the log end offset, then each segment's base offset down to 0.
        assert latest.old_style_offsets[0] == 40
        assert latest.old_style_offsets[-1] == 0
        assert latest.old_style_offsets == sorted(latest.old_style_offsets, reverse=True)
        assert len(latest.old_style_offsets) >= 4
        assert list_offsets_v0(wire, topic, -1, 1).old_style_offsets == [40]
        assert list_offsets_v0(wire, topic, -2, 5).old_style_offsets == [0]
        # By time, a segment counts from when its file was last written.
        assert list_offsets_v0(wire, topic, 1, 5).old_style_offsets == []
        assert list_offsets_v0(
            wire, topic, int(time.time() * 1000) + 60_000, 1
        ).old_style_offsets == [40]
        # v0 knows no max-timestamp lookup (-3).
        assert list_offsets_v0(wire, topic, -3, 1).error_code == 35  # UNSUPPORTED_VERSION
    finally:
        wire.close()


def test_stored_batches_are_v2_whoever_produced_them(broker: BrokerProcess) -> None:
    """What old producers sent is in the log as v2 batches (Kafka 3's message format)."""
    from herdless.protocol.records import iter_batches

    magics = set()
    for segment in Path(broker.data_dir).glob("kp-0-10-*/*.log"):
        magics |= {header.magic for _, header in iter_batches(segment.read_bytes())}
    assert magics == {2}


def fetch(wire: Wire, version: int, topic: str, offset: int, max_bytes: int) -> object:
    [topic_response] = wire.call(
        fetch_request(version, topic, offset, max_bytes), FetchResponse
    ).responses
    [partition] = topic_response.partitions
    return partition


def messages_of(data: bytes) -> list[tuple[int, int, bytes | None]]:
    """(magic, offset, value) of each whole message, as kafka-python reads them."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        out += [(batch.magic, r.offset, r.value) for r in batch]
    return out


def produce_to_partition_0(
    broker: BrokerProcess, topic: str, values: list[bytes], codec: str
) -> None:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "compression.type": codec}
    )
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


def test_fetch_v0_to_v3_down_convert_within_the_limits(broker: BrokerProcess) -> None:
    topic = "fetch-limits"
    create_topic(broker, topic)
    values = [b"%03d" % i + b"x" * 97 for i in range(20)]
    produce_to_partition_0(broker, topic, values[:10], "none")
    produce_to_partition_0(broker, topic, values[10:], "gzip")
    wire = Wire(broker)
    try:
        for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
            whole = fetch(wire, version, topic, 0, 1 << 20)
            assert whole.error_code == 0 and whole.high_watermark == 20
            assert messages_of(whole.records) == [(magic, i, v) for i, v in enumerate(values)]
        # From the middle of an uncompressed batch: the records before it are left out;
        # a compressed batch comes whole (clients skip what they did not ask for).
        assert [o for _, o, _ in messages_of(fetch(wire, 2, topic, 5, 1 << 20).records)][0] == 5
        assert [o for _, o, _ in messages_of(fetch(wire, 2, topic, 15, 1 << 20).records)][0] == 10
        # Whole messages within a partition's max bytes: 3 of ~134 bytes in 450.
        assert len(messages_of(fetch(wire, 3, topic, 0, 450).records)) == 3
        # A first message larger than the limit: cut short up to v2, whole from v3.
        for version in (0, 1, 2):
            cut = fetch(wire, version, topic, 0, 50).records
            assert len(cut) == 50 and messages_of(cut) == []
        assert messages_of(fetch(wire, 3, topic, 0, 50).records) == [(1, 0, values[0])]
    finally:
        wire.close()


def test_old_fetches_that_kafka_refuses(broker: BrokerProcess) -> None:
    create_topic(broker, "no-downconversion", **{"message.downconversion.enable": "false"})
    create_topic(broker, "zstd-topic", **{"compression.type": "zstd"})
    produce_to_partition_0(broker, "no-downconversion", [b"a"], "none")
    produce_to_partition_0(broker, "zstd-topic", [b"a"], "none")
    wire = Wire(broker)
    try:
        assert (
            fetch(wire, 3, "no-downconversion", 0, 1 << 16).error_code == 35
        )  # UNSUPPORTED_VERSION
        assert messages_of(fetch(wire, 4, "no-downconversion", 0, 1 << 16).records) != []
        # Below v10 a zstd topic cannot be read (UNSUPPORTED_COMPRESSION_TYPE).
        assert fetch(wire, 9, "zstd-topic", 0, 1 << 16).error_code == 76
        assert fetch(wire, 2, "zstd-topic", 0, 1 << 16).error_code == 76
        assert fetch(wire, 10, "zstd-topic", 0, 1 << 16).error_code == 0
    finally:
        wire.close()


# -- the newest versions Kafka 3.9 serves ------------------------------------------------------


def topic_id_of(wire: Wire, topic: str) -> uuid.UUID:
    request = MetadataRequest[12](
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=topic)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    [described] = wire.call(request, MetadataResponse).topics
    return described.topic_id


def test_fetch_v13_and_later_name_topics_by_id(broker: BrokerProcess) -> None:
    topic = "by-id"
    create_topic(broker, topic)
    produce_to_partition_0(broker, topic, [b"a", b"b"], "none")
    wire = Wire(broker)
    try:
        topic_id = topic_id_of(wire, topic)
        for version in (13, 15, 16, 17):
            request = fetch_request(version, topic, 0, 1 << 16)
            request.topics[0].topic_id = topic_id
            [answer] = wire.call(request, FetchResponse).responses
            assert answer.topic_id == topic_id
            [partition] = answer.partitions
            assert partition.error_code == 0 and partition.high_watermark == 2
            assert [value for _, _, value in messages_of(partition.records)] == [b"a", b"b"]
        unknown = fetch_request(16, topic, 0, 1 << 16)
        unknown.topics[0].topic_id = uuid.uuid4()
        [answer] = wire.call(unknown, FetchResponse).responses
        assert answer.partitions[0].error_code == 100  # UNKNOWN_TOPIC_ID
    finally:
        wire.close()


def list_offsets(wire: Wire, version: int, topic: str, timestamp: int) -> object:
    Topic = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest[version](
        replica_id=-1,
        isolation_level=0,
        topics=[
            Topic(
                name=topic,
                partitions=[Topic.ListOffsetsPartition(partition_index=0, timestamp=timestamp)],
            )
        ],
        timeout_ms=1000,
    )
    [answer] = wire.call(request, ListOffsetsResponse).topics
    return answer.partitions[0]


def test_list_offsets_special_timestamps_from_the_version_that_has_them(
    broker: BrokerProcess,
) -> None:
    topic = "special-timestamps"
    create_topic(broker, topic)
    produce_to_partition_0(broker, topic, [b"a", b"b", b"c"], "none")
    wire = Wire(broker)
    try:
        # -3 max timestamp from v7, -4 earliest local from v8, -5 latest tiered from v9;
        # asked earlier, each is UNSUPPORTED_VERSION, as Kafka answers.
        for timestamp, since in ((-3, 7), (-4, 8), (-5, 9)):
            assert list_offsets(wire, since - 1, topic, timestamp).error_code == 35
            assert list_offsets(wire, since, topic, timestamp).error_code == 0
        # With no remote tier the local log starts at the log start, and nothing is tiered.
        assert list_offsets(wire, 8, topic, -4).offset == 0
        tiered = list_offsets(wire, 9, topic, -5)
        assert (tiered.offset, tiered.timestamp, tiered.leader_epoch) == (-1, -1, -1)
        assert list_offsets(wire, 9, topic, -1).offset == 3
    finally:
        wire.close()


def test_produce_v11_and_init_producer_id_v5_are_answered(broker: BrokerProcess) -> None:
    topic = "newest-produce"
    create_topic(broker, topic)
    wire = Wire(broker)
    try:
        answer = wire.call(produce_request(11, topic, v2_batch([(b"k", b"v", 1)])), ProduceResponse)
        assert answer.responses[0].partition_responses[0].error_code == 0
        init = wire.call(
            InitProducerIdRequest[5](
                transactional_id=None,
                transaction_timeout_ms=1000,
                producer_id=-1,
                producer_epoch=-1,
            ),
            InitProducerIdResponse,
        )
        assert init.error_code == 0 and init.producer_id >= 0
    finally:
        wire.close()
