"""JoinGroup: new and known members, static membership, protocols, limits, rebalance timing."""

from __future__ import annotations

from herdless.coordinator import CoordinatorConfig, GroupState, TimerKey, TimerKind
from herdless.coordinator.messages import JoinGroupMember, JoinGroupResponse, Protocol
from herdless.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    group_metadata_record,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import (
    TEST_CONFIG,
    WALL_START_MS,
    Context,
    range_protocols,
    subscription,
)


def test_new_dynamic_member_gets_member_id_required_and_the_group_is_persisted() -> None:
    ctx = Context(now_ms=1000)
    token, result = ctx.join("g", client_id="cli")
    assert result.reply_to(token) == JoinGroupResponse(
        ErrorCode.MEMBER_ID_REQUIRED, member_id="cli-uuid0"
    )
    # A new group is written at once (as Kafka does), empty, so a reload keeps it.
    assert result.records == [
        group_metadata_record(
            GroupMetadataKey("g"),
            GroupMetadataValue("", 0, None, None, current_state_timestamp=WALL_START_MS),
        )
    ]
    group = ctx.shard.groups["g"]
    assert group.state is GroupState.EMPTY and group.pending_join_members == {"cli-uuid0"}
    # The pending member has one session timeout to come back.
    assert ctx.timers[TimerKey(TimerKind.HEARTBEAT, "g", "cli-uuid0")] == 1000 + 10_000


def test_pending_member_that_never_rejoins_is_dropped() -> None:
    ctx = Context()
    token, _ = ctx.join("g")
    ctx.sleep(10_000)
    assert not ctx.shard.groups["g"].pending_join_members


def test_first_join_completes_after_initial_delay_as_leader() -> None:
    ctx = Context(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    token, member_id = ctx.join_new_member("g")
    assert ctx.replies.get(token) is None  # parked
    assert ctx.shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    result = ctx.sleep(2999)
    assert result.replies == []
    result = ctx.sleep(1)
    assert result.reply_to(token) == JoinGroupResponse(
        ErrorCode.NONE,
        member_id=member_id,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        leader=member_id,
        members=(JoinGroupMember(member_id, None, subscription("t")),),
    )
    assert result.records == []  # nothing persisted until the leader syncs
    assert ctx.shard.groups["g"].state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_extends_while_members_keep_joining_up_to_rebalance_timeout() -> None:
    ctx = Context(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    t1, _ = ctx.join_new_member("g", rebalance_ms=7000)
    ctx.sleep(2000)
    t2, _ = ctx.join_new_member("g", rebalance_ms=7000)
    ctx.sleep(1000)  # first delay over at 3000, but a member was added: extend
    assert ctx.replies.get(t1) is None
    ctx.sleep(2000)
    t3, _ = ctx.join_new_member("g", rebalance_ms=7000)
    ctx.sleep(1000)  # 6000: extended again (remaining 4000 - 3000 = 1000 left)
    assert ctx.replies.get(t1) is None
    ctx.sleep(999)
    assert ctx.replies.get(t1) is None
    ctx.sleep(1)  # 7000 = the rebalance timeout: no more extensions
    assert all(ctx.replies[t].error_code is ErrorCode.NONE for t in (t1, t2, t3))
    assert ctx.replies[t1].generation_id == 1


def test_second_generation_completes_as_soon_as_everyone_rejoined() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    t_a, _ = ctx.join("g", a)  # the leader rejoining forces a rebalance
    group = ctx.shard.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert ctx.heartbeat("g", b, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    t_b, result = ctx.join("g", b)
    assert result.reply_to(t_a).generation_id == 2
    assert result.reply_to(t_a).members != ()
    assert result.reply_to(t_b) == JoinGroupResponse(
        ErrorCode.NONE, b, 2, "consumer", "range", leader=a
    )


def test_members_that_do_not_rejoin_in_time_are_dropped() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    t_a, _ = ctx.join("g", a)
    ctx.sleep(9_999)
    assert ctx.heartbeat("g", b, 1) is ErrorCode.REBALANCE_IN_PROGRESS  # keeps b's session
    ctx.sleep(20_001)  # rebalance timeout 30 s
    response = ctx.replies[t_a]
    assert response.generation_id == 2
    assert [m.member_id for m in response.members] == [a]
    assert b not in ctx.shard.groups["g"].members


def test_new_member_join_times_out_after_five_minutes() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2, session_ms=30_000, rebalance_ms=600_000)
    token, c = ctx.join_new_member("g", session_ms=30_000, rebalance_ms=600_000)
    for _ in range(11):  # a and b heartbeat but never rejoin: join phase stays open
        ctx.sleep(25_000)
        ctx.heartbeat("g", a, 1)
        ctx.heartbeat("g", b, 1)
    ctx.sleep(25_000)  # 300 s after c joined
    assert ctx.replies[token] == JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)
    assert c not in ctx.shard.groups["g"].members


def test_stable_follower_rejoining_unchanged_gets_current_generation() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    token, result = ctx.join("g", b)
    assert result.reply_to(token) == JoinGroupResponse(
        ErrorCode.NONE, b, 1, "consumer", "range", leader=a
    )
    assert ctx.shard.groups["g"].state is GroupState.STABLE


def test_follower_with_new_metadata_triggers_rebalance() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    token, _ = ctx.join("g", b, protocols=range_protocols("t", "u"))
    assert ctx.replies.get(token) is None
    assert ctx.shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    history = ctx.describe("g").rebalance_history
    assert history[-1].cause == "member metadata changed"


def test_join_in_completing_rebalance_with_same_metadata_returns_current_generation() -> None:
    ctx = Context()
    t_a, a = ctx.join_new_member("g")
    ctx.sleep(0)
    token, result = ctx.join("g", a)
    assert result.reply_to(token) == ctx.replies[t_a]
    assert ctx.shard.groups["g"].state is GroupState.COMPLETING_REBALANCE


def test_join_in_completing_rebalance_with_new_metadata_restarts_and_fails_parked_syncs() -> None:
    ctx = Context()
    t_a, a = ctx.join_new_member("g")
    t_b, b = ctx.join_new_member("g")
    ctx.sleep(0)
    sync_token, _ = ctx.sync("g", b, 1)
    assert ctx.replies.get(sync_token) is None  # waiting for the leader
    ctx.join("g", a, protocols=range_protocols("t", "u"))
    assert ctx.replies[sync_token].error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert ctx.shard.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_unknown_member_id_and_unknown_group() -> None:
    ctx = Context()
    token, result = ctx.join("nope", "m-1")
    assert result.reply_to(token) == JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, "m-1")
    assert "nope" not in ctx.shard.groups
    ctx.stable_group("g", 1)
    token, result = ctx.join("g", "m-1")
    assert result.reply_to(token) == JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, "m-1")


