"""Consumer groups (KIP-848) in one shard with a fake clock: joining, reconciliation, timeouts.

Reconciliation rules checked here, each against the exact epochs and assignments
Kafka's coordinator gives: a partition goes to a member only once no other
member owns it; a member gives up partitions before it gets new ones and stays
at its epoch meanwhile; members progress one by one, with no barrier.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from herdless.coordinator import TimerKey, TimerKind
from herdless.coordinator.consumer_group import ConsumerGroupMember, ConsumerGroupState
from herdless.coordinator.consumer_messages import ConsumerGroupHeartbeatRequest
from herdless.coordinator.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    decode_consumer_group_key,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from herdless.coordinator.reconciliation import MemberState
from herdless.coordinator.records import Record
from herdless.coordinator.topic_metadata import Partitions, TopicIdPartition, TopicMetadata
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, TOPIC_T, TOPIC_U, Context

SESSION_MS = 45_000


def parts(topic: TopicMetadata, *partitions: int) -> Partitions:
    return frozenset(TopicIdPartition(topic.topic_id, p) for p in partitions)


def kinds(records: list[Record]) -> list[str]:
    return [type(decode_consumer_group_key(r.key)).__name__ for r in records]


def member(ctx: Context, member_id: str, group_id: str = "g") -> ConsumerGroupMember:
    return ctx.shard.consumer.groups[group_id].members[member_id]


def two_members(ctx: Context) -> None:
    """m1 alone, then m2 joins and the three partitions that move reach it."""
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)
    ctx.consumer_heartbeat("g", "m1", 1)
    ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1, 2))
    ctx.consumer_heartbeat("g", "m2", 2)
    assert ctx.shard.consumer.groups["g"].state is ConsumerGroupState.STABLE


# --- joining ----------------------------------------------------------------------------


def test_the_first_member_gets_every_partition_at_epoch_one() -> None:
    ctx = Context()
    resp, result = ctx.consumer_heartbeat("g", "m1", 0)
    assert resp.error_code is ErrorCode.NONE
    assert (resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms) == ("m1", 1, 5_000)
    assert resp.assignment == parts(TOPIC_T, 0, 1, 2, 3, 4, 5)
    assert kinds(result.records) == [
        ConsumerGroupMemberMetadataKey.__name__,
        ConsumerGroupPartitionMetadataKey.__name__,
        ConsumerGroupMetadataKey.__name__,
        ConsumerGroupTargetAssignmentMemberKey.__name__,
        ConsumerGroupTargetAssignmentMetadataKey.__name__,
        ConsumerGroupCurrentMemberAssignmentKey.__name__,
    ]
    group = ctx.shard.consumer.groups["g"]
    assert (group.group_epoch, group.target_assignment_epoch) == (1, 1)
    assert group.state is ConsumerGroupState.STABLE
    assert ctx.timers[TimerKey(TimerKind.SESSION, "g", "m1")] == SESSION_MS


def test_a_heartbeat_with_nothing_new_writes_nothing_and_says_nothing_of_the_assignment() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.sleep(5_000)
    resp, result = ctx.consumer_heartbeat("g", "m1", 1)
    assert (resp.error_code, resp.member_epoch, resp.assignment) == (ErrorCode.NONE, 1, None)
    assert result.records == []
    assert ctx.timers[TimerKey(TimerKind.SESSION, "g", "m1")] == 5_000 + SESSION_MS


def test_a_full_heartbeat_gets_the_assignment_again() -> None:
    """After an error a client sends everything and must be told everything."""
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    resp, _ = ctx.consumer_heartbeat(
        "g", "m1", 1, topics=("t",), owned=parts(TOPIC_T, 0), rebalance_timeout_ms=30_000
    )
    assert resp.assignment == parts(TOPIC_T, 0, 1, 2, 3, 4, 5)


def test_version_0_members_are_given_an_id_version_1_members_bring_their_own() -> None:
    ctx = Context()
    resp, _ = ctx.consumer_heartbeat("g", "", 0, api_version=0)
    assert (resp.error_code, resp.member_id) == (ErrorCode.NONE, "uuid0")
    resp, _ = ctx.consumer_heartbeat("g", "", 0, api_version=1)
    assert resp.error_code is ErrorCode.INVALID_REQUEST
    assert resp.error_message == "MemberId can't be empty."


# --- reconciliation ---------------------------------------------------------------------


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)

    # m2's target is 3-5, still m1's: it moves to epoch 2 with nothing yet.
    resp, _ = ctx.consumer_heartbeat("g", "m2", 0)
    assert (resp.member_epoch, resp.assignment) == (2, frozenset())
    assert member(ctx, "m2").state is MemberState.UNRELEASED_PARTITIONS
    assert ctx.shard.consumer.groups["g"].state is ConsumerGroupState.RECONCILING

    # m1 is told to keep 0-2 only, and stays at epoch 1 until it has let 3-5 go.
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert (resp.member_epoch, resp.assignment) == (1, parts(TOPIC_T, 0, 1, 2))
    assert member(ctx, "m1").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.timers[TimerKey(TimerKind.REVOCATION, "g", "m1")] == 30_000

    # Meanwhile m2 asks again: 3-5 are not free, it gets nothing.
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert (resp.member_epoch, resp.assignment) == (2, None)

    # m1 still reports 3-5: nothing moves.
    resp, result = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1, 2, 3))
    assert (resp.member_epoch, result.records) == (1, [])

    # m1 has let them go: it reaches epoch 2, its revocation deadline is dropped...
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1, 2))
    assert (resp.member_epoch, resp.assignment) == (2, None)
    assert TimerKey(TimerKind.REVOCATION, "g", "m1") not in ctx.timers

    # ...and m2 gets them at its next heartbeat.
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert (resp.member_epoch, resp.assignment) == (2, parts(TOPIC_T, 3, 4, 5))
    assert member(ctx, "m2").state is MemberState.STABLE
    assert ctx.shard.consumer.groups["g"].state is ConsumerGroupState.STABLE


def test_free_partitions_go_out_at_once_without_waiting_for_anyone() -> None:
    """No barrier: a new member gets what is free while another is still revoking."""
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)  # m1 is to give 3-5 to m2, and has not yet
    resp, _ = ctx.consumer_heartbeat("g", "m3", 0, topics=("u",))
    assert (resp.member_epoch, resp.assignment) == (3, parts(TOPIC_U, 0, 1, 2))
    assert member(ctx, "m1").member_epoch == 1


def test_a_revoking_member_gets_nothing_new_until_it_has_revoked() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)
    # m1 also subscribes to u: its target gains u's partitions and loses some of t's.
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, topics=("t", "u"))
    target = ctx.shard.consumer.groups["g"].target_of("m1")
    keeps = target & parts(TOPIC_T, *range(6))
    assert target & parts(TOPIC_U, 0, 1, 2) and keeps != parts(TOPIC_T, *range(6))
    assert (resp.member_epoch, resp.assignment) == (1, keeps)
    assert member(ctx, "m1").state is MemberState.UNREVOKED_PARTITIONS
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=keeps)
    assert (resp.member_epoch, resp.assignment) == (3, target)


def test_a_member_may_have_back_a_partition_it_is_revoking() -> None:
    ctx = Context()
    two_members(ctx)
    ctx.consumer_heartbeat("g", "m3", 0)  # epoch 3: m1 and m2 each give up one
    ctx.consumer_heartbeat("g", "m1", 2)
    revoking = member(ctx, "m1").assignment.pending_revocation
    assert revoking and member(ctx, "m1").state is MemberState.UNREVOKED_PARTITIONS
    # m3 leaves before m1 revoked: the target of epoch 4 gives m1 its partitions back.
    ctx.consumer_heartbeat("g", "m3", -1)
    ctx.consumer_heartbeat("g", "m2", 2)
    assert ctx.shard.consumer.groups["g"].target_of("m1") >= revoking
    # It still has to revoke first; once it has, it is given them back at once.
    kept = member(ctx, "m1").assigned
    resp, _ = ctx.consumer_heartbeat("g", "m1", 2, owned=kept)
    assert (resp.member_epoch, resp.assignment) == (4, kept | revoking)
    assert member(ctx, "m1").state is MemberState.STABLE


def test_a_member_that_drops_a_topic_gives_up_its_partitions_at_once() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0, topics=("t", "u"))
    assert member(ctx, "m1").assigned == parts(TOPIC_T, *range(6)) | parts(TOPIC_U, 0, 1, 2)
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, topics=("t",))
    assert resp.member_epoch == 1
    assert resp.assignment == parts(TOPIC_T, *range(6))
    assert member(ctx, "m1").assignment.pending_revocation == parts(TOPIC_U, 0, 1, 2)
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, *range(6)))
    assert (resp.member_epoch, member(ctx, "m1").state) == (2, MemberState.STABLE)


def test_new_partitions_bump_the_group_epoch_and_are_assigned() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.topics = type(ctx.topics)([TopicMetadata(TOPIC_T.topic_id, "t", 8), TOPIC_U])
    resp, result = ctx.consumer_heartbeat("g", "m1", 1)
    assert ConsumerGroupPartitionMetadataKey.__name__ in kinds(result.records)
    assert (resp.member_epoch, resp.assignment) == (2, parts(TOPIC_T, *range(8)))


def test_the_assignor_members_name_computes_the_target() -> None:
    """uniform (the default) keeps m1's partitions where it can; range gives the first
    member in id order the first range, whoever had it."""
    for assignor, m0_gets in ((None, (3, 4, 5)), ("range", (0, 1, 2))):
        ctx = Context()
        fields = {} if assignor is None else {"server_assignor": assignor}
        ctx.consumer_heartbeat("g", "m1", 0, **fields)
        ctx.consumer_heartbeat("g", "m0", 0, **fields)
        assert ctx.shard.consumer.groups["g"].target_of("m0") == parts(TOPIC_T, *m0_gets)


# --- epochs ------------------------------------------------------------------------------


def test_the_previous_epoch_is_accepted_when_the_answer_to_it_was_lost() -> None:
    ctx = Context()
    two_members(ctx)  # m1 went from epoch 1 to 2
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1))
    assert (resp.error_code, resp.member_epoch) == (ErrorCode.NONE, 2)
    # ...but not if it says it owns what it was not given.
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 3))
    assert resp.error_code is ErrorCode.FENCED_MEMBER_EPOCH


def test_the_previous_epoch_is_accepted_without_owned_partitions() -> None:
    """What librdkafka sends after a heartbeat that timed out. m1 moved from epoch 2 to 3 to
    take the partitions m2 left; it learns of them from the answer to its stale heartbeat."""
    ctx = Context()
    two_members(ctx)
    ctx.consumer_heartbeat("g", "m1", 2, owned=parts(TOPIC_T, 0, 1, 2))
    ctx.consumer_heartbeat("g", "m2", -1)
    resp, _ = ctx.consumer_heartbeat("g", "m1", 2)
    assert (resp.member_epoch, resp.assignment) == (3, parts(TOPIC_T, *range(6)))  # lost
    resp, _ = ctx.consumer_heartbeat("g", "m1", 2)
    assert (resp.error_code, resp.member_epoch) == (ErrorCode.NONE, 3)
    assert resp.assignment == parts(TOPIC_T, *range(6))
    # Two epochs behind is another matter.
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert resp.error_code is ErrorCode.FENCED_MEMBER_EPOCH


def test_a_member_that_lost_the_answer_asking_it_to_revoke_is_told_again() -> None:
    """librdkafka gives up on a heartbeat after its heartbeat interval and sends the next one
    as if nothing happened, not a full request. Were the revocation not repeated, m1 would
    keep 3-5 until its rebalance timeout and m2 would wait as long."""
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, *range(6)))
    ctx.consumer_heartbeat("g", "m2", 0)
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, *range(6)))
    assert (resp.member_epoch, resp.assignment) == (1, parts(TOPIC_T, 0, 1, 2))  # lost
    # It acknowledges again what it had; then it only heartbeats.
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, *range(6)))
    assert (resp.member_epoch, resp.assignment) == (1, parts(TOPIC_T, 0, 1, 2))
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert (resp.member_epoch, resp.assignment) == (1, parts(TOPIC_T, 0, 1, 2))
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1, 2))
    assert (resp.member_epoch, resp.assignment) == (2, None)
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert resp.assignment == parts(TOPIC_T, 3, 4, 5)


def test_given_partitions_go_out_again_until_the_member_reports_owning_them() -> None:
    ctx = Context()
    two_members(ctx)  # m2's answer giving it 3-5 is taken as lost
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert (resp.member_epoch, resp.assignment) == (2, parts(TOPIC_T, 3, 4, 5))
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2, owned=parts(TOPIC_T, 3, 4, 5))
    assert resp.assignment is None
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert resp.assignment is None


def test_epochs_ahead_or_far_behind_are_fenced() -> None:
    ctx = Context()
    two_members(ctx)
    for epoch in (3, 7):
        resp, result = ctx.consumer_heartbeat("g", "m1", epoch)
        assert resp.error_code is ErrorCode.FENCED_MEMBER_EPOCH, epoch
        assert result.records == []
    ctx.consumer_heartbeat("g", "m3", 0)
    ctx.consumer_heartbeat("g", "m1", 2, owned=member(ctx, "m1").assigned)
    resp, _ = ctx.consumer_heartbeat("g", "m2", 1, owned=frozenset())
    assert resp.error_code is ErrorCode.FENCED_MEMBER_EPOCH


def test_a_fenced_member_rejoins_under_its_own_id_and_gets_its_partitions_back() -> None:
    ctx = Context()
    two_members(ctx)
    before = member(ctx, "m1").assigned
    resp, _ = ctx.consumer_heartbeat("g", "m1", 0)
    assert (resp.error_code, resp.member_epoch, resp.assignment) == (ErrorCode.NONE, 2, before)


def test_a_static_member_rejoins_under_its_own_id_too() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "a1", 0, instance_id="a")
    resp, result = ctx.consumer_heartbeat("g", "a1", 0, instance_id="a")
    assert (resp.error_code, resp.member_epoch) == (ErrorCode.NONE, 1)
    assert resp.assignment == parts(TOPIC_T, *range(6)) and result.records == []


def test_a_member_in_a_state_from_a_newer_kafka_starts_again_from_nothing() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    value = replace(member(ctx, "m1").assignment_value(), state=42)
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m1")
    ctx.shard.replay(encode_consumer_group_key(key), encode_consumer_group_value(value))
    assert member(ctx, "m1").state is MemberState.UNKNOWN
    resp, result = ctx.consumer_heartbeat("g", "m1", 1)
    assert (resp.error_code, result.records) == (ErrorCode.FENCED_MEMBER_EPOCH, [])
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=frozenset())
    assert (resp.error_code, resp.member_epoch) == (ErrorCode.NONE, 1)
    assert member(ctx, "m1").state is MemberState.STABLE


# --- timeouts ------------------------------------------------------------------------------


def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    ctx = Context()
    two_members(ctx)
    ctx.sleep(SESSION_MS - 1_000)
    ctx.consumer_heartbeat("g", "m1", 2)
    ctx.sleep(999)
    assert "m2" in ctx.shard.consumer.groups["g"].members
    result = ctx.sleep(1)
    assert "m2" not in ctx.shard.consumer.groups["g"].members
    assert ConsumerGroupMetadataKey.__name__ in kinds(result.records)
    group = ctx.shard.consumer.groups["g"]
    # The target follows at once (no assignment interval here): m1 has the partitions to
    # take at its next heartbeat.
    assert (group.group_epoch, group.target_assignment_epoch) == (3, 3)
    assert group.state is ConsumerGroupState.RECONCILING
    resp, _ = ctx.consumer_heartbeat("g", "m1", 2)
    assert (resp.member_epoch, resp.assignment) == (3, parts(TOPIC_T, *range(6)))
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert resp.error_code is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0, rebalance_timeout_ms=10_000)
    ctx.consumer_heartbeat("g", "m2", 0)
    ctx.consumer_heartbeat("g", "m1", 1)  # told to revoke 3-5
    for _ in range(3):
        ctx.sleep(3_000)
        ctx.consumer_heartbeat("g", "m1", 1)  # alive, but keeps them
        ctx.consumer_heartbeat("g", "m2", 2)
    ctx.sleep(1_000)
    assert "m1" not in ctx.shard.consumer.groups["g"].members
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert resp.assignment == parts(TOPIC_T, *range(6))


# --- leaving ---------------------------------------------------------------------------------


def test_a_leaving_member_frees_its_partitions_for_the_others() -> None:
    ctx = Context()
    two_members(ctx)
    resp, _ = ctx.consumer_heartbeat("g", "m2", -1)
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (ErrorCode.NONE, "m2", -1)
    assert TimerKey(TimerKind.SESSION, "g", "m2") not in ctx.timers
    resp, _ = ctx.consumer_heartbeat("g", "m1", 2)
    assert (resp.member_epoch, resp.assignment) == (3, parts(TOPIC_T, *range(6)))
    ctx.consumer_heartbeat("g", "m1", -1)
    group = ctx.shard.consumer.groups["g"]
    assert group.state is ConsumerGroupState.EMPTY and group.group_epoch == 4


def test_a_static_member_away_keeps_its_place_and_comes_back_under_a_new_id() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "a1", 0, instance_id="a")
    ctx.consumer_heartbeat("g", "b1", 0, instance_id="b")
    ctx.consumer_heartbeat("g", "a1", 1, instance_id="a")
    ctx.consumer_heartbeat("g", "a1", 1, instance_id="a", owned=parts(TOPIC_T, 0, 1, 2))
    ctx.consumer_heartbeat("g", "b1", 2, instance_id="b")
    resp, _ = ctx.consumer_heartbeat("g", "b1", -2, instance_id="b")
    assert (resp.error_code, resp.member_epoch) == (ErrorCode.NONE, -2)
    group = ctx.shard.consumer.groups["g"]
    assert group.group_epoch == 2  # no rebalance for a static member's short absence
    assert member(ctx, "b1").assigned == parts(TOPIC_T, 3, 4, 5)

    # Its partitions stay its own meanwhile: the other member is not given them.
    resp, _ = ctx.consumer_heartbeat("g", "a1", 2, instance_id="a")
    assert resp.assignment is None and member(ctx, "a1").assigned == parts(TOPIC_T, 0, 1, 2)

    resp, _ = ctx.consumer_heartbeat("g", "b2", 0, instance_id="b")
    assert (resp.error_code, resp.member_epoch) == (ErrorCode.NONE, 2)
    assert resp.assignment == parts(TOPIC_T, 3, 4, 5)
    assert "b1" not in group.members and group.static_members["b"] == "b2"
    assert group.group_epoch == 2
    resp, _ = ctx.consumer_heartbeat("g", "b1", 2, instance_id="b")
    assert resp.error_code is ErrorCode.FENCED_INSTANCE_ID


def test_an_instance_id_in_use_is_not_released_to_another_member() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "a1", 0, instance_id="a")
    resp, result = ctx.consumer_heartbeat("g", "a2", 0, instance_id="a")
    assert resp.error_code is ErrorCode.UNRELEASED_INSTANCE_ID and result.records == []
    resp, _ = ctx.consumer_heartbeat("g", "a2", 1, instance_id="a")
    assert resp.error_code is ErrorCode.FENCED_INSTANCE_ID
    resp, _ = ctx.consumer_heartbeat("g", "a1", 1, instance_id="x")
    assert resp.error_code is ErrorCode.UNKNOWN_MEMBER_ID
    resp, _ = ctx.consumer_heartbeat("g", "a2", -2, instance_id="a")
    assert resp.error_code is ErrorCode.FENCED_INSTANCE_ID


def test_a_static_member_that_never_returns_is_removed_after_its_session() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "a1", 0, instance_id="a")
    ctx.consumer_heartbeat("g", "a1", -2, instance_id="a")
    ctx.sleep(SESSION_MS)
    assert not ctx.shard.consumer.groups["g"].members


# --- refusals ---------------------------------------------------------------------------------


JOIN_WITHOUT_TIMEOUT = "RebalanceTimeoutMs must be provided in first request."
JOIN_OWNING = "TopicPartitions must be empty when (re-)joining."


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"group_id": " "}, "GroupId can't be empty."),
        ({"instance_id": ""}, "InstanceId can't be empty."),
        ({"rack_id": " "}, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1, "epoch": 0}, JOIN_WITHOUT_TIMEOUT),
        ({"owned": parts(TOPIC_T, 0), "epoch": 0}, JOIN_OWNING),
        ({"epoch": -3}, "MemberEpoch is invalid."),
        ({"epoch": -2}, "InstanceId can't be null."),
    ],
)
def test_invalid_requests_are_refused_and_change_nothing(
    fields: dict[str, object], message: str
) -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    group_id = fields.pop("group_id", "g")
    epoch = fields.pop("epoch", 1)
    before = len(ctx.log)
    resp, _ = ctx.consumer_heartbeat(group_id, "m1", epoch, **fields)  # type: ignore[arg-type]
    assert (resp.error_code, resp.error_message) == (ErrorCode.INVALID_REQUEST, message)
    assert len(ctx.log) == before


def test_a_join_must_say_what_it_subscribes_to() -> None:
    ctx = Context()
    req = ConsumerGroupHeartbeatRequest(
        "g", "m1", 0, rebalance_timeout_ms=1, owned_partitions=frozenset()
    )
    token, result = ctx.send(lambda s, t, now: s.consumer_group_heartbeat(req, ctx.topics, t, now))
    assert result.reply_to(token).error_code is ErrorCode.INVALID_REQUEST
    assert result.reply_to(token).error_message == (
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
    )


def test_an_assignor_the_broker_does_not_run_is_refused() -> None:
    ctx = Context()
    resp, _ = ctx.consumer_heartbeat("g", "m1", 0, server_assignor="sticky")
    assert resp.error_code is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert resp.error_message == (
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )


def test_a_full_group_takes_no_new_member() -> None:
    ctx = Context(replace(TEST_CONFIG, consumer_max_group_size=2))
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)
    resp, result = ctx.consumer_heartbeat("g", "m3", 0)
    assert resp.error_code is ErrorCode.GROUP_MAX_SIZE_REACHED and result.records == []
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert resp.error_code is ErrorCode.NONE


def test_unknown_members_and_groups() -> None:
    ctx = Context()
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert resp.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    resp, _ = ctx.consumer_heartbeat("g", "m1", -1)
    assert resp.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    ctx.consumer_heartbeat("g", "m1", 0)
    resp, _ = ctx.consumer_heartbeat("g", "zz", 1)
    assert resp.error_code is ErrorCode.UNKNOWN_MEMBER_ID
    resp, _ = ctx.consumer_heartbeat("g", "zz", -1)
    assert resp.error_code is ErrorCode.UNKNOWN_MEMBER_ID


# --- loading ----------------------------------------------------------------------------------


def test_a_reloaded_shard_has_the_same_groups_and_restarts_their_timers() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)
    ctx.consumer_heartbeat("g", "m1", 1)  # m1 revoking
    before = ctx.shard.consumer.groups["g"]
    ctx.sleep(1_000)
    ctx.restart()
    after = ctx.shard.consumer.groups["g"]
    assert after.members == before.members
    assert after.target_assignment == before.target_assignment
    assert (after.group_epoch, after.target_assignment_epoch) == (2, 2)
    assert after.owned_partitions() == before.owned_partitions()
    assert ctx.timers[TimerKey(TimerKind.SESSION, "g", "m1")] == 1_000 + SESSION_MS
    assert ctx.timers[TimerKey(TimerKind.REVOCATION, "g", "m1")] == 1_000 + 30_000
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1, 2))
    assert resp.member_epoch == 2
