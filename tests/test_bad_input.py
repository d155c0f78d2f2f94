"""Malformed frames and corrupt batches sent to a live broker.

Each gets an error code or a closed connection; the broker never crashes,
never stores a bad batch, and keeps serving well-behaved clients.
"""

from __future__ import annotations

import socket
import struct

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from tests.support.broker import BrokerProcess

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
    assert response is not None, f"broker stopped answering:\n{broker.log()}"
    decoded = ApiVersionsResponse.decode(response, version=3, header=True)
    assert decoded.header.correlation_id == 42
    assert decoded.error_code == 0
    assert broker.alive()


def valid_batch(count: int = 3, base_sequence: int = -1) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i in range(count):
        builder.append(
            i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i, headers=[]
        )
    return bytearray(builder.build())


def produce(broker: BrokerProcess, topic: str, records: bytes, version: int = 7) -> int:
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            Topic(name=topic, partition_data=[Topic.PartitionProduceData(index=0, records=records)])
        ],
    )
    response = exchange(broker, request_frame(request))
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
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest[7](
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            Topic(
                name=topic,
                partition_data=[Topic.PartitionProduceData(index=99, records=bytes(valid_batch()))],
            )
        ],
    )
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
