"""Limits that keep one client from exhausting a broker process: partitions per request
and per broker (under a small file limit), requests the schema forbids, idle and
stalled connections, and long polls whose client has gone."""

from __future__ import annotations

import os
import re
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest

from tests.support.broker import BrokerProcess
from tests.support.wire import Wire, simple_commit
from tests.test_data_path import batch, fetch_request, produce_partitions

PER_REQUEST = 100
# 256 kept for sockets, 344 for segment files: 114 segments open at once.
FILE_LIMIT = 600
# More partitions than the file limit, let alone three descriptors each.
HOSTED = 7 * PER_REQUEST
MAX_BROKER_PARTITIONS = HOSTED + PER_REQUEST
IDLE_MS = 1500
READ_TIMEOUT_MS = 1000
INVALID_PARTITIONS, INVALID_REQUEST, POLICY_VIOLATION = 37, 42, 44
CLOSE_WAIT = "08"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("limits") / "data",
        "--set",
        f"max.partitions.per.request={PER_REQUEST}",
        "--set",
        f"connections.max.idle.ms={IDLE_MS}",
        "--set",
        f"request.read.timeout.ms={READ_TIMEOUT_MS}",
        "--set",
        f"max.broker.partitions={MAX_BROKER_PARTITIONS}",
        prefix=("prlimit", f"--nofile={FILE_LIMIT}:{FILE_LIMIT}", "--"),
    ).start()
    yield process
    assert process.stop() == 0, process.log_tail()


def full_log(broker: BrokerProcess) -> str:
    return broker.log_path.read_text(errors="replace")


def create_topics(broker: BrokerProcess, topics: dict[str, int]) -> list[tuple[int, str]]:
    Topic = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest[5](
        topics=[
            Topic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
            for n, p in topics.items()
        ],
        timeout_ms=10_000,
        validate_only=False,
    )
    wire = Wire(broker)
    try:
        response = wire.call(request, CreateTopicsResponse)
    finally:
        wire.close()
    return [(t.error_code, t.error_message or "") for t in response.topics]


def topic_dirs(broker: BrokerProcess, name: str) -> list[str]:
    return [p.name for p in broker.data_dir.iterdir() if p.name.startswith(name + "-")]


def test_one_request_cannot_create_two_billion_partitions(broker: BrokerProcess) -> None:
    [(code, message)] = create_topics(broker, {"huge": 2**31 - 1})
    assert code == INVALID_PARTITIONS
    assert "max.partitions.per.request (100)" in message
    assert topic_dirs(broker, "huge") == []


def test_the_request_limit_counts_every_topic_in_the_request(broker: BrokerProcess) -> None:
    results = create_topics(broker, {"half-a": 60, "half-b": 60})
    assert [code for code, _ in results] == [INVALID_PARTITIONS, INVALID_PARTITIONS]
    assert topic_dirs(broker, "half-a") == topic_dirs(broker, "half-b") == []


def test_create_partitions_is_limited_per_request(broker: BrokerProcess) -> None:
    assert create_topics(broker, {"growing": 1}) == [(0, "")]
    request = CreatePartitionsRequest[1](
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="growing", count=500)],
        timeout_ms=10_000,
        validate_only=False,
    )
    wire = Wire(broker)
    (result,) = wire.call(request, CreatePartitionsResponse).results
    wire.close()
    assert result.error_code == INVALID_PARTITIONS
    assert "max.partitions.per.request" in result.error_message


