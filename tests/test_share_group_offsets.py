"""A share group's start offsets for admins on the wire, against a real broker:
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, and
DeleteGroups taking a share group's state with it.

What an operator relies on: describe tells where each partition's in-flight window
starts and how far behind the log it is; an alter moves that start, and the next member
receives records from there; an alter or delete is refused while members consume
(NON_EMPTY_GROUP); a deleted group's state is gone, so a group of that name starts
afresh. Bad input gets Kafka's error codes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.broker.peers.connection import PeerConnection
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.protocol.share_group_messages import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from tests.support.broker import BrokerProcess, module_broker
from tests.support.wire import Wire
from tests.test_group_configs import alter

TOPIC = "jobs"
PARTITIONS = 2
RECORDS_PER_PARTITION = 10
Call = Callable[..., Any]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("share-offsets") / "data") as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": process.bootstrap})
        for n in range(RECORDS_PER_PARTITION * PARTITIONS):
            producer.produce(TOPIC, str(n).encode(), partition=n % PARTITIONS)
        assert producer.flush(30) == 0
        yield process


@pytest.fixture(scope="module")
def wire(broker: BrokerProcess) -> Iterator[Call]:
    """Raw requests to the broker: (api key, version, **fields) -> response."""
    with asyncio.Runner() as runner:
        connection = PeerConnection("127.0.0.1", broker.port, "share-offsets-tests", 30)

        def call(api_key: int, version: int, **fields: Any) -> Any:
            return runner.run(connection.request(api_key, version, **fields))

        yield call
        connection.close()


def consume(broker: BrokerProcess, group: str, want: int) -> list[tuple[int, int]]:
    """(partition, offset) of `want` records a ShareConsumer receives and accepts; it
    leaves the group on close, so the group is Empty again."""
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.subscribe([TOPIC])
    received: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(received) < want:
            assert time.monotonic() < deadline, f"received {len(received)} of {want}"
            for message in consumer.poll(0.5) or ():
                if message.error() is None:
                    received.append((message.partition(), message.offset()))
        consumer.commit_sync()
    finally:
        consumer.close()
    return received


def describe(wire: Call, group: str, topics: list[Any] | None = None, version: int = 1) -> Any:
    response = wire(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, groups=[{"group_id": group, "topics": topics}]
    )
    (described,) = response.groups
    return described


def start_offsets(wire: Call, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag) of every partition of TOPIC the group has state for."""
    described = describe(wire, group)
    assert described.error_code == ErrorCode.NONE
    return {
        p.partition_index: (p.start_offset, p.lag)
        for t in described.topics
        if t.topic_name == TOPIC
        for p in t.partitions
    }


def alter_offsets(wire: Call, group: str, topic: str, starts: dict[int, int]) -> Any:
    return wire(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        0,
        group_id=group,
        topics=[
            {
                "topic_name": topic,
                "partitions": [
                    {"partition_index": p, "start_offset": s} for p, s in starts.items()
                ],
            }
        ],
    )


def delete_offsets(wire: Call, group: str, *topics: str) -> Any:
    return wire(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        0,
        group_id=group,
        topics=[{"topic_name": t} for t in topics],
    )


def join(broker: BrokerProcess, group: str) -> tuple[str, int]:
    """A member joins by a raw heartbeat: (member id, epoch)."""
    member_id = str(uuid.uuid4())
    request = ShareGroupHeartbeatRequest[1](
        group_id=group, member_id=member_id, member_epoch=0, rack_id=None,
        subscribed_topic_names=[TOPIC],
    )  # fmt: skip
    wire = Wire(broker)
    try:
        response = wire.call(request, ShareGroupHeartbeatResponse[1])
    finally:
        wire.close()
    assert response.error_code == ErrorCode.NONE
    return member_id, response.member_epoch


def leave(broker: BrokerProcess, group: str, member_id: str) -> None:
    request = ShareGroupHeartbeatRequest[1](
        group_id=group, member_id=member_id, member_epoch=-1, rack_id=None,
        subscribed_topic_names=None,
    )  # fmt: skip
    wire = Wire(broker)
    try:
        wire.call(request, ShareGroupHeartbeatResponse[1])
    finally:
        wire.close()


def consumed_group(broker: BrokerProcess, group: str) -> None:
    """A share group that has read and accepted every record from the start."""
    assert alter(broker.bootstrap, group, share_auto_offset_reset="earliest") == "OK"
    consume(broker, group, RECORDS_PER_PARTITION * PARTITIONS)