def test_invalid_group_id_and_session_timeout() -> None:
    ctx = Context()
    token, result = ctx.join("")
    assert result.reply_to(token).error_code is ErrorCode.INVALID_GROUP_ID
    for session in (5_999, 1_800_001):
        token, result = ctx.join("g", session_ms=session)
        assert result.reply_to(token) == JoinGroupResponse(ErrorCode.INVALID_SESSION_TIMEOUT)
    assert ctx.shard.groups == {}
    token, result = ctx.join("g", session_ms=6_000)
    assert result.reply_to(token).error_code is ErrorCode.MEMBER_ID_REQUIRED


def test_inconsistent_group_protocol() -> None:
    ctx = Context()
    a, _ = ctx.stable_group("g", 2)
    token, result = ctx.join("g", protocols=(Protocol("roundrobin", b""),))
    assert result.reply_to(token) == JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    token, result = ctx.join("g", protocol_type="connect")
    assert result.reply_to(token) == JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    token, result = ctx.join("g", a, protocols=(Protocol("roundrobin", b""),))
    assert result.reply_to(token) == JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, a)
    # An empty group needs a protocol type and at least one protocol.
    token, result = ctx.join("h", protocols=())
    assert result.reply_to(token).error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    token, result = ctx.join("h", protocol_type="")
    assert result.reply_to(token).error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_is_chosen_by_vote_among_protocols_all_support() -> None:
    ctx = Context()
    rr, rng, sticky = (Protocol(n, subscription("t")) for n in ("roundrobin", "range", "sticky"))
    tokens = [
        ctx.join_new_member("g", protocols=(sticky, rr, rng))[0],  # sticky unsupported by others
        ctx.join_new_member("g", protocols=(rng, rr))[0],
        ctx.join_new_member("g", protocols=(rr, rng))[0],
        ctx.join_new_member("g", protocols=(rr, rng))[0],
    ]
    ctx.sleep(0)
    # Votes: rr (first member's first candidate), range, rr, rr.
    assert {ctx.replies[t].protocol_name for t in tokens} == {"roundrobin"}


def test_group_max_size() -> None:
    ctx = Context(CoordinatorConfig(initial_rebalance_delay_ms=0, max_group_size=2))
    ctx.stable_group("g", 2)
    token, result = ctx.join("g")
    assert result.reply_to(token) == JoinGroupResponse(ErrorCode.GROUP_MAX_SIZE_REACHED)


def test_old_clients_join_without_member_id_required() -> None:
    ctx = Context()
    token, result = ctx.join("g", version=3, client_id="old")
    assert result.reply_to(token) is None
    ctx.sleep(0)
    assert ctx.replies[token].member_id == "old-uuid0"
    assert ctx.replies[token].error_code is ErrorCode.NONE


# --- static membership (KIP-345) -----------------------------------------------------


