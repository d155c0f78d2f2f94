"""ConsumerGroupHeartbeat, ConsumerGroupDescribe and the APIs beside them, on the wire.

What a KIP-848 client sends, sent raw to a broker process: joining with an id
of its own (v1) or given one (v0), partitions named by the topic ids Metadata
gives, commits and fetches checked against the member epoch, the group in
ListGroups and DescribeGroups as Kafka shows it, and all of it loaded back from
`__consumer_offsets` when the broker restarts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from herdless.protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess
from tests.support.wire import Wire

TOPIC = "wire848"
GROUP = "wire848-group"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data").start()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    yield process
    process.kill()


def heartbeat(wire: Wire, member_id: str, epoch: int, version: int = 1, **fields: Any) -> Any:
    Request = ConsumerGroupHeartbeatRequest
    request = Request[version](
        group_id=GROUP,
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", 60_000 if epoch == 0 else -1),
        subscribed_topic_names=fields.pop("topics", [TOPIC] if epoch == 0 else None),
        topic_partitions=fields.pop("owned", [] if epoch == 0 else None),
        **fields,
    )
    return wire.call(request, ConsumerGroupHeartbeatResponse)


def assigned(response: Any) -> dict[uuid.UUID, list[int]]:
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


def describe(wire: Wire, version: int = 1) -> Any:
    request = ConsumerGroupDescribeRequest[version](
        group_ids=[GROUP, "nobody"], include_authorized_operations=False
    )
    return wire.call(request, ConsumerGroupDescribeResponse).groups


def commit(wire: Wire, member_id: str, epoch: int, offset: int) -> ErrorCode:
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest[9](
        group_id=GROUP,
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        group_instance_id=None,
        topics=[
            Topic(
                name=TOPIC,
                partitions=[
                    Topic.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    response = wire.call(request, OffsetCommitResponse)
    return ErrorCode(response.topics[0].partitions[0].error_code)


def fetch(wire: Wire, member_id: str | None, epoch: int) -> Any:
    Group = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest[9](
        groups=[
            Group(
                group_id=GROUP,
                member_id=member_id,
                member_epoch=epoch,
                topics=[Group.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])],
            )
        ],
        require_stable=False,
    )
    return wire.call(request, OffsetFetchResponse).groups[0]


def test_a_member_joins_commits_and_is_loaded_back_after_a_restart(broker: BrokerProcess) -> None:
    wire = Wire(broker)
    metadata = wire.call(
        MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]),
        MetadataResponse,
    )
    topic_id = metadata.topics[0].topic_id

    joined = heartbeat(wire, "m1", 0)
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "m1", 1)
    assert assigned(joined) == {topic_id: [0, 1, 2, 3]}
    # The topic id is all the client gets: Metadata names the topic for it.
    by_id = wire.call(
        MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id)]
        ),
        MetadataResponse,
    )
    assert (by_id.topics[0].name, len(by_id.topics[0].partitions)) == (TOPIC, 4)
    unknown = wire.call(
        MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(topic_id=uuid.uuid4())]),
        MetadataResponse,
    )
    assert unknown.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID

    assert commit(wire, "m1", 1, 42) is ErrorCode.NONE
    assert commit(wire, "m1", 7, 43) is ErrorCode.STALE_MEMBER_EPOCH
    assert commit(wire, "m9", 1, 43) is ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch(wire, "m1", 1).topics[0].partitions[0].committed_offset == 42
    assert fetch(wire, None, -1).topics[0].partitions[0].committed_offset == 42
    assert fetch(wire, "m1", 3).error_code == ErrorCode.STALE_MEMBER_EPOCH

    group, nobody = describe(wire)
    assert (group.error_code, group.group_state, group.group_epoch) == (0, "Stable", 1)
    assert group.assignor_name == "uniform"
    (member,) = group.members
    assert (member.member_id, member.member_epoch, member.member_type) == ("m1", 1, 1)
    assert member.subscribed_topic_names == [TOPIC]
    (partitions,) = member.assignment.topic_partitions
    assert (partitions.topic_name, sorted(partitions.partitions)) == (TOPIC, [0, 1, 2, 3])
    assert nobody.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert describe(wire, version=0)[0].members[0].member_id == "m1"

    listed = wire.call(
        ListGroupsRequest[5](states_filter=[], types_filter=["consumer"]), ListGroupsResponse
    )
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
        (GROUP, "consumer", "consumer")
    ]
    classic = wire.call(DescribeGroupsRequest[5](groups=[GROUP]), DescribeGroupsResponse)
    assert classic.groups[0].group_state == "Dead"  # not a classic group
    wire.close()

    broker.restart()
    wire = Wire(broker)
    assert describe(wire)[0] == group
    # The member carries on at its epoch: nothing was lost, nothing moves. A loaded
    # coordinator cannot know which answers of the last one arrived: it repeats the
    # member's assignment until the member says it owns exactly that.
    again = heartbeat(wire, "m1", 1)
    assert (again.error_code, again.member_epoch) == (0, 1)
    assert assigned(again) == {topic_id: [0, 1, 2, 3]}
    Owned = ConsumerGroupHeartbeatRequest[1].TopicPartitions
    acked = heartbeat(wire, "m1", 1, owned=[Owned(topic_id=topic_id, partitions=[0, 1, 2, 3])])
    assert (acked.error_code, acked.member_epoch, acked.assignment) == (0, 1, None)
    assert heartbeat(wire, "m1", 1).assignment is None
    assert fetch(wire, "m1", 1).topics[0].partitions[0].committed_offset == 42
    left = heartbeat(wire, "m1", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    assert describe(wire)[0].group_state == "Empty"
    wire.close()


def test_version_0_members_are_given_their_id(broker: BrokerProcess) -> None:
    wire = Wire(broker)
    refused = heartbeat(wire, "", 0, version=1)
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert refused.error_message == "MemberId can't be empty."
    joined = heartbeat(wire, "", 0, version=0)
    assert joined.error_code == 0 and len(joined.member_id) > 0
    bad = heartbeat(wire, joined.member_id, 1, version=0, server_assignor="sticky")
    assert bad.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    wire.close()


def test_describe_shows_a_member_revoking_and_the_one_waiting_for_its_partitions(
    broker: BrokerProcess,
) -> None:
    """herdless's two tagged fields of ConsumerGroupDescribe (MemberState,
    PartitionsPendingRevocation) read from a live broker while a revocation is under way."""
    wire = Wire(broker)
    Owned = ConsumerGroupHeartbeatRequest[1].TopicPartitions
    joined = heartbeat(wire, "m1", 0)
    ((topic_id, everything),) = assigned(joined).items()
    assert everything == [0, 1, 2, 3]
    heartbeat(wire, "m1", 1, owned=[Owned(topic_id=topic_id, partitions=everything)])
    second = heartbeat(wire, "m2", 0)  # at the last target's epoch, with nothing yet

    # m1 is told to give up half (once the group's next target is computed: within the
    # broker's assignment interval); it does not say it did yet.
    deadline = time.monotonic() + 10
    kept: list[int] = everything
    while kept == everything:
        assert time.monotonic() < deadline, "m1 was never asked to revoke"
        time.sleep(0.1)
        answer = heartbeat(wire, "m1", 1)
        assert answer.error_code == 0
        if answer.assignment is not None:
            kept = assigned(answer)[topic_id]
    assert len(kept) == 2
    waits = heartbeat(wire, "m2", second.member_epoch)  # for what m1 still holds
    assert waits.error_code == 0 and waits.member_epoch > second.member_epoch

    group, _ = describe(wire)
    by_id = {m.member_id: m for m in group.members}
    revoking, waiting = by_id["m1"], by_id["m2"]
    assert revoking.member_state == 1  # unrevoked partitions
    (pending,) = revoking.partitions_pending_revocation
    assert (pending.topic_id, sorted(pending.partitions)) == (
        topic_id,
        sorted(set(everything) - set(kept)),
    )
    assert waiting.member_state == 2  # unreleased partitions
    assert not waiting.partitions_pending_revocation
    assert group.group_state == "Reconciling"

    # m1 says it let them go: both reach the target.
    released = heartbeat(wire, "m1", 1, owned=[Owned(topic_id=topic_id, partitions=kept)])
    assert released.error_code == 0 and released.member_epoch > 1
    took = heartbeat(wire, "m2", waits.member_epoch)
    assert sorted(assigned(took)[topic_id]) == sorted(set(everything) - set(kept))
    group, _ = describe(wire)
    assert [m.member_state for m in group.members] == [0, 0]
    assert not any(m.partitions_pending_revocation for m in group.members)
    assert group.group_state == "Stable"
    wire.close()
