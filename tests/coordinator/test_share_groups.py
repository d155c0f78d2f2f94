"""Share groups (KIP-932) in one shard with a fake clock: joining, sharing, leaving, expiry.

What members rely on, against the epochs and assignments Kafka's coordinator gives: a
member is given its whole target at once (nothing to revoke), every partition of a
subscribed topic has a member, a topic with more members than partitions shares each
partition, a member that stops heartbeating goes after its session, and replaying
the log gives the same groups as the live shard holds.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest

from herdless.coordinator import TimerKey, TimerKind
from herdless.coordinator.messages import ListedGroup
from herdless.coordinator.records import Record
from herdless.coordinator.share_group import ShareGroup, ShareGroupState
from herdless.coordinator.share_messages import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from herdless.coordinator.share_records import (
    SKIPPED,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
    decode_share_group_key,
    decode_share_group_value,
    encode_share_group_value,
)
from herdless.coordinator.topic_metadata import (
    Partitions,
    TopicIdPartition,
    TopicMetadata,
    TopicsImage,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, TOPIC_T, TOPIC_U, Context

SESSION_MS = 45_000


def parts(topic: TopicMetadata, *partitions: int) -> Partitions:
    return frozenset(TopicIdPartition(topic.topic_id, p) for p in partitions)


def beat(
    ctx: Context,
    member_id: str,
    epoch: int,
    group_id: str = "g",
    topics: tuple[str, ...] | None = None,
    **fields: Any,
) -> tuple[ShareGroupHeartbeatResponse, list[Record]]:
    """A ShareGroupHeartbeat; joining (epoch 0) subscribes to topic t unless told."""
    if epoch == 0 and topics is None:
        topics = ("t",)
    req = ShareGroupHeartbeatRequest(
        group_id,
        member_id,
        epoch,
        subscribed_topic_names=topics,
        client_id="client",
        client_host="/127.0.0.1",
        **fields,
    )
    image = ctx.topics
    token, result = ctx.send(lambda shard, t, now: shard.share_group_heartbeat(req, image, t, now))
    return result.reply_to(token), result.records


def kinds(records: list[Record]) -> list[str]:
    return [type(decode_share_group_key(r.key)).__name__ for r in records]


def group(ctx: Context, group_id: str = "g") -> ShareGroup:
    return ctx.shard.share.groups[group_id]


def describe(ctx: Context, *group_ids: str) -> Any:
    token = ctx.token()
    result = ctx.shard.share_group_describe(group_ids, ctx.topics, token)
    return ctx.apply(result).reply_to(token)


def state_of(shard_group: ShareGroup) -> tuple[Any, ...]:
    """All a share group is, as the log makes it (the subscription metadata is not)."""
    return (
        shard_group.group_epoch,
        shard_group.metadata_hash,
        shard_group.target_assignment_epoch,
        dict(shard_group.members),
        dict(shard_group.target_assignment),
    )


# --- joining --------------------------------------------------------------------------


def test_first_member_is_given_every_partition_at_once() -> None:
    ctx = Context()
    response, records = beat(ctx, "m1", 0)
    assert response.error_code is ErrorCode.NONE
    assert (response.member_id, response.member_epoch) == ("m1", 1)
    assert response.heartbeat_interval_ms == 5_000
    assert response.assignment == parts(TOPIC_T, *range(6))
    assert kinds(records) == [
        "ShareGroupMemberMetadataKey",
        "ShareGroupMetadataKey",
        "ShareGroupTargetAssignmentMemberKey",
        "ShareGroupTargetAssignmentMetadataKey",
        "ShareGroupCurrentMemberAssignmentKey",
    ]
    assert group(ctx).state is ShareGroupState.STABLE
    assert ctx.timers[TimerKey(TimerKind.SHARE_SESSION, "g", "m1")] == ctx.now + SESSION_MS


def test_a_second_member_splits_the_partitions_with_no_revocation() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    joined, _ = beat(ctx, "m2", 0)
    # The new member has its share in its first answer, at the new epoch, while m1 still
    # holds every partition: a partition may be fetched by several members.
    assert joined.member_epoch == 2
    assert len(joined.assignment) == 3
    response, _ = beat(ctx, "m1", 1)
    assert response.member_epoch == 2
    assert response.assignment == parts(TOPIC_T, *range(6)) - joined.assignment
    # Told once; the next heartbeat says nothing new.
    again, records = beat(ctx, "m1", 2)
    assert (again.member_epoch, again.assignment, records) == (2, None, [])


def test_more_members_than_partitions_share_every_partition() -> None:
    ctx = Context()
    members = [f"m{i}" for i in range(5)]
    for member_id in members:
        beat(ctx, member_id, 0, topics=("u",))
    epoch = group(ctx).group_epoch
    assigned = {}
    for member_id in members:
        response, _ = beat(ctx, member_id, group(ctx).members[member_id].member_epoch)
        assert response.member_epoch == epoch
        assigned[member_id] = group(ctx).members[member_id].assigned
    # Every member has a partition; each of u's three partitions goes to ceil(5/3) = 2
    # members at most, and to one at least.
    assert all(len(a) >= 1 for a in assigned.values())
    holders = {tp: sum(tp in a for a in assigned.values()) for tp in parts(TOPIC_U, 0, 1, 2)}
    assert all(1 <= count <= 2 for count in holders.values())
    assert sum(holders.values()) == 6


def test_partitions_added_to_a_subscribed_topic_are_assigned() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    ctx.topics = TopicsImage([TopicMetadata(TOPIC_T.topic_id, "t", 8), TOPIC_U])
    response, _ = beat(ctx, "m1", 1)
    assert (response.member_epoch, response.assignment) == (2, parts(TOPIC_T, *range(8)))


def test_changing_the_subscription_moves_the_member_to_the_new_topics() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    response, _ = beat(ctx, "m1", 1, topics=("u",))
    assert (response.member_epoch, response.assignment) == (2, parts(TOPIC_U, 0, 1, 2))
    assert group(ctx).members["m1"].subscribed_topic_names == {"u"}


def test_a_lost_answer_is_repeated_to_a_member_at_its_previous_epoch() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    beat(ctx, "m2", 0)
    lost, _ = beat(ctx, "m1", 1)  # the answer moving m1 to epoch 2 is lost on the way
    response, _ = beat(ctx, "m1", 1)
    assert (response.error_code, response.member_epoch) == (ErrorCode.NONE, 2)
    assert response.assignment == lost.assignment == group(ctx).target_of("m1")


# --- leaving and expiry ------------------------------------------------------------------


def test_leaving_gives_the_partitions_to_the_others() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    beat(ctx, "m2", 0)
    response, records = beat(ctx, "m2", -1)
    assert (response.error_code, response.member_epoch) == (ErrorCode.NONE, -1)
    assert kinds(records)[:3] == [
        "ShareGroupCurrentMemberAssignmentKey",
        "ShareGroupTargetAssignmentMemberKey",
        "ShareGroupMemberMetadataKey",
    ]
    assert TimerKey(TimerKind.SHARE_SESSION, "g", "m2") not in ctx.timers
    response, _ = beat(ctx, "m1", 1)
    assert (response.member_epoch, response.assignment) == (3, parts(TOPIC_T, *range(6)))


def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    beat(ctx, "m2", 0)
    beat(ctx, "m1", 1)
    ctx.sleep(SESSION_MS - 1_000)
    beat(ctx, "m1", 2)
    ctx.sleep(1_000)  # m2's session ends; m1 heartbeated a second ago
    assert set(group(ctx).members) == {"m1"}
    assert group(ctx).target_of("m1") == parts(TOPIC_T, *range(6))
    response, _ = beat(ctx, "m2", 2)
    assert response.error_code is ErrorCode.UNKNOWN_MEMBER_ID
    # It rejoins with its own id, as librdkafka does after UNKNOWN_MEMBER_ID.
    response, _ = beat(ctx, "m2", 0)
    assert response.error_code is ErrorCode.NONE and response.assignment


def test_the_last_member_leaving_empties_the_group_which_may_then_be_deleted() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    deleted, _ = ctx.delete_groups("g")
    assert deleted.results == (("g", ErrorCode.NON_EMPTY_GROUP),)
    beat(ctx, "m1", -1)
    assert group(ctx).state is ShareGroupState.EMPTY
    deleted, result = ctx.delete_groups("g")
    assert deleted.results == (("g", ErrorCode.NONE),)
    assert kinds(result.records) == [
        "ShareGroupTargetAssignmentMetadataKey",
        "ShareGroupMetadataKey",
    ]
    assert all(r.value is None for r in result.records)
    assert "g" not in ctx.shard.share.groups
    assert ctx.replayed(ctx.log).share.groups == {}


# --- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member_id", "epoch", "topics", "fields", "message"),
    [
        ("", 0, ("t",), {}, "MemberId can't be empty."),
        ("m1", 0, (), {}, "SubscribedTopicNames must be set in first request."),
        ("m1", 0, ("t",), {"rack_id": ""}, "RackId can't be empty."),
        ("m1", -2, None, {}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests_are_refused_and_write_nothing(
    member_id: str, epoch: int, topics: tuple[str, ...] | None, fields: Any, message: str
) -> None:
    ctx = Context()
    response, records = beat(ctx, member_id, epoch, topics=topics, **fields)
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST, message)
    assert records == []


def test_unknown_members_groups_and_epochs_are_refused() -> None:
    ctx = Context()
    response, _ = beat(ctx, "m1", 3)
    assert response.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    beat(ctx, "m1", 0)
    assert beat(ctx, "ghost", 1)[0].error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(ctx, "ghost", -1)[0].error_code is ErrorCode.UNKNOWN_MEMBER_ID
    fenced, records = beat(ctx, "m1", 7)
    assert (fenced.error_code, records) == (ErrorCode.FENCED_MEMBER_EPOCH, [])


def test_the_group_size_is_capped() -> None:
    ctx = Context(replace(TEST_CONFIG, share_max_group_size=2))
    beat(ctx, "m1", 0)
    beat(ctx, "m2", 0)
    response, records = beat(ctx, "m3", 0)
    assert (response.error_code, records) == (ErrorCode.GROUP_MAX_SIZE_REACHED, [])


def test_a_group_id_belongs_to_one_type_of_group() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("consumers", "c1", 0)
    response, records = beat(ctx, "m1", 0, group_id="consumers")
    assert (response.error_code, records) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    assert response.error_message == "Group consumers is not a share group."
    beat(ctx, "m1", 0)
    consumer, _ = ctx.consumer_heartbeat("g", "c2", 0)
    assert consumer.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    token, result = ctx.join("g")
    assert result.reply_to(token).error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    committed, _ = ctx.commit("g", {("t", 0): 5})
    assert {p.error_code for t in committed.topics for p in t.partitions} == {
        ErrorCode.GROUP_ID_NOT_FOUND
    }
    assert ctx.fetch("g").error_code is ErrorCode.GROUP_ID_NOT_FOUND
    assert set(ctx.shard.store.share) == {"g"} and "g" not in ctx.shard.store.classic


# --- describing and listing ---------------------------------------------------------------


def test_describe_shows_members_assignments_and_epochs() -> None:
    ctx = Context()
    beat(ctx, "m1", 0, rack_id="r1")
    beat(ctx, "m2", 0)
    beat(ctx, "m1", 1)
    described, missing, empty = describe(ctx, "g", "nobody", "")
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == (
        "Stable",
        2,
        2,
    )
    assert described.assignor_name == "simple"
    by_id = {m.member_id: m for m in described.members}
    assert by_id["m1"].rack_id == "r1" and by_id["m1"].subscribed_topic_names == ("t",)
    shares = [by_id[m].assignment for m in ("m1", "m2")]
    assert [a.topic_name for share in shares for a in share] == ["t", "t"]
    assert sorted(p for share in shares for a in share for p in a.partitions) == list(range(6))
    assert missing.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    assert empty.error_code is ErrorCode.INVALID_GROUP_ID


def test_list_groups_names_share_groups_by_type() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    ctx.consumer_heartbeat("consumers", "c1", 0)
    token = ctx.token()
    listed = ctx.apply(ctx.shard.list_groups(token, (), ("share",))).reply_to(token)
    assert listed == (ListedGroup("g", "share", "Stable", "share"),)
    token = ctx.token()
    everything = ctx.apply(ctx.shard.list_groups(token)).reply_to(token)
    assert {g.group_type for g in everything} == {"share", "consumer"}
    token = ctx.token()
    empty = ctx.apply(ctx.shard.list_groups(token, ("empty",), ("share",))).reply_to(token)
    assert empty == ()


# --- the log ------------------------------------------------------------------------------


def test_replaying_the_log_gives_the_live_groups() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    beat(ctx, "m2", 0, topics=("t", "u"))
    beat(ctx, "m3", 0, topics=("u",))
    beat(ctx, "m1", 1)
    beat(ctx, "m3", -1)
    ctx.sleep(SESSION_MS)
    beat(ctx, "m4", 0)
    beat(ctx, "x1", 0, group_id="other")
    replayed = ctx.replayed(ctx.log)
    assert set(replayed.share.groups) == set(ctx.shard.share.groups)
    for group_id, live in ctx.shard.share.groups.items():
        assert state_of(replayed.share.groups[group_id]) == state_of(live)


def test_a_restarted_coordinator_keeps_members_and_expires_the_silent_ones() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    beat(ctx, "m2", 0)
    ctx.restart()
    assert set(group(ctx).members) == {"m1", "m2"}
    # Sessions start again at loading; the topics are the same, so no new epoch.
    response, records = beat(ctx, "m1", 1)
    assert (response.member_epoch, response.assignment) == (2, group(ctx).target_of("m1"))
    assert len(response.assignment) == 3
    assert "ShareGroupMetadataKey" not in kinds(records)
    ctx.sleep(SESSION_MS)
    assert set(group(ctx).members) == set()


def test_a_member_fenced_after_loading_before_any_heartbeat_waits_for_the_topics() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    beat(ctx, "m2", 0)
    ctx.restart()
    beat(ctx, "m2", 2)
    ctx.sleep(SESSION_MS)  # both expire; m2 had heartbeated since loading, m1 had not
    assert group(ctx).members == {}
    response, _ = beat(ctx, "m1", 0)
    assert response.assignment == parts(TOPIC_T, *range(6))


def test_record_values_round_trip_and_kafka_4_0_values_load() -> None:
    value = ShareGroupMetadataValue(7, -12345)
    key = ShareGroupMetadataKey("g")
    assert decode_share_group_value(key, encode_share_group_value(value)) == value
    # Kafka 4.0 wrote the epoch alone, then empty tagged fields.
    assert decode_share_group_value(key, b"\x00\x00\x00\x00\x00\x07\x00") == (
        ShareGroupMetadataValue(7, 0)
    )
    # ShareGroupPartitionMetadata (9) and ShareGroupStatePartitionMetadata (15) load as
    # records herdless skips; other types are not share groups'.
    assert decode_share_group_key(b"\x00\x09\x00\x01g") is SKIPPED
    assert decode_share_group_key(b"\x00\x0f\x00\x01g") is SKIPPED
    assert decode_share_group_key(b"\x00\x05\x00\x01g\x00\x01m") is None
    assert {
        type(decode_share_group_key(k))
        for k in (
            b"\x00\x0a\x00\x01g\x00\x01m",
            b"\x00\x0d\x00\x01g\x00\x01m",
            b"\x00\x0e\x00\x01g\x00\x01m",
            b"\x00\x0c\x00\x01g",
        )
    } == {
        ShareGroupMemberMetadataKey,
        ShareGroupTargetAssignmentMemberKey,
        ShareGroupCurrentMemberAssignmentKey,
        ShareGroupTargetAssignmentMetadataKey,
    }


def test_an_unused_topic_id_does_not_break_describe() -> None:
    ctx = Context()
    beat(ctx, "m1", 0)
    gone = TopicMetadata(uuid.UUID(int=0x99), "gone", 2)
    ctx.topics = TopicsImage([gone, TOPIC_U])
    (described,) = describe(ctx, "g")
    assert described.members[0].assignment == ()
