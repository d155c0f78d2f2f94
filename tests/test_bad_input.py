"""Malformed frames and corrupt batches sent to a live broker.

Each gets an error code or a closed connection; the broker never crashes,
never stores a bad batch, and keeps serving well-behaved clients.
"""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import OffsetForLeaderEpochRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceResponse
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tests.support.broker import BrokerProcess
from tests.support.requests import (
    fetch_request,
    list_offsets_v0_request,
    produce_request,
    v2_batch,
)

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def exchange(broker: BrokerProcess, frame: bytes, timeout: float = 5.0) -> bytes | None:
    """Send one raw frame; return the response frame, or None if the broker closed."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=timeout) as sock:
        sock.sendall(frame)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (ConnectionResetError, TimeoutError):
            pass
        data = b"".join(chunks)
    if len(data) < 4:
        return None
    (size,) = struct.unpack(">i", data[:4])
    return data[4 : 4 + size]


def request_frame(request: object, correlation_id: int = 1) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="bad-input-test")
    body = bytes(request.encode(header=True))
    return struct.pack(">i", len(body)) + body


def api_versions_works(broker: BrokerProcess) -> None:
    response = exchange(broker, request_frame(ApiVersionsRequest[3](), correlation_id=42))
    assert response is not None, f"broker stopped answering:\n{broker.log_tail()}"
    decoded = ApiVersionsResponse.decode(response, version=3, header=True)
    assert decoded.header.correlation_id == 42
    assert decoded.error_code == 0
    assert broker.alive()


def valid_batch(count: int = 3, base_sequence: int = -1) -> bytearray:
    rows = [(b"k%d" % i, b"v%d" % i, 1_700_000_000_000 + i) for i in range(count)]
    return bytearray(v2_batch(rows, base_sequence=base_sequence))


def produce(broker: BrokerProcess, topic: str, records: bytes, version: int = 7) -> int:
    response = exchange(broker, request_frame(produce_request(version, topic, records)))
    assert response is not None, "produce got no answer"
    decoded = ProduceResponse.decode(response, version=version, header=True)
    return decoded.responses[0].partition_responses[0].error_code


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    name = "bad-input"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(name, value=b"first")
    assert producer.flush(30) == 0
    return name


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_do_not_hurt_the_broker(broker: BrokerProcess, data: bytes) -> None:
    exchange(broker, data, timeout=2.0)
    api_versions_works(broker)


@SETTINGS
@given(
    api_key=st.integers(-5, 80),
    version=st.integers(-2, 20),
    body=st.binary(max_size=200),
)
def test_random_requests_get_an_answer_or_a_close(
    broker: BrokerProcess, api_key: int, version: int, body: bytes
) -> None:
    payload = struct.pack(">hhi", api_key, version, 7) + body
    exchange(broker, struct.pack(">i", len(payload)) + payload, timeout=2.0)
    api_versions_works(broker)


@SETTINGS
@given(st.data())
def test_mutated_metadata_requests(broker: BrokerProcess, data: st.DataObject) -> None:
    frame = bytearray(
        request_frame(
            MetadataRequest[9](
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    )
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(4, len(frame) - 1))
        frame[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(4, len(frame)))
    sent = bytes(frame[:cut])
    exchange(broker, struct.pack(">i", len(sent) - 4) + sent[4:], timeout=2.0)
    api_versions_works(broker)


def test_oversized_frame_closes_only_that_connection(broker: BrokerProcess) -> None:
    assert exchange(broker, struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 16) is None
    api_versions_works(broker)


def test_unsupported_api_versions_version_answers_v0_with_the_range(broker: BrokerProcess) -> None:
    payload = struct.pack(">hhi", 18, 99, 5) + struct.pack(">h", 4) + b"test"
    response = exchange(broker, struct.pack(">i", len(payload)) + payload)
    assert response is not None
    decoded = ApiVersionsResponse.decode(response, version=0, header=True)
    assert decoded.error_code == 35
    keys = {entry.api_key: (entry.min_version, entry.max_version) for entry in decoded.api_keys}
    assert keys[18][1] < 99 and 0 in keys


@SETTINGS
@given(st.data())
def test_corrupt_batches_are_refused_and_never_stored(
    broker: BrokerProcess, topic: str, data: st.DataObject
) -> None:
    batch = valid_batch(count=data.draw(st.integers(1, 5)))
    # Flip bytes from the batch length on, skipping the partition leader epoch,
    # which no checksum covers and a broker may overwrite.
    positions = data.draw(
        st.lists(
            st.sampled_from([*range(8, 12), *range(16, len(batch))]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    for position in positions:
        batch[position] ^= data.draw(st.integers(1, 255))
    code = produce(broker, topic, bytes(batch))
    assert code != 0, "a corrupted batch was accepted"
    assert code in (2, 10, 43, 87, 76), f"unexpected error code {code}"


def test_truncated_batch_and_wrong_count_are_refused(broker: BrokerProcess, topic: str) -> None:
    batch = valid_batch(count=3)
    assert produce(broker, topic, bytes(batch[:-5])) == 2  # CORRUPT_MESSAGE
    assert produce(broker, topic, bytes(batch) + b"\0" * 10) == 2


def test_produce_to_missing_partition(broker: BrokerProcess, topic: str) -> None:
    request = produce_request(7, topic, bytes(valid_batch()), partition=99, acks=1)
    response = exchange(broker, request_frame(request))
    assert response is not None
    decoded = ProduceResponse.decode(response, version=7, header=True)
    assert decoded.responses[0].partition_responses[0].error_code == 3


def test_only_good_batches_are_in_the_log(broker: BrokerProcess, topic: str) -> None:
    """After all the abuse above, the topic holds exactly the good records."""
    assert produce(broker, topic, bytes(valid_batch(count=2))) == 0
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bad-input-check",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    while True:
        messages = consumer.consume(100, timeout=3)
        if not messages:
            break
        values += [m.value() for m in messages if m.error() is None]
    consumer.close()
    assert values == [b"first", b"v0", b"v1"]


# -- the oldest versions: message sets, down-conversion, ListOffsets v0 -------------------------


def message_set(magic: int, compression: int = 0, count: int = 3) -> bytes:
    builder = LegacyRecordBatchBuilder(
        magic=magic, compression_type=compression, batch_size=1 << 20
    )
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"old%d" % i)
    return bytes(builder.build())


def old_version_requests(topic: str) -> dict[str, bytes]:
    """A well-formed frame of each version herdless serves that predates v2 batches."""
    Epochs = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    frames = {}
    for version in range(3):
        for compression in (0, 1):
            records = message_set(0 if version < 2 else 1, compression)
            produce = produce_request(version, topic, records, acks=1)
            frames[f"Produce v{version} codec {compression}"] = request_frame(produce)
    for version in range(4):
        frames[f"Fetch v{version}"] = request_frame(fetch_request(version, topic, 0, 1 << 16))
    frames["ListOffsets v0"] = request_frame(list_offsets_v0_request(topic, -1, 10))
    for version in range(2):
        epochs = OffsetForLeaderEpochRequest[version](
            topics=[
                Epochs(
                    topic=topic,
                    partitions=[Epochs.OffsetForLeaderPartition(partition=0, leader_epoch=0)],
                )
            ]
        )
        frames[f"OffsetForLeaderEpoch v{version}"] = request_frame(epochs)
    return frames


OLD_FRAMES = old_version_requests("bad-input")


@pytest.fixture(scope="module")
def legacy_topic(broker: BrokerProcess) -> str:
    name = "bad-input-legacy"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def test_old_version_samples_are_answered(broker: BrokerProcess, topic: str) -> None:
    """The unspoiled frames the tests below spoil: each gets an answer."""
    for name, frame in OLD_FRAMES.items():
        assert exchange(broker, frame) is not None, f"{name} was not answered"


@SETTINGS
@given(name=st.sampled_from(sorted(OLD_FRAMES)), data=st.data())
def test_spoiled_old_version_requests_get_an_answer_or_a_close(
    broker: BrokerProcess, topic: str, name: str, data: st.DataObject
) -> None:
    frame = bytearray(OLD_FRAMES[name])
    kind = data.draw(st.sampled_from(["truncated", "flipped", "oversized"]))
    if kind == "truncated":
        cut = data.draw(st.integers(4, len(frame) - 1))
        sent = struct.pack(">i", cut - 4) + bytes(frame[4:cut])
    elif kind == "flipped":
        for _ in range(data.draw(st.integers(1, 3))):
            frame[data.draw(st.integers(4, len(frame) - 1))] ^= 1 << data.draw(st.integers(0, 7))
        sent = bytes(frame)
    else:  # a length prefix promising more than follows; then the client hangs up
        sent = struct.pack(">i", len(frame) - 4 + data.draw(st.integers(1, 1 << 16))) + bytes(
            frame[4:]
        )
    exchange(broker, sent, timeout=2.0)
    api_versions_works(broker)


@SETTINGS
@given(st.data())
def test_corrupt_message_sets_are_refused_and_never_stored(
    broker: BrokerProcess, legacy_topic: str, data: st.DataObject
) -> None:
    version = data.draw(st.integers(0, 2))
    compression = data.draw(st.sampled_from([0, 1]))
    raw = bytearray(
        message_set(0 if version < 2 else 1, compression, count=1 if compression == 0 else 3)
    )
    # From the size field on: the offset of a produced message is the broker's to assign.
    for position in data.draw(
        st.lists(st.integers(8, len(raw) - 1), min_size=1, max_size=3, unique=True)
    ):
        raw[position] ^= data.draw(st.integers(1, 255))
    code = produce(broker, legacy_topic, bytes(raw), version=version)
    assert code in (2, 87), f"error code {code} for a corrupt message set"


def test_message_sets_where_batches_belong_are_invalid_record(
    broker: BrokerProcess, legacy_topic: str
) -> None:
    # Produce v3 and later carry v2 batches only; and one batch per partition.
    assert produce(broker, legacy_topic, message_set(1), version=3) == 87
    assert produce(broker, legacy_topic, bytes(valid_batch()) * 2, version=7) == 87


def test_only_good_message_sets_are_in_the_log(broker: BrokerProcess, legacy_topic: str) -> None:
    assert produce(broker, legacy_topic, message_set(1, 1), version=2) == 0
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "legacy-check",
            "enable.auto.commit": False,
        }
    )
    partition = TopicPartition(legacy_topic, 0, OFFSET_BEGINNING)
    assert consumer.get_watermark_offsets(partition, timeout=10) == (0, 3)
    consumer.assign([partition])
    values: list[bytes | None] = []
    while len(values) < 3 and (messages := consumer.consume(100, timeout=5)):
        values += [m.value() for m in messages if m.error() is None]
    consumer.close()
    assert values == [b"old0", b"old1", b"old2"]