def test_static_member_rejoining_in_stable_keeps_assignment_without_rebalance() -> None:
    ctx = Context(now_ms=10)
    a, b = ctx.stable_group("g", 2, static=True)
    group = ctx.shard.groups["g"]
    b_assignment = group.members[b].assignment
    token, result = ctx.join("g", instance_id="i1", client_id="c2")
    new_b = "i1-uuid2"
    assert result.reply_to(token) == JoinGroupResponse(
        ErrorCode.NONE, new_b, 1, "consumer", "range", leader=a
    )
    assert group.state is GroupState.STABLE and group.generation == 1
    assert group.members[new_b].assignment == b_assignment
    assert b not in group.members
    # The new member id is persisted.
    assert result.records == [
        group_metadata_record(
            GroupMetadataKey("g"),
            GroupMetadataValue(
                "consumer",
                1,
                "range",
                a,
                WALL_START_MS,  # when the group became Stable, on the wall clock
                tuple(
                    MemberMetadata(
                        m,
                        f"i{i}",
                        "client",
                        "/127.0.0.1",
                        30_000,
                        10_000,
                        subscription("t"),
                        group.members[m].assignment,
                    )
                    for i, m in enumerate([a, new_b])
                ),
            ),
        )
    ]
    # The old id is fenced.
    assert ctx.heartbeat("g", b, 1, instance_id="i1") is ErrorCode.FENCED_INSTANCE_ID
    assert ctx.heartbeat("g", new_b, 1, instance_id="i1") is ErrorCode.NONE
    history = ctx.describe("g").rebalance_history
    assert history[-1].cause == "static member replaced"
    assert history[-1].from_generation == history[-1].to_generation == 1


def test_static_leader_rejoining_v9_skips_assignment_older_gets_old_leader_id() -> None:
    ctx = Context()
    a, _ = ctx.stable_group("g", 2, static=True)
    token, result = ctx.join("g", instance_id="i0")
    response = result.reply_to(token)
    assert response.leader == response.member_id == "i0-uuid2"
    assert response.skip_assignment and len(response.members) == 2
    token, result = ctx.join("g", instance_id="i0", version=8)
    response = result.reply_to(token)
    assert response.member_id == "i0-uuid3" and response.leader == "i0-uuid2"
    assert not response.skip_assignment and response.members == ()


def test_static_member_with_changed_protocol_triggers_rebalance() -> None:
    ctx = Context()
    ctx.stable_group("g", 1, static=True)
    rr = (Protocol("roundrobin", subscription("t")), Protocol("range", subscription("t")))
    token, result = ctx.join("g", instance_id="i0", protocols=rr)
    # Its vote now picks roundrobin: a rebalance, which completes at once since
    # the only member has joined.
    assert result.reply_to(token).protocol_name == "roundrobin"
    assert result.reply_to(token).generation_id == 2
    assert ctx.shard.groups["g"].state is GroupState.COMPLETING_REBALANCE


def test_static_member_replaced_while_parked_fences_old_join() -> None:
    ctx = Context()
    a, b, c = ctx.stable_group("g", 3, static=True)
    t_a, _ = ctx.join("g", a, instance_id="i0")  # leader rejoin: rebalance
    t_b, _ = ctx.join("g", b, instance_id="i1")
    # b is parked in the join phase (c has not rejoined); a new instance of i1 arrives.
    t_b2, result = ctx.join("g", instance_id="i1")
    assert result.reply_to(t_b) == JoinGroupResponse(ErrorCode.FENCED_INSTANCE_ID, b)
    assert result.reply_to(t_b2) is None  # parked in its place
    t_c, result = ctx.join("g", c, instance_id="i2")
    assert result.reply_to(t_b2).member_id == "i1-uuid3"
    assert result.reply_to(t_b2).generation_id == 2


def test_static_member_fenced_on_join_with_wrong_member_id() -> None:
    ctx = Context()
    ctx.stable_group("g", 1, static=True)
    token, result = ctx.join("g", "someone-else", instance_id="i0")
    assert result.reply_to(token) == JoinGroupResponse(ErrorCode.FENCED_INSTANCE_ID, "someone-else")


def test_static_member_survives_rebalance_without_rejoining() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2, static=True, session_ms=60_000)
    t_a, _ = ctx.join("g", a, instance_id="i0", session_ms=60_000)
    ctx.sleep(30_000)  # rebalance timeout: b did not rejoin but is static, so it stays
    assert ctx.shard.groups["g"].generation == 2
    assert [m.member_id for m in ctx.replies[t_a].members] == [a, b]


def test_completing_rebalance_with_all_static_members_timed_out() -> None:
    # The leader left, nobody rejoined: wait another rebalance timeout.
    ctx = Context(TEST_CONFIG)
    a, b = ctx.stable_group("g", 2, static=True, session_ms=60_000)
    ctx.join("g", a, instance_id="i0", session_ms=60_000)
    group = ctx.shard.groups["g"]
    group.members[a].awaiting_join = None  # as if its request had been dropped
    group.num_awaiting_join = 0
    ctx.sleep(30_000)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert TimerKey(TimerKind.JOIN, "g") in ctx.timers
