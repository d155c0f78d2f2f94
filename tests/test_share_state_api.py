"""The share coordinator's five state APIs on the wire, against a real broker: what a
share partition's leader relies on (its state read back as written, across a restart),
Kafka's fencing, FindCoordinator's SHARE key type, and bad input answered with Kafka's
error codes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from herdless.broker.peers.connection import PeerConnection
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.protocol.kafka_uuid import kafka_uuid_str
from tests.support.broker import BrokerProcess, module_broker

TIMEOUT_S = 30
SHARE_KEY_TYPE = 2
ACKNOWLEDGED, ARCHIVED, AVAILABLE = 2, 4, 0
Call = Callable[..., Any]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("share-state") / "data"
    with module_broker(
        data_dir, "--set", "share.coordinator.snapshot.update.records.per.snapshot=2"
    ) as process:
        yield process


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture
def wire(broker: BrokerProcess, runner: asyncio.Runner) -> Iterator[Call]:
    """Raw requests to the broker: (api key, version, **fields) -> response."""
    connection = PeerConnection("127.0.0.1", broker.port, "share-state-tests", TIMEOUT_S)

    def call(api_key: int, version: int, **fields: Any) -> Any:
        return runner.run(connection.request(api_key, version, **fields))

    yield call
    connection.close()


def one(response: Any) -> Any:
    """The one partition result of a response naming one partition."""
    (topic,) = response.results
    (partition,) = topic.partitions
    return partition


def find_coordinator(wire: Call, key: str) -> Any:
    response = wire(ApiKey.FIND_COORDINATOR, 6, key_type=SHARE_KEY_TYPE, coordinator_keys=[key])
    (coordinator,) = response.coordinators
    return coordinator


def initialize(wire: Call, group: str, topic: uuid.UUID, state_epoch: int, start: int) -> Any:
    return one(
        wire(
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            0,
            group_id=group,
            topics=[
                {
                    "topic_id": topic,
                    "partitions": [
                        {"partition": 0, "state_epoch": state_epoch, "start_offset": start}
                    ],
                }
            ],
        )
    )


def read(wire: Call, group: str, topic: uuid.UUID, leader_epoch: int) -> Any:
    return one(
        wire(
            ApiKey.READ_SHARE_GROUP_STATE,
            0,
            group_id=group,
            topics=[
                {"topic_id": topic, "partitions": [{"partition": 0, "leader_epoch": leader_epoch}]}
            ],
        )
    )


def write(
    wire: Call,
    group: str,
    topic: uuid.UUID,
    batches: list[tuple[int, int, int, int]],
    *,
    state_epoch: int = 0,
    leader_epoch: int = 1,
    start: int = -1,
    partition: int = 0,
) -> Any:
    return one(
        wire(
            ApiKey.WRITE_SHARE_GROUP_STATE,
            0,
            group_id=group,
            topics=[
                {
                    "topic_id": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "state_epoch": state_epoch,
                            "leader_epoch": leader_epoch,
                            "start_offset": start,
                            "state_batches": [
                                {
                                    "first_offset": first,
                                    "last_offset": last,
                                    "delivery_state": state,
                                    "delivery_count": count,
                                }
                                for first, last, state, count in batches
                            ],
                        }
                    ],
                }
            ],
        )
    )


def batches(result: Any) -> list[tuple[int, int, int, int]]:
    return [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in result.state_batches
    ]


def ready(wire: Call, group: str, topic: uuid.UUID) -> None:
    """Ask FindCoordinator until the state topic's shard serves the key."""
    deadline = time.monotonic() + TIMEOUT_S
    key = f"{group}:{kafka_uuid_str(topic)}:0"
    while True:
        found = find_coordinator(wire, key)
        result = read(wire, group, topic, -1)
        if found.error_code == ErrorCode.NONE and result.error_code == ErrorCode.NONE:
            return
        assert time.monotonic() < deadline, (found, result)
        time.sleep(0.1)


def test_find_coordinator_names_this_broker_for_a_share_partition(
    wire: Call, broker: BrokerProcess
) -> None:
    topic = uuid.uuid4()
    ready(wire, "g-find", topic)
    found = find_coordinator(wire, f"g:with:colons:{kafka_uuid_str(topic)}:3")
    assert (found.error_code, found.node_id, found.port) == (ErrorCode.NONE, 0, broker.port)


@pytest.mark.parametrize(
    "key",
    ["nocolons", "g:notauuid:0", f"g:{kafka_uuid_str(uuid.UUID(int=7))}:x"],
    ids=["no colons", "no uuid", "no partition number"],
)
def test_find_coordinator_refuses_a_key_that_names_no_share_partition(wire: Call, key: str) -> None:
    found = find_coordinator(wire, key)
    assert found.error_code == ErrorCode.INVALID_REQUEST
    assert found.error_message