def raw(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def read_frame(sock: socket.socket) -> bytes | None:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[4:]


def test_a_null_group_id_gets_invalid_request_and_no_traceback(broker: BrokerProcess) -> None:
    with raw(broker) as sock:
        sock.sendall(bytes.fromhex("00000013000c000000000007000178ffff000000000000"))
        response = read_frame(sock)
    assert response is not None
    correlation_id, error_code = struct.unpack(">ih", response[:6])
    assert (correlation_id, error_code) == (7, INVALID_REQUEST)
    assert "Traceback" not in full_log(broker)


def test_a_null_array_closes_the_connection_with_one_line(broker: BrokerProcess) -> None:
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest[3](
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[Topic(name="t")]
    )
    request.with_header(correlation_id=3, client_id="null-array")
    body = bytearray(request.encode(header=True))
    # The partition array is last: its count, 0, becomes -1 (null).
    assert body[-4:] == b"\0\0\0\0"
    body[-4:] = b"\xff\xff\xff\xff"
    with raw(broker) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        assert read_frame(sock) is None
    log = full_log(broker)
    assert "Produce v3 has a null topic_data[0].partition_data" in log
    assert "Traceback" not in log


def test_warnings_from_one_peer_are_limited(broker: BrokerProcess) -> None:
    before = full_log(broker).count(" WARNING ")
    for _ in range(40):
        with raw(broker) as sock:
            sock.sendall(struct.pack(">ihhi", 8, 999, 0, 1))
            read_frame(sock)
    assert full_log(broker).count(" WARNING ") - before <= 5


def test_an_idle_connection_is_closed(broker: BrokerProcess) -> None:
    with raw(broker) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""
        assert IDLE_MS / 1000 - 0.2 < time.monotonic() - started < IDLE_MS / 1000 + 3


def test_a_stalled_frame_is_dropped(broker: BrokerProcess) -> None:
    with raw(broker) as sock:
        sock.settimeout(READ_TIMEOUT_MS / 1000 + 3)
        sock.sendall(struct.pack(">i", 10_000_000) + b"\0" * 100_000)
        # Today's limit holds the buffer for ever; the socket timeout would fail this.
        assert sock.recv(1) == b""


def close_wait_sockets(broker: BrokerProcess) -> int:
    assert broker.process is not None
    port = f"{broker.port:04X}"
    count = 0
    table = Path(f"/proc/{broker.process.pid}/net/tcp").read_text()
    for line in table.splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(":" + port) and fields[3] == CLOSE_WAIT:
            count += 1
    return count


def waiting_fetch(topic: str, max_wait_ms: int) -> object:
    """A Fetch from the start of an empty partition: it waits up to max_wait_ms."""
    Topic = FetchRequest.FetchTopic
    return FetchRequest[4](
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=[
            Topic(
                topic=topic,
                partitions=[
                    Topic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)
                ],
            )
        ],
    )


def test_a_long_poll_ends_when_its_client_hangs_up(broker: BrokerProcess) -> None:
    assert create_topics(broker, {"quiet": 1}) == [(0, "")]
    request = waiting_fetch("quiet", 60_000)
    wire = Wire(broker)
    request.with_header(correlation_id=1, client_id="long-poll")
    body = bytes(request.encode(header=True))
    wire.sock.sendall(struct.pack(">i", len(body)) + body)
    time.sleep(0.3)
    wire.close()
    deadline = time.monotonic() + 3
    while close_wait_sockets(broker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert close_wait_sockets(broker) == 0


def test_pipelined_requests_are_answered_in_order_and_cut_a_waiting_fetch_short(
    broker: BrokerProcess,
) -> None:
    """Requests sent together, one of them a Fetch that would wait for records: each is
    answered in the order sent. With requests behind it the Fetch answers at once, rather
    than holding them up for its max wait; last, with none behind, it waits."""
    assert create_topics(broker, {"pipelined": 1}) == [(0, "")]
    requests = [
        MetadataRequest[1](topics=None),
        simple_commit("pipelined-group", {("pipelined", 0): 1}),
        waiting_fetch("pipelined", 700),
        MetadataRequest[1](topics=None),
        simple_commit("pipelined-group", {("pipelined", 0): 2}),
    ]
    wire = Wire(broker)
    try:
        behind = answered_together(wire, requests)
        last = answered_together(wire, requests[:3])
    finally:
        wire.close()
    assert [c for c, _ in behind] == [1, 2, 3, 4, 5]
    assert all(at < 0.6 for _, at in behind), behind
    assert [c for c, _ in last] == [1, 2, 3]
    assert all(at < 0.6 for _, at in last[:2]), last
    assert last[2][1] >= 0.6, last


def answered_together(wire: Wire, requests: list[Any]) -> list[tuple[int, float]]:
    """Send `requests` in one write; each answer's correlation id (1, 2, ...) and how long
    after the write it came."""
    frames = b""
    for correlation_id, request in enumerate(requests, 1):
        request.with_header(correlation_id=correlation_id, client_id="pipelined")
        body = bytes(request.encode(header=True))
        frames += struct.pack(">i", len(body)) + body
    sent = time.monotonic()
    wire.sock.sendall(frames)
    answered = []
    for _ in requests:
        (size,) = struct.unpack(">i", wire._read(4))
        (correlation_id,) = struct.unpack(">i", wire._read(size)[:4])
        answered.append((correlation_id, time.monotonic() - sent))
    return answered


def test_connections_past_the_file_limit_are_warned_of_and_the_broker_recovers(
    broker: BrokerProcess,
) -> None:
    """Past the file limit new connections are hung up on at once; the log says why, and
    once clients let go the broker accepts and answers again."""
    flood = []
    try:
        for _ in range(FILE_LIMIT + 50):
            flood.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))
        deadline = time.monotonic() + 10
        while "file descriptors in use" not in full_log(broker):
            assert time.monotonic() < deadline, full_log(broker)[-2000:]
            time.sleep(0.05)
    finally:
        for sock in flood:
            sock.close()
    warning = next(line for line in full_log(broker).splitlines() if "descriptors in use" in line)
    assert f"of {FILE_LIMIT} file descriptors in use" in warning
    assert "raise the limit" in warning
    deadline = time.monotonic() + 10
    while True:
        try:
            wire = Wire(broker)
            wire.call(MetadataRequest[9](topics=[]), MetadataResponse)
            wire.close()
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert "Traceback" not in full_log(broker)


