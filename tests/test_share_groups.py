"""Share groups (KIP-932) on the wire: confluent-kafka's ShareConsumer, and raw requests.

What a share consumer and an operator see of a share group's membership: members
join by heartbeating, share the topic's partitions (each partition to at least one
member, several when members outnumber partitions), show in ShareGroupDescribe and
in ListGroups filtered by type, leave on close; the group's own configs set its
members' heartbeat interval and session; and the group is loaded back from
`__consumer_offsets` after a restart. (Fetching records, ShareFetch, is the share
partitions' and is not exercised here.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)

from herdless.broker.config import BrokerConfig
from herdless.broker.handlers.apis import _advertised
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.protocol.share_group_messages import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from tests.support.broker import BrokerProcess, module_broker
from tests.support.cluster import running_cluster
from tests.support.group_wire import ask, find_coordinator_request
from tests.support.wire import Wire
from tests.test_group_configs import DEFAULT_CONFIG, GROUP_CONFIG, alter, described

TOPIC = "queue"
# Lower bounds than Kafka's, so that a group may ask for a session a test can wait out.
BOUNDS = {
    "group.share.min.session.timeout.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    args = [a for name, value in BOUNDS.items() for a in ("--set", f"{name}={value}")]
    with module_broker(tmp_path_factory.mktemp("share-groups") / "data", *args) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        yield process


def heartbeat(
    broker: BrokerProcess, group: str, member_id: str, epoch: int, topics: list[str] | None = None
) -> Any:
    """A raw ShareGroupHeartbeat v1; joining (epoch 0) subscribes to TOPIC unless told."""
    request = ShareGroupHeartbeatRequest[1](
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=topics if topics is not None or epoch != 0 else [TOPIC],
    )
    with closing(Wire(broker)) as wire:
        return wire.call(request, ShareGroupHeartbeatResponse[1])


def describe(broker: BrokerProcess, *groups: str) -> list[Any]:
    request = ShareGroupDescribeRequest[1](
        group_ids=list(groups), include_authorized_operations=True
    )
    with closing(Wire(broker)) as wire:
        return wire.call(request, ShareGroupDescribeResponse[1]).groups  # type: ignore[attr-defined, no-any-return]


def listed(broker: BrokerProcess, *types: str) -> dict[str, tuple[str, str, str]]:
    """ListGroups v5 filtered by type: group id -> (protocol type, state, group type)."""
    request = ListGroupsRequest[5](states_filter=[], types_filter=list(types))
    with closing(Wire(broker)) as wire:
        groups = wire.call(request, ListGroupsResponse[5]).groups  # type: ignore[attr-defined]
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in groups}


def delete(broker: BrokerProcess, group: str) -> int:
    with closing(Wire(broker)) as wire:
        (result,) = wire.call(
            DeleteGroupsRequest[2](groups_names=[group]), DeleteGroupsResponse[2]
        ).results  # type: ignore[attr-defined]
    return int(result.error_code)


def wait_for(
    condition: Callable[[], Any], consumers: list[ShareConsumer], timeout: float = 30
) -> Any:
    """Poll the consumers (their heartbeats ride on polling) until `condition` holds."""
    deadline = time.monotonic() + timeout
    while True:
        for consumer in consumers:
            consumer.poll(0.1)
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"


def test_share_consumers_share_the_partitions_and_leave_on_close(broker: BrokerProcess) -> None:
    group = "shared"
    consumers = []
    for i in range(3):
        consumer = ShareConsumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": f"c{i}"}
        )
        consumer.subscribe([TOPIC])
        consumers.append(consumer)
    try:

        def settled() -> Any:
            (g,) = describe(broker, group)
            epochs = {m.member_epoch for m in g.members}
            if len(g.members) == 3 and epochs == {g.assignment_epoch}:
                return g
            return None

        g = wait_for(settled, consumers)
        assert (g.error_code, g.group_state, g.assignor_name) == (0, "Stable", "simple")
        assert sorted(m.client_id for m in g.members) == ["c0", "c1", "c2"]
        holders = {0: 0, 1: 0}
        for member in g.members:
            assert member.subscribed_topic_names == [TOPIC]
            (assigned,) = member.assignment.topic_partitions
            assert assigned.topic_name == TOPIC and assigned.partitions
            for partition in assigned.partitions:
                holders[partition] += 1
        # Three members, two partitions: each partition to ceil(3/2) = 2 members at most.
        assert all(1 <= count <= 2 for count in holders.values()), holders
        assert listed(broker, "share")[group] == ("share", "Stable", "share")
        assert group not in listed(broker, "consumer", "classic")
        assert delete(broker, group) == ErrorCode.NON_EMPTY_GROUP
        with closing(Wire(broker)) as wire:
            request = DescribeGroupsRequest[5](groups=[group], include_authorized_operations=False)
            (classic,) = wire.call(request, DescribeGroupsResponse[5]).groups  # type: ignore[attr-defined]
        # Not a classic group: answered as a group it does not know (Dead; before v6, no
        # error), as Kafka answers.
        assert (classic.error_code, classic.group_state) == (ErrorCode.NONE, "Dead")
    finally:
        for consumer in consumers:
            consumer.close()
    (g,) = describe(broker, group)
    assert (g.group_state, g.members) == ("Empty", [])
    assert delete(broker, group) == ErrorCode.NONE
    assert describe(broker, group)[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_bad_heartbeats_get_kafkas_errors(broker: BrokerProcess) -> None:
    assert heartbeat(broker, "bad", "", 0).error_code == ErrorCode.INVALID_REQUEST
    assert heartbeat(broker, "bad", "m", 0, topics=[]).error_code == ErrorCode.INVALID_REQUEST
    assert heartbeat(broker, "bad", "m", -5).error_code == ErrorCode.INVALID_REQUEST
    assert heartbeat(broker, "bad", "m", 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    joined = heartbeat(broker, "bad", "m", 0)
    assert joined.error_code == ErrorCode.NONE
    assert heartbeat(broker, "bad", "ghost", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    fenced = heartbeat(broker, "bad", "m", joined.member_epoch + 5)
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    left = heartbeat(broker, "bad", "m", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)
    (g,) = describe(broker, "bad")
    assert (g.group_state, g.members) == ("Empty", [])


def test_a_members_first_answer_carries_its_partitions(broker: BrokerProcess) -> None:
    joined = heartbeat(broker, "raw", "raw-member", 0)
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "raw-member", 1)
    assert joined.heartbeat_interval_ms == 5000
    (assigned,) = joined.assignment.topic_partitions
    assert sorted(assigned.partitions) == [0, 1]
    again = heartbeat(broker, "raw", "raw-member", 1)
    assert (again.error_code, again.assignment) == (0, None)
    assert heartbeat(broker, "raw", "raw-member", -1).error_code == 0


def test_share_group_configs_set_the_members_session_and_heartbeat(broker: BrokerProcess) -> None:
    assert described(broker, "tuned-share")["share.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
    assert alter(broker.bootstrap, "tuned-share", share_heartbeat_interval_ms="250") == "OK"
    assert alter(broker.bootstrap, "tuned-share", share_session_timeout_ms="1000") == "OK"
    assert described(broker, "tuned-share")["share.session.timeout.ms"] == ("1000", GROUP_CONFIG)
    joined = heartbeat(broker, "tuned-share", "quick", 0)
    assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 250)
    time.sleep(1.5)  # silent for longer than the group's session: it is removed
    (g,) = describe(broker, "tuned-share")
    assert (g.group_state, g.members) == ("Empty", [])


@pytest.mark.parametrize(
    ("configs", "words"),
    [
        ({"share_isolation_level": "read_committed"}, None),
        ({"share_auto_offset_reset": "earliest"}, None),
        ({"share_auto_offset_reset": "by_duration:PT1H30M"}, None),
        ({"share_record_lock_duration_ms": "20000"}, None),
        ({"share_isolation_level": "dirty"}, "String must be one of"),
        ({"share_auto_offset_reset": "sometimes"}, "must be either 'earliest', 'latest'"),
        ({"share_auto_offset_reset": "by_duration:-PT1H"}, "by_duration"),
        ({"share_record_lock_duration_ms": "1000"}, "group.share.min.record.lock.duration.ms"),
        ({"share_delivery_count_limit": "11"}, "group.share.max.delivery.count.limit"),
        ({"share_partition_max_record_locks": "99"}, "group.share.min.partition.max.record"),
        ({"share_heartbeat_interval_ms": "50"}, "group.share.min.heartbeat.interval.ms"),
    ],
)
def test_share_group_configs_are_checked_as_kafka_checks_them(
    broker: BrokerProcess, configs: dict[str, str], words: str | None
) -> None:
    answer = alter(broker.bootstrap, "checked-share", **configs)
    if words is None:
        assert answer == "OK"
        ((name, value),) = configs.items()
        assert described(broker, "checked-share")[name.replace("_", ".")] == (value, GROUP_CONFIG)
    else:
        assert "InvalidConfigurationError" in answer and words in answer, answer


def test_a_share_group_is_loaded_back_after_a_restart(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        first = heartbeat(process, "kept", "a", 0)
        second = heartbeat(process, "kept", "b", 0)
        (before,) = describe(process, "kept")
        process.restart()
        (after,) = describe(process, "kept")
        assert (after.error_code, after.group_epoch, after.assignment_epoch) == (
            0,
            before.group_epoch,
            before.assignment_epoch,
        )
        assert sorted(m.member_id for m in after.members) == ["a", "b"]
        # The member at its last epoch carries on; the one whose answer moved it on
        # (b's join bumped the epoch) is told its share.
        assert heartbeat(process, "kept", "b", second.member_epoch).error_code == 0
        caught_up = heartbeat(process, "kept", "a", first.member_epoch)
        assert (caught_up.error_code, caught_up.member_epoch) == (0, second.member_epoch)
        assert caught_up.assignment is not None
    finally:
        process.kill()


def test_share_group_apis_are_advertised_unless_disabled() -> None:
    def keys(config: BrokerConfig) -> set[int]:
        return {entry.api_key for entry in _advertised(config)}

    share_apis = {ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE}
    assert share_apis <= keys(BrokerConfig())
    assert not share_apis & keys(BrokerConfig(group_share_enable=False))


def test_a_share_group_follows_its_coordinator_in_a_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Its records are replicated with `__consumer_offsets`: when the coordinator's broker
    is killed, the broker that takes the partition over serves the group as it was."""
    with running_cluster(tmp_path_factory.mktemp("share-cluster"), 3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 3)])[TOPIC].result(30)

        def coordinator(exclude: int | None = None) -> BrokerProcess:
            via = next(i for i in cluster.brokers if i != exclude)

            def found() -> int | None:
                answer = ask(cluster.brokers[via], find_coordinator_request("roaming"))
                ok = answer.error_code == ErrorCode.NONE and answer.node_id != exclude
                return answer.node_id if ok else None

            node_id = wait_until(found)
            return cluster.brokers[node_id]

        first = coordinator()
        joined = wait_until(lambda: _joined(first))
        node_id = next(i for i, b in cluster.brokers.items() if b is first)
        cluster.kill(node_id)
        second = coordinator(exclude=node_id)

        def described_there() -> Any:
            (g,) = describe(second, "roaming")
            return g if g.error_code == ErrorCode.NONE else None

        g = wait_until(described_there)
        assert [m.member_id for m in g.members] == ["roamer"]
        assert g.group_epoch == joined.member_epoch
        again = heartbeat(second, "roaming", "roamer", joined.member_epoch)
        assert (again.error_code, again.member_epoch) == (ErrorCode.NONE, joined.member_epoch)


def _joined(broker: BrokerProcess) -> Any:
    answer = heartbeat(broker, "roaming", "roamer", 0)
    return answer if answer.error_code == ErrorCode.NONE else None


def wait_until(condition: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
    return value