def test_a_share_partitions_state_reads_back_as_written_and_survives_a_restart(
    wire: Call, broker: BrokerProcess, runner: asyncio.Runner
) -> None:
    group, topic = "g-state", uuid.uuid4()
    ready(wire, group, topic)
    never = read(wire, group, topic, -1)
    assert (never.error_code, never.start_offset, never.state_epoch) == (ErrorCode.NONE, -1, 0)
    assert initialize(wire, group, topic, 1, 100).error_code == ErrorCode.NONE
    assert read(wire, group, topic, 1).start_offset == 100
    # Enough writes for snapshots among the updates (2 updates per snapshot here).
    assert write(wire, group, topic, [(100, 109, AVAILABLE, 1)], state_epoch=1).error_code == 0
    assert write(wire, group, topic, [(100, 104, ACKNOWLEDGED, 1)], state_epoch=1).error_code == 0
    assert write(wire, group, topic, [(107, 107, ARCHIVED, 5)], state_epoch=1).error_code == 0
    assert write(wire, group, topic, [], state_epoch=1, start=102).error_code == 0
    expected = [(102, 104, ACKNOWLEDGED, 1), (105, 106, AVAILABLE, 1), (107, 107, ARCHIVED, 5)]
    expected.append((108, 109, AVAILABLE, 1))
    state = read(wire, group, topic, 1)
    assert (state.error_code, state.state_epoch, state.start_offset) == (0, 1, 102)
    assert batches(state) == expected

    broker.restart()
    after = PeerConnection("127.0.0.1", broker.port, "share-state-tests", TIMEOUT_S)

    def again(api_key: int, version: int, **fields: Any) -> Any:
        return runner.run(after.request(api_key, version, **fields))

    ready(again, group, topic)
    state = read(again, group, topic, 1)
    after.close()
    assert (state.state_epoch, state.start_offset) == (1, 102)
    assert batches(state) == expected


def test_older_leader_and_state_epochs_are_fenced(wire: Call, broker: BrokerProcess) -> None:
    group, topic = "g-fence", uuid.uuid4()
    ready(wire, group, topic)
    initialize(wire, group, topic, 2, 0)
    assert read(wire, group, topic, 5).error_code == ErrorCode.NONE
    stale_leader = read(wire, group, topic, 4)
    assert stale_leader.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert stale_leader.error_message
    assert write(wire, group, topic, [], leader_epoch=4, state_epoch=2).error_code == (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    assert write(wire, group, topic, [], leader_epoch=5, state_epoch=1).error_code == (
        ErrorCode.FENCED_STATE_EPOCH
    )
    assert initialize(wire, group, topic, 1, 0).error_code == ErrorCode.FENCED_STATE_EPOCH
    # Nothing the fenced calls asked for took effect, and each said so once in the log.
    state = read(wire, group, topic, 5)
    assert (state.state_epoch, state.start_offset, batches(state)) == (2, 0, [])
    said = f"share partition {group}:{kafka_uuid_str(topic)}:0: "
    logged = [line for line in broker.log_tail().splitlines() if said in line]
    assert len(logged) == 4, logged
    assert "read at leader epoch 4 refused, FENCED_LEADER_EPOCH" in logged[0]


def test_the_summary_and_delete(wire: Call) -> None:
    group, topic = "g-delete", uuid.uuid4()
    ready(wire, group, topic)
    initialize(wire, group, topic, 3, 40)
    read(wire, group, topic, 7)
    write(wire, group, topic, [(40, 41, ACKNOWLEDGED, 1)], state_epoch=3, leader_epoch=7)
    summary = one(
        wire(
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
            0,
            group_id=group,
            topics=[{"topic_id": topic, "partitions": [{"partition": 0, "leader_epoch": -1}]}],
        )
    )
    assert (summary.error_code, summary.state_epoch, summary.leader_epoch) == (0, 3, 7)
    assert summary.start_offset == 40
    deleted = wire(
        ApiKey.DELETE_SHARE_GROUP_STATE,
        0,
        group_id=group,
        topics=[{"topic_id": topic, "partitions": [{"partition": 0}]}],
    )
    assert one(deleted).error_code == ErrorCode.NONE
    gone = read(wire, group, topic, -1)
    assert (gone.error_code, gone.start_offset, batches(gone)) == (0, -1, [])


def test_bad_input_is_refused_per_partition_and_changes_nothing(wire: Call) -> None:
    group, topic = "g-bad", uuid.uuid4()
    ready(wire, group, topic)
    initialize(wire, group, topic, 0, 0)
    refused = [
        write(wire, group, uuid.UUID(int=0), [(0, 0, ACKNOWLEDGED, 1)]),
        write(wire, group, topic, [(0, 0, ACKNOWLEDGED, 1)], partition=-1),
        write(wire, group, topic, [(0, 0, 3, 1)]),  # 3 is no delivery state
        write(wire, group, topic, [(5, 2, ACKNOWLEDGED, 1)]),
        write(wire, "", topic, [(0, 0, ACKNOWLEDGED, 1)]),
    ]
    for result in refused:
        assert result.error_code == ErrorCode.INVALID_REQUEST, result
        assert result.error_message
    assert batches(read(wire, group, topic, -1)) == []