def fetch_every_partition(wire: Wire, topic: str, count: int) -> dict[int, bytes]:
    """The records of partitions 0..count-1 of `topic`, read in one request."""
    request = fetch_request(topic, dict.fromkeys(range(count), 0), max_wait_ms=0, min_bytes=0)
    [answer] = wire.call(request, FetchResponse).responses
    assert {p.error_code for p in answer.partitions} == {0}
    return {p.partition_index: p.records for p in answer.partitions}


def test_a_broker_hosts_more_partitions_than_its_file_limit(broker: BrokerProcess) -> None:
    """Last in this module: it fills the broker. Partitions do not hold descriptors: their
    segment files are closed when unused and others need room, and reopened on demand."""
    note = f"file limit {FILE_LIMIT}: segment files hold at most 344 descriptors at once"
    assert note in full_log(broker)
    topics = [f"fill-{n}" for n in range(HOSTED // PER_REQUEST)]
    for topic in topics:
        assert create_topics(broker, {topic: PER_REQUEST}) == [(0, "")]
    wire = Wire(broker)
    for topic in topics:
        records = {p: batch([f"{topic}/{p}".encode()]) for p in range(PER_REQUEST)}
        answers = produce_partitions(wire, topic, records, acks=1)
        assert [a.error_code for a in answers] == [0] * PER_REQUEST
    for topic in topics:
        for partition, records in fetch_every_partition(wire, topic, PER_REQUEST).items():
            assert f"{topic}/{partition}".encode() in records
    wire.close()
    assert broker.process is not None
    assert len(os.listdir(f"/proc/{broker.process.pid}/fd")) < FILE_LIMIT
    # max.broker.partitions is what bounds them now, and names itself.
    [(code, message)] = create_topics(broker, {"one-too-many": PER_REQUEST})
    assert code == POLICY_VIOLATION
    assert f"max.broker.partitions ({MAX_BROKER_PARTITIONS})" in message
    assert topic_dirs(broker, "one-too-many") == []
    hosted = int(re.search(r"hosts (\d+) partitions", message).group(1))
    # Auto-creation at the limit: an error code per request, not a traceback per request.
    assert create_topics(broker, {"last-room": MAX_BROKER_PARTITIONS - hosted}) == [(0, "")]
    lines = len(full_log(broker).splitlines())
    wire = Wire(broker)
    for _ in range(20):
        request = MetadataRequest[9](
            topics=[MetadataRequest.MetadataRequestTopic(name="auto-at-limit")],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        (topic,) = wire.call(request, MetadataResponse).topics
        assert topic.error_code == POLICY_VIOLATION
    wire.close()
    assert len(full_log(broker).splitlines()) - lines <= 1
    assert "Traceback" not in full_log(broker)
    assert "Too many open files" not in full_log(broker)
