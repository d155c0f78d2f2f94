"""Loading a shard by replaying its log gives back what the live shard had."""

from __future__ import annotations

from herdless.coordinator import GroupState, TimerKey, TimerKind
from herdless.coordinator.messages import JoinGroupResponse, SyncGroupResponse
from herdless.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    group_metadata_record,
    offset_commit_record,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import Context, range_assign, subscription
from tests.coordinator.snapshot import quiescent, snapshot


def test_restart_restores_stable_group_and_offsets_and_sessions() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    ctx.commit("g", {("t", 0): 5}, generation=1, member_id=a)
    ctx.commit("s", {("x", 1): 9})
    before = snapshot(ctx.shard)
    assert quiescent(ctx.shard)
    ctx.restart()
    assert snapshot(ctx.shard) == before
    # Loaded members get a fresh session; followers can sync and heartbeat.
    assert ctx.timers[TimerKey(TimerKind.HEARTBEAT, "g", a)] == ctx.now + 10_000
    assert ctx.heartbeat("g", b, 1) is ErrorCode.NONE
    token, result = ctx.sync("g", b, 1)
    assert result.reply_to(token).assignment == range_assign([a, b], "t", 4)[b]
    # Members that do not come back expire as usual.
    ctx.sleep(5_000)
    ctx.heartbeat("g", b, 1)
    ctx.sleep(5_000)
    assert a not in ctx.shard.groups["g"].members
    assert ctx.shard.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_restart_mid_rebalance_falls_back_to_last_persisted_generation() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    t_a, _ = ctx.join("g", a)
    t_b, _ = ctx.join("g", b)  # generation 2 in CompletingRebalance, not persisted
    sync_token, _ = ctx.sync("g", b, 2)
    ctx.restart()
    assert ctx.replies[sync_token] == SyncGroupResponse(ErrorCode.NOT_COORDINATOR)
    group = ctx.shard.groups["g"]
    assert (group.state, group.generation) == (GroupState.STABLE, 1)


def test_unload_answers_parked_joins() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    t_a, _ = ctx.join("g", a)
    ctx.restart()
    assert ctx.replies[t_a] == JoinGroupResponse(ErrorCode.NOT_COORDINATOR, member_id=a)


def test_replay_handles_tombstones_old_versions_and_foreign_records() -> None:
    ctx = Context()
    shard = ctx.shard
    member = MemberMetadata("m", None, "c", "h", -1, 7000, subscription("t"), b"as")
    v0 = encode_group_metadata_value(
        GroupMetadataValue("consumer", 4, "range", "m", -1, (member,)), 0
    )
    shard.replay(encode_key(GroupMetadataKey("old")), v0)
    group = shard.groups["old"]
    # v0 predates rebalance timeouts: the session timeout stands in, as in Kafka.
    assert group.members["m"].rebalance_timeout_ms == 7000
    assert group.current_state_timestamp is None and group.state is GroupState.STABLE
    assert group.subscribed_topics == frozenset({"t"})

    for record in (
        offset_commit_record(OffsetCommitKey("x", "t", 0), OffsetCommitValue(1, "", 5)),
        offset_commit_record(OffsetCommitKey("x", "t", 0), OffsetCommitValue(2, "", 6)),
    ):
        shard.replay(record.key, record.value)
    assert shard.offsets.get("x", "t", 0).offset == 2  # the later record wins
    tomb = offset_commit_record(OffsetCommitKey("x", "t", 0), None)
    shard.replay(tomb.key, tomb.value)
    assert shard.offsets.get("x", "t", 0) is None
    gone = group_metadata_record(GroupMetadataKey("old"), None)
    shard.replay(gone.key, gone.value)
    assert "old" not in shard.groups
    shard.replay(gone.key, gone.value)  # tombstone of an unknown group: nothing to do
    shard.replay(b"\x00\x11\x00\x01g", b"\x00\x00")  # a streams group record: skipped


def test_group_created_at_time_zero_reloads_with_its_timestamp() -> None:
    ctx = Context(wall_ms=0)
    token, result = ctx.join("g")
    assert result.reply_to(token).error_code is ErrorCode.MEMBER_ID_REQUIRED
    ctx.restart()
    assert ctx.shard.groups["g"].current_state_timestamp == 0
