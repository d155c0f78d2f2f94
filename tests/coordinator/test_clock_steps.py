"""A wall clock that steps (NTP, an operator's `date -s`) changes no decision of the shard.

Every deadline is on the monotonic clock and every written time on the wall clock
(coordinator/now.py). Here the fake wall clock steps an hour either way between
requests: sessions, rebalance, join and sync timeouts, revocation timeouts and the
assignment interval fall due exactly when they would have, while what is written
carries the wall clock's time, stepped.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herdless.coordinator import GroupState
from herdless.coordinator.messages import LeavingMember
from herdless.coordinator.records import (
    GroupMetadataKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, TOPIC_T, Context, range_assign
from tests.coordinator.test_consumer_groups import SESSION_MS, parts, two_members

HOUR = 3_600_000
STEPS = pytest.mark.parametrize("step_ms", [HOUR, -HOUR], ids=["forward", "back"])


# --- classic groups ----------------------------------------------------------------------


@STEPS
def test_a_silent_member_expires_one_session_after_its_last_heartbeat(step_ms: int) -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)  # 10 s sessions
    ctx.sleep(1_000)
    assert ctx.heartbeat("g", b, 1) is ErrorCode.NONE  # b's last
    ctx.step_wall(step_ms)
    group = ctx.shard.groups["g"]
    for _ in range(3):
        ctx.sleep(3_000)
        assert ctx.heartbeat("g", a, 1) is ErrorCode.NONE
    ctx.sleep(999)
    assert b in group.members and group.state is GroupState.STABLE
    ctx.sleep(1)
    assert b not in group.members and a in group.members
    assert group.state is GroupState.PREPARING_REBALANCE


@STEPS
def test_members_that_heartbeat_stay_whatever_the_wall_clock_does(step_ms: int) -> None:
    ctx = Context()
    members = ctx.stable_group("g", 3)
    for i in range(20):
        if i % 5 == 0:
            ctx.step_wall(step_ms)
        ctx.sleep(3_000)
        assert {ctx.heartbeat("g", m, 1) for m in members} == {ErrorCode.NONE}
    assert ctx.shard.groups["g"].state is GroupState.STABLE


@STEPS
def test_the_join_phase_ends_one_rebalance_timeout_after_it_began(step_ms: int) -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2, session_ms=60_000, rebalance_ms=20_000)
    c_token, c = ctx.join_new_member("g", session_ms=60_000, rebalance_ms=20_000)
    a_token, _ = ctx.join("g", a, session_ms=60_000, rebalance_ms=20_000)  # b never rejoins
    ctx.step_wall(step_ms)
    ctx.sleep(19_999)
    assert ctx.replies.get(a_token) is None and ctx.replies.get(c_token) is None
    ctx.sleep(1)
    assert ctx.replies[a_token].generation_id == 2
    assert set(ctx.shard.groups["g"].members) == {a, c}


@STEPS
def test_members_that_never_sync_are_dropped_one_rebalance_timeout_after_the_join(
    step_ms: int,
) -> None:
    ctx = Context()
    a_token, a = ctx.join_new_member("g", session_ms=30_000, rebalance_ms=20_000)
    b_token, b = ctx.join_new_member("g", session_ms=30_000, rebalance_ms=20_000)
    ctx.sleep(0)  # the join phase ends: both must sync
    leader = ctx.replies[a_token].leader
    follower = b if leader == a else a
    ctx.sync("g", leader, 1, range_assign([a, b], "t", 4))
    ctx.step_wall(step_ms)
    for _ in range(6):
        ctx.sleep(3_000)
        ctx.heartbeat("g", leader, 1)
    ctx.sleep(1_999)
    assert follower in ctx.shard.groups["g"].members
    ctx.sleep(1)
    assert follower not in ctx.shard.groups["g"].members


@STEPS
def test_a_member_id_handed_out_waits_one_session_whatever_the_wall_clock(step_ms: int) -> None:
    ctx = Context()
    token, _ = ctx.join("g")  # MEMBER_ID_REQUIRED: pending until it rejoins
    ctx.step_wall(step_ms)
    ctx.sleep(9_999)
    assert ctx.shard.groups["g"].pending_join_members
    ctx.sleep(1)
    assert not ctx.shard.groups["g"].pending_join_members


@STEPS
def test_the_initial_rebalance_delay_is_not_stretched_or_cut(step_ms: int) -> None:
    ctx = Context(replace(TEST_CONFIG, initial_rebalance_delay_ms=3_000))
    token, _ = ctx.join_new_member("g")
    ctx.step_wall(step_ms)
    ctx.sleep(2_999)
    assert ctx.replies.get(token) is None
    ctx.sleep(1)
    assert ctx.replies[token].error_code is ErrorCode.NONE


# --- consumer groups (KIP-848) ----------------------------------------------------------------


@STEPS
def test_a_silent_consumer_group_member_expires_one_session_after_it(step_ms: int) -> None:
    ctx = Context()
    two_members(ctx)
    ctx.step_wall(step_ms)
    ctx.sleep(SESSION_MS - 1_000)
    ctx.consumer_heartbeat("g", "m1", 2)
    ctx.sleep(999)
    assert "m2" in ctx.shard.consumer.groups["g"].members
    ctx.sleep(1)
    assert set(ctx.shard.consumer.groups["g"].members) == {"m1"}


@STEPS
def test_a_member_that_keeps_what_it_must_revoke_is_removed_on_time(step_ms: int) -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0, rebalance_timeout_ms=10_000)
    ctx.consumer_heartbeat("g", "m2", 0)
    ctx.consumer_heartbeat("g", "m1", 1)  # told to revoke 3-5
    ctx.step_wall(step_ms)
    for _ in range(3):
        ctx.sleep(3_000)
        ctx.consumer_heartbeat("g", "m1", 1)  # alive, but keeps them
        ctx.consumer_heartbeat("g", "m2", 2)
    ctx.sleep(999)
    assert "m1" in ctx.shard.consumer.groups["g"].members
    ctx.sleep(1)
    assert "m1" not in ctx.shard.consumer.groups["g"].members
    resp, _ = ctx.consumer_heartbeat("g", "m2", 2)
    assert resp.assignment == parts(TOPIC_T, *range(6))


# --- what is written -------------------------------------------------------------------------


@STEPS
def test_written_times_are_the_wall_clocks_stepped(step_ms: int) -> None:
    ctx = Context()
    (a,) = ctx.stable_group("g", 1)
    ctx.step_wall(step_ms)
    _, result = ctx.commit("g", {("t", 0): 5}, generation=1, member_id=a)
    (record,) = result.records
    assert decode_offset_commit_value(record.value).commit_timestamp == ctx.wall
    ctx.leave("g", LeavingMember(a))
    (group_record,) = [r for r in ctx.log if isinstance(decode_key(r.key), GroupMetadataKey)][-1:]
    assert decode_group_metadata_value(group_record.value).current_state_timestamp == ctx.wall


def test_offsets_expire_by_the_wall_clock_they_were_committed_on() -> None:
    """Retention compares the wall clock with written commit times, on any broker that
    loads them: only the check's period is a deadline."""
    ctx = Context(replace(TEST_CONFIG, offsets_retention_ms=2 * HOUR))
    ctx.commit("g", {("t", 0): 5})
    ctx.step_wall(-HOUR)
    ctx.sleep(2 * HOUR)  # two hours passed, but the wall clock says one
    assert ctx.committed("g") == {("t", 0): 5}
    ctx.step_wall(HOUR)
    ctx.sleep(ctx.config.offsets_retention_check_interval_ms)
    assert ctx.committed("g") == {}