def test_describe_tells_the_start_offsets_and_lag(broker: BrokerProcess, wire: Call) -> None:
    consumed_group(broker, "describe-me")
    offsets = start_offsets(wire, "describe-me")
    assert offsets == {p: (RECORDS_PER_PARTITION, 0) for p in range(PARTITIONS)}
    # herdless's tagged fields: nothing in flight nor archived, every record accepted.
    (topic,) = describe(wire, "describe-me").topics
    assert {(p.in_flight_records, p.archived_records) for p in topic.partitions} == {(0, 0)}
    # Partitions asked for by name; v0 has no lag.
    asked = describe(wire, "describe-me", [{"topic_name": TOPIC, "partitions": [1]}], version=0)
    ((partition,),) = [t.partitions for t in asked.topics]
    assert (partition.partition_index, partition.start_offset) == (1, RECORDS_PER_PARTITION)


def test_an_alter_moves_where_the_next_member_starts(broker: BrokerProcess, wire: Call) -> None:
    group = "rewind-me"
    consumed_group(broker, group)
    response = alter_offsets(wire, group, TOPIC, {0: 3})
    assert response.error_code == ErrorCode.NONE
    ((altered,),) = [t.partitions for t in response.responses]
    assert altered.error_code == ErrorCode.NONE
    assert start_offsets(wire, group)[0] == (3, RECORDS_PER_PARTITION - 3)
    # The records from the new start are delivered again; the other partition's are not.
    again = consume(broker, group, RECORDS_PER_PARTITION - 3)
    assert sorted(again) == [(0, offset) for offset in range(3, RECORDS_PER_PARTITION)]


def test_offsets_of_a_group_with_members_cannot_change(broker: BrokerProcess, wire: Call) -> None:
    group = "busy"
    consumed_group(broker, group)
    member_id, _ = join(broker, group)
    try:
        assert alter_offsets(wire, group, TOPIC, {0: 0}).error_code == ErrorCode.NON_EMPTY_GROUP
        assert delete_offsets(wire, group, TOPIC).error_code == ErrorCode.NON_EMPTY_GROUP
    finally:
        leave(broker, group, member_id)
    assert start_offsets(wire, group)[0] == (RECORDS_PER_PARTITION, 0)


def test_deleting_offsets_forgets_the_topic(broker: BrokerProcess, wire: Call) -> None:
    group = "forget-me"
    consumed_group(broker, group)
    response = delete_offsets(wire, group, TOPIC, "no-such-topic")
    assert response.error_code == ErrorCode.NONE
    errors = {t.topic_name: t.error_code for t in response.responses}
    assert errors == {TOPIC: ErrorCode.NONE, "no-such-topic": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert start_offsets(wire, group) == {}


def test_deleting_a_share_group_deletes_its_state(broker: BrokerProcess, wire: Call) -> None:
    group = "delete-me"
    consumed_group(broker, group)
    response = wire(ApiKey.DELETE_GROUPS, 2, groups_names=[group])
    assert [r.error_code for r in response.results] == [ErrorCode.NONE]
    assert describe(wire, group).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # A group of the same name starts afresh: at the log end (share.auto.offset.reset's
    # default), with no state left of the old one.
    member_id, _ = join(broker, group)
    leave(broker, group, member_id)
    assert start_offsets(wire, group) == {}


def test_bad_requests_get_kafkas_errors(broker: BrokerProcess, wire: Call) -> None:
    assert describe(wire, "never-was").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert alter_offsets(wire, "never-was", TOPIC, {0: 0}).error_code == (
        ErrorCode.GROUP_ID_NOT_FOUND
    )
    assert delete_offsets(wire, "never-was", TOPIC).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    group = "bad-input"
    consumed_group(broker, group)
    response = alter_offsets(wire, group, TOPIC, {0: -5, 7: 0})
    errors = {p.partition_index: p.error_code for t in response.responses for p in t.partitions}
    assert errors == {0: ErrorCode.INVALID_REQUEST, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    unknown = alter_offsets(wire, group, "no-such-topic", {0: 0})
    ((partition,),) = [t.partitions for t in unknown.responses]
    assert partition.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    asked = describe(wire, group, [{"topic_name": "no-such-topic", "partitions": [0]}])
    ((partition,),) = [t.partitions for t in asked.topics]
    assert partition.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Nothing changed.
    assert start_offsets(wire, group) == {p: (RECORDS_PER_PARTITION, 0) for p in range(PARTITIONS)}
