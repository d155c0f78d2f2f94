"""SyncGroup, Heartbeat, LeaveGroup and session expiry."""

from __future__ import annotations

from herdless.coordinator import GroupState, TimerKey, TimerKind
from herdless.coordinator.messages import (
    JoinGroupResponse,
    LeaveGroupResponse,
    LeavingMember,
    LeftMember,
    SyncGroupResponse,
)
from herdless.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    group_metadata_record,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import (
    WALL_START_MS,
    Context,
    decode_assignment,
    range_assign,
    range_protocols,
    subscription,
)


def _completing(ctx: Context) -> tuple[str, str, int, int]:
    t_a, a = ctx.join_new_member("g")
    t_b, b = ctx.join_new_member("g")
    ctx.sleep(0)
    return a, b, t_a, t_b


def test_leader_sync_delivers_assignment_to_parked_followers_and_writes_metadata() -> None:
    ctx = Context(now_ms=500, wall_ms=WALL_START_MS)
    a, b, _, _ = _completing(ctx)
    follower_token, result = ctx.sync("g", b, 1)
    assert result.replies == [] and result.records == []
    assignment = range_assign([a, b], "t", 4)
    leader_token, result = ctx.sync("g", a, 1, assignment)
    ok = dict(protocol_type="consumer", protocol_name="range")
    assert result.reply_to(leader_token) == SyncGroupResponse(ErrorCode.NONE, assignment[a], **ok)
    assert result.reply_to(follower_token) == SyncGroupResponse(ErrorCode.NONE, assignment[b], **ok)
    members = tuple(
        MemberMetadata(
            m, None, "client", "/127.0.0.1", 30_000, 10_000, subscription("t"), assignment[m]
        )
        for m in (a, b)
    )
    assert result.records == [
        group_metadata_record(
            GroupMetadataKey("g"),
            GroupMetadataValue("consumer", 1, "range", a, WALL_START_MS, members),
        )
    ]
    assert ctx.shard.groups["g"].state is GroupState.STABLE
    # Members synced: no sync deadline any more; sessions run again.
    assert TimerKey(TimerKind.SYNC, "g") not in ctx.timers
    assert ctx.timers[TimerKey(TimerKind.HEARTBEAT, "g", b)] == 500 + 10_000


def test_sync_in_stable_returns_current_assignment() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    token, result = ctx.sync("g", b, 1)
    assert decode_assignment(result.reply_to(token).assignment) == [("t", 2), ("t", 3)]


def test_missing_assignments_are_empty() -> None:
    ctx = Context()
    a, b, _, _ = _completing(ctx)
    ctx.sync("g", a, 1, {a: b"x"})
    token, result = ctx.sync("g", b, 1)
    assert result.reply_to(token).assignment == b""