# --- clients at random -----------------------------------------------------------------------

CONSUMER_IDS = ["m1", "m2", "m3"]
# Member i of the classic group: the i-th id handed out, modulo how many there were.
MEMBER = st.integers(0, 5)

operation = st.one_of(
    st.tuples(st.just("join"), st.none()),  # a new member, which then joins with its id
    st.tuples(st.just("join"), MEMBER),  # a member joins again
    st.tuples(st.just("sync"), MEMBER),
    st.tuples(st.just("heartbeat"), MEMBER),
    st.tuples(st.just("heartbeat"), MEMBER),
    st.tuples(st.just("leave"), MEMBER),
    st.tuples(st.just("commit"), MEMBER),
    st.tuples(st.just("consumer"), st.sampled_from(CONSUMER_IDS), st.sampled_from([0, -1, None])),
    st.tuples(st.just("consumer"), st.sampled_from(CONSUMER_IDS), st.none()),
    st.tuples(st.just("sleep"), st.sampled_from([0, 1_000, 3_000, 9_999, 10_000, 15_000])),
    st.tuples(st.just("sleep"), st.integers(0, 20_000)),
    st.tuples(st.just("step"), st.sampled_from([HOUR, -HOUR])),
)


def _run(ctx: Context, op: tuple, ids: list[str]) -> None:  # type: ignore[type-arg]
    """One client's request, made as a client would from what it was told (`ids`: the
    classic members' ids handed out so far)."""
    kind, arg = op[0], op[1]
    group = ctx.shard.groups.get("g")
    generation = 0 if group is None else group.generation
    member_id = ids[arg % len(ids)] if ids and isinstance(arg, int) else ""
    timeouts = {"session_ms": 10_000, "rebalance_ms": 15_000}
    if kind == "join":
        token, result = ctx.join("g", member_id, **timeouts)
        response = result.reply_to(token)
        if response is not None and response.error_code is ErrorCode.MEMBER_ID_REQUIRED:
            ids.append(response.member_id)
            ctx.join("g", response.member_id, **timeouts)
    elif kind == "sync" and member_id:
        leader = None if group is None else group.leader_id
        assignment = range_assign(sorted(group.members), "t", 4) if group and group.members else {}
        ctx.sync("g", member_id, generation, assignment if member_id == leader else None)
    elif kind == "heartbeat" and member_id:
        ctx.heartbeat("g", member_id, generation)
    elif kind == "leave" and member_id:
        ctx.leave("g", LeavingMember(member_id))
    elif kind == "commit":
        ctx.commit("g", {("t", 0): len(ctx.log)}, generation=generation, member_id=member_id)
    elif kind == "consumer":
        epoch = op[2]
        if epoch is None:  # what it was last told, if it is a member
            consumer_group = ctx.shard.consumer.groups.get("c")
            member = None if consumer_group is None else consumer_group.members.get(arg)
            epoch = 0 if member is None else member.member_epoch
        ctx.consumer_heartbeat("c", arg, epoch)
    elif kind == "sleep":
        ctx.sleep(arg)


def _decisions(ctx: Context) -> tuple:  # type: ignore[type-arg]
    """What a stepped wall clock must not change: every answer, every timer, which
    records were written (their times aside), each group's state and members."""
    classic = {
        g: (group.state, group.generation, sorted(group.members))
        for g, group in ctx.shard.groups.items()
    }
    consumer = {
        g: (group.state, group.group_epoch, sorted(group.members))
        for g, group in ctx.shard.consumer.groups.items()
    }
    written = [(r.key, r.value is None) for r in ctx.log]
    return ctx.replies, ctx.timers, written, classic, consumer


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=10, max_size=60))
def test_a_stepping_wall_clock_changes_no_answer_timer_or_record(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    config = replace(
        TEST_CONFIG, initial_rebalance_delay_ms=3_000, consumer_assignment_interval_ms=1_000
    )
    steady, stepped = Context(config), Context(config)
    steady_ids: list[str] = []
    stepped_ids: list[str] = []
    for op in ops:
        if op[0] == "step":
            stepped.step_wall(op[1])
            continue
        _run(steady, op, steady_ids)
        _run(stepped, op, stepped_ids)
        assert _decisions(stepped) == _decisions(steady), op
