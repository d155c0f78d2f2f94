"""A broker whose disk fills: produces and topic creation are refused with KAFKA_STORAGE_ERROR,
offset commits with NOT_COORDINATOR (as Kafka maps it), each refusal is counted and logged
without flooding, nothing acknowledged is lost, and everything works again once there is room.

The disk is a real small filesystem (tests/support/small_disk.py): the writes fail as
they fail on a full disk, wherever they happen (segment, index, roll, checkpoints).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer import OffsetCommitResponse

from tests.support.broker import BrokerProcess, free_port
from tests.support.small_disk import Filler, small_filesystem
from tests.support.wire import Wire, simple_commit
from tests.test_data_path import batch, produce_raw
from tests.test_metrics import scrape
from tests.test_metrics import value as sample

NONE, LOAD_IN_PROGRESS, NOT_COORDINATOR, KAFKA_STORAGE_ERROR = 0, 14, 16, 56
DISK_BYTES = 12 << 20
# Few enough to run out of too: then segments cannot roll, nor checkpoints be replaced.
DISK_INODES = 2000
TOPIC = "filling"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "disk", DISK_BYTES, inodes=DISK_INODES) as path:
        yield path


def produce(wire: Wire, values: list[bytes]) -> tuple[int, int]:
    """(error code, base offset) of one acks=1 produce of `values` to partition 0."""
    answer = produce_raw(wire, TOPIC, batch(values), acks=1)
    return answer.error_code, answer.base_offset


def create_topic(wire: Wire, name: str) -> int:
    Topic = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest[5](
        topics=[
            Topic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
        ],
        timeout_ms=10_000,
        validate_only=False,
    )
    return wire.call(request, CreateTopicsResponse).topics[0].error_code


def commit(wire: Wire, offset: int) -> int:
    request = simple_commit("keeper", {(TOPIC, 0): offset})
    return wire.call(request, OffsetCommitResponse).topics[0].partitions[0].error_code


def read_back(broker: BrokerProcess, end: int) -> dict[int, bytes]:
    """Every record of the topic by offset, read up to offset `end` (for at most 10 s)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader"})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    found: dict[int, bytes] = {}
    deadline = time.monotonic() + 10
    while len(found) < end and time.monotonic() < deadline:
        for message in consumer.consume(10_000, timeout=0.2):
            assert message.error() is None, message.error()
            found[message.offset()] = message.value()
    consumer.close()
    return found


def committed(broker: BrokerProcess) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "keeper"})
    [partition] = consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
    consumer.close()
    return partition.offset


def start_broker(disk: Path, metrics_port: int | None = None) -> BrokerProcess:
    # The data directory is the small filesystem itself; the broker's log is beside it.
    metrics = () if metrics_port is None else ("--metrics-port", str(metrics_port))
    return BrokerProcess(
        disk,
        *metrics,
        *("--set", "offsets.topic.num.partitions=1"),
        *("--set", "group.initial.rebalance.delay.ms=0"),
        # Every append is synced, and the recovery point checkpointed: more writes to fail.
        *("--set", "log.flush.interval.messages=1"),
        # The first record while the disk is full needs a new segment.
        *("--set", "log.segment.bytes=32768"),
    ).start()


def produce_some(wire: Wire, label: str, count: int, acknowledged: dict[int, bytes]) -> list[int]:
    """Produce `count` records one request each; returns the error codes, keeping what was
    acknowledged."""
    codes = []
    for n in range(count):
        value = f"{label}-{n}-".encode() * 150
        code, base = produce(wire, [value])
        codes.append(code)
        if code == NONE:
            acknowledged[base] = value
    return codes


def test_a_full_disk_refuses_produce_and_creation_and_loses_nothing(disk: Path) -> None:
    metrics_port = free_port()
    broker = start_broker(disk, metrics_port)
    try:
        wire = Wire(broker)
        assert create_topic(wire, TOPIC) == NONE
        acknowledged: dict[int, bytes] = {}
        assert set(produce_some(wire, "before", 20, acknowledged)) == {NONE}

        filler = Filler(disk)
        codes = produce_some(wire, "while-full", 60, acknowledged)
        assert set(codes) <= {NONE, KAFKA_STORAGE_ERROR}, codes
        refused = codes.count(KAFKA_STORAGE_ERROR)
        # A record or two may still fit the last page of a file.
        assert refused >= 50, codes
        assert create_topic(wire, "no-room") == KAFKA_STORAGE_ERROR

        samples = scrape(metrics_port)
        counted = sample(
            samples, "herdless_storage_errors_total", operation="append", error="ENOSPC"
        )
        assert counted is not None and counted >= refused, samples
        text = broker.log_path.read_text(errors="replace")
        assert "Traceback" not in text
        full = [line for line in text.splitlines() if "No space left" in line]
        # The first five of each kind in a minute, not one a refusal.
        assert 1 <= len(full) <= 15, "\n".join(full)
        assert any(f"append of {TOPIC}-0 failed" in line for line in full), full

        # Room again: writes resume where the log ends, with no restart.
        filler.remove()
        assert set(produce_some(wire, "after", 5, acknowledged)) == {NONE}
        assert create_topic(wire, "room-again") == NONE
        wire.close()
        assert sorted(acknowledged) == list(range(len(acknowledged)))
        assert read_back(broker, len(acknowledged)) == acknowledged

        broker.kill()
        broker.start()
        assert read_back(broker, len(acknowledged)) == acknowledged
        assert "Traceback" not in broker.log_path.read_text(errors="replace")
    finally:
        broker.kill()


def test_offset_commits_on_a_full_disk_keep_what_was_acknowledged(disk: Path) -> None:
    broker = start_broker(disk)
    try:
        wire = Wire(broker)
        assert create_topic(wire, TOPIC) == NONE
        assert commit(wire, 7) == NONE
        filler = Filler(disk)
        # Kafka answers an offsets append that fails for storage NOT_COORDINATOR: the
        # client finds the coordinator again and retries (it reloads meanwhile).
        codes = [commit(wire, 100 + n) for n in range(40)]
        assert set(codes) <= {NONE, LOAD_IN_PROGRESS, NOT_COORDINATOR}, codes
        assert NOT_COORDINATOR in codes, codes
        last = max((100 + n for n, code in enumerate(codes) if code == NONE), default=7)
        filler.remove()
        assert committed(broker) == last
        broker.kill()
        broker.start()
        assert committed(broker) == last
        wire.close()
        assert "Traceback" not in broker.log_path.read_text(errors="replace")
    finally:
        broker.kill()