def test_sync_errors() -> None:
    ctx = Context()
    assert _sync_error(ctx, "", "m", 1) is ErrorCode.INVALID_GROUP_ID
    assert _sync_error(ctx, "nope", "m", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    a, b, _, _ = _completing(ctx)
    assert _sync_error(ctx, "g", "stranger", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert _sync_error(ctx, "g", a, 0) is ErrorCode.ILLEGAL_GENERATION
    token, result = ctx.sync("g", a, 1, protocol_name="roundrobin")
    assert result.reply_to(token).error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ctx.join("g", a, protocols=range_protocols("t", "u"))  # new metadata: rebalance again
    assert ctx.shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert _sync_error(ctx, "g", b, 1) is ErrorCode.REBALANCE_IN_PROGRESS


def _sync_error(ctx: Context, group: str, member: str, generation: int) -> ErrorCode:
    token, result = ctx.sync(group, member, generation)
    return result.reply_to(token).error_code


def test_members_that_never_sync_are_removed_after_rebalance_timeout() -> None:
    ctx = Context()
    a, b, _, _ = _completing(ctx)
    ctx.sync("g", a, 1, range_assign([a, b], "t", 4))
    for _ in range(3):  # b heartbeats but never sends SyncGroup
        ctx.sleep(9_000)
        assert ctx.heartbeat("g", a, 1) is ErrorCode.NONE
        assert ctx.heartbeat("g", b, 1) is ErrorCode.NONE
    assert b in ctx.shard.groups["g"].members
    ctx.sleep(3_000)  # rebalance timeout 30 s after the join phase ended
    group = ctx.shard.groups["g"]
    assert b not in group.members
    assert group.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
    assert ctx.describe("g").rebalance_history[-1].cause == "members did not sync"


def test_heartbeat_answers_by_state() -> None:
    ctx = Context()
    assert ctx.heartbeat("", "m", 1) is ErrorCode.INVALID_GROUP_ID
    assert ctx.heartbeat("nope", "m", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    a, b, _, _ = _completing(ctx)
    assert ctx.heartbeat("g", a, 1) is ErrorCode.NONE  # CompletingRebalance
    assert ctx.heartbeat("g", a, 2) is ErrorCode.ILLEGAL_GENERATION
    assert ctx.heartbeat("g", "x", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    ctx.sync("g", a, 1, range_assign([a, b], "t", 4))
    assert ctx.heartbeat("g", b, 1) is ErrorCode.NONE  # Stable
    ctx.join("g", a)
    assert ctx.heartbeat("g", b, 1) is ErrorCode.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_member_and_rebalances() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    ctx.sleep(9_000)
    assert ctx.heartbeat("g", a, 1) is ErrorCode.NONE
    ctx.sleep(1_000)
    assert ctx.heartbeat("g", a, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    group = ctx.shard.groups["g"]
    assert b not in group.members  # expired at 10 s
    assert group.state is GroupState.PREPARING_REBALANCE
    token, result = ctx.join("g", a)
    assert result.reply_to(token).generation_id == 2
    assert ctx.describe("g").rebalance_history[-1].to_generation is None  # still rebalancing
    ctx.sync("g", a, 2, {a: b""})
    first, entry = ctx.describe("g").rebalance_history
    assert first.cause == "member joined" and (first.from_generation, first.to_generation) == (0, 1)
    assert entry.cause == "session expired" and entry.detail == b
    assert entry.members_before == (a, b) and entry.members_after == (a,)
    assert (entry.from_generation, entry.to_generation) == (1, 2)
    # Times operators read: the wall clock's.
    assert entry.started_ms == WALL_START_MS + 10_000 and entry.ended_ms == ctx.wall


def test_each_heartbeat_moves_its_members_expiry_and_only_its() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    # a heartbeats every 3 s; b 0.7 s after each of a's first four, then stops.
    for t in range(3_000, 21_001, 3_000):
        ctx.sleep(t - ctx.now)
        assert ctx.heartbeat("g", a, 1) is ErrorCode.NONE
        if t <= 12_000:
            ctx.sleep(700)
            assert ctx.heartbeat("g", b, 1) is ErrorCode.NONE
    group = ctx.shard.groups["g"]
    ctx.sleep(12_700 + 9_999 - ctx.now)
    assert b in group.members and group.state is GroupState.STABLE
    ctx.sleep(1)  # one session timeout after b's last heartbeat, not before
    assert b not in group.members and a in group.members
    assert group.state is GroupState.PREPARING_REBALANCE


def test_last_member_expiring_empties_the_group_and_persists_it() -> None:
    ctx = Context()
    (a,) = ctx.stable_group("g", 1)
    result = ctx.sleep(10_000)
    group = ctx.shard.groups["g"]
    assert group.state is GroupState.EMPTY and group.generation == 2
    assert result.records == [
        group_metadata_record(
            GroupMetadataKey("g"),
            GroupMetadataValue("consumer", 2, None, None, WALL_START_MS + 10_000),
        )
    ]
    assert ctx.heartbeat("g", a, 2) is ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_several_members_at_once() -> None:
    ctx = Context()
    a, b, c = ctx.stable_group("g", 3, static=True)
    response = ctx.leave(
        "g",
        LeavingMember(b, "i1"),
        LeavingMember("", "i2"),  # administrative removal by instance id
        LeavingMember("", "i9"),
        LeavingMember("x", None),
        LeavingMember("wrong-id", "i0"),
    )
    assert response == LeaveGroupResponse(
        ErrorCode.NONE,
        (
            LeftMember(b, "i1", ErrorCode.NONE),
            LeftMember("", "i2", ErrorCode.NONE),
            LeftMember("", "i9", ErrorCode.UNKNOWN_MEMBER_ID),
            LeftMember("x", None, ErrorCode.UNKNOWN_MEMBER_ID),
            LeftMember("wrong-id", "i0", ErrorCode.FENCED_INSTANCE_ID),
        ),
    )
    group = ctx.shard.groups["g"]
    assert list(group.members) == [a]
    assert TimerKey(TimerKind.HEARTBEAT, "g", b) not in ctx.timers
    assert group.state is GroupState.PREPARING_REBALANCE


def test_leave_unknown_group_and_pending_member() -> None:
    ctx = Context()
    assert ctx.leave("nope", LeavingMember("m")) == LeaveGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)
    token, result = ctx.join("g")
    pending = result.reply_to(token).member_id
    response = ctx.leave("g", LeavingMember(pending))
    assert response.members == (LeftMember(pending, None, ErrorCode.NONE),)
    assert not ctx.shard.groups["g"].pending_join_members


def test_last_member_leaving_writes_empty_group() -> None:
    ctx = Context(now_ms=7, wall_ms=70)
    (a,) = ctx.stable_group("g", 1)
    token = ctx.token()
    from herdless.coordinator.messages import LeaveGroupRequest

    leave = LeaveGroupRequest("g", (LeavingMember(a),))
    result = ctx.apply(ctx.shard.leave_group(leave, token, ctx.clock()))
    assert result.reply_to(token).members == (LeftMember(a, None, ErrorCode.NONE),)
    assert result.records == [
        group_metadata_record(
            GroupMetadataKey("g"), GroupMetadataValue("consumer", 2, None, None, 70)
        )
    ]
    assert ctx.shard.groups["g"].state is GroupState.EMPTY


def test_parked_join_of_leaving_member_gets_unknown_member_id() -> None:
    ctx = Context()
    a, b, c = ctx.stable_group("g", 3)
    t_a, _ = ctx.join("g", a)
    response = ctx.leave("g", LeavingMember(a))
    assert response.members[0].error_code is ErrorCode.NONE
    assert ctx.replies[t_a] == JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)


def test_completed_rebalances_are_reported_once_each() -> None:
    ctx = Context()
    members = ctx.stable_group("g", 2)
    assert [(g, e.cause, e.to_generation) for g, e in ctx.rebalances] == [("g", "member joined", 1)]
    assert ctx.rebalances[0][1].members_after == tuple(members)
    ctx.leave("g", LeavingMember(members[1]))
    assert len(ctx.rebalances) == 1  # the rebalance the leave started is still open
    # The remaining member rejoins and syncs: the rebalance ends and is reported.
    token, result = ctx.join("g", member_id=members[0])
    response = result.reply_to(token)
    ctx.sync("g", members[0], response.generation_id, {members[0]: b""})
    assert [(e.cause, e.from_generation, e.to_generation) for _, e in ctx.rebalances[1:]] == [
        ("member left", 1, 2)
    ]
    assert ctx.describe("g").rebalance_history[-1] == ctx.rebalances[-1][1]


def test_a_stall_of_the_broker_is_not_counted_against_sessions() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    session = ctx.shard.groups["g"].members[a].session_timeout_ms
    ctx.sleep(session - 100)
    # The broker could not run for two sessions: nobody could be heard.
    ctx.apply(ctx.shard.postpone_timers(2 * session))
    ctx.sleep(session)
    assert set(ctx.shard.groups["g"].members) == {a, b}
    # A member that really died is expired once its session runs out, stall not counted.
    ctx.sleep(2 * session)
    assert a not in ctx.shard.groups["g"].members
