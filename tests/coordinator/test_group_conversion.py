"""Online conversion between the classic and the consumer group protocols (KIP-848 migration).

A classic group of members assigned through the embedded consumer protocol is
upgraded by a member joining with ConsumerGroupHeartbeat; its members keep using
JoinGroup / SyncGroup / Heartbeat / LeaveGroup inside the consumer group, and the
group goes back to classic when the last new-protocol member leaves.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import replace

import pytest

from herdless.coordinator import Result, TimerKey, TimerKind
from herdless.coordinator.config import ConsumerGroupMigrationPolicy
from herdless.coordinator.consumer_protocol import decode_assignment, encode_assignment
from herdless.coordinator.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    decode_consumer_group_key,
    decode_consumer_group_value,
    encode_consumer_group_value,
)
from herdless.coordinator.messages import LeavingMember, Protocol
from herdless.coordinator.reconciliation import MemberState
from herdless.coordinator.records import GroupMetadataKey, decode_key
from herdless.coordinator.state import GroupState
from herdless.coordinator.topic_metadata import TopicIdPartition
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, TOPIC_T, Context
from tests.coordinator.runtime_context import RuntimeContext
from tests.coordinator.snapshot import snapshot

Policy = ConsumerGroupMigrationPolicy


def subscription(
    topics: Iterable[str] = ("t",), owned: Iterable[int] = (), version: int = 1
) -> bytes:
    """A ConsumerProtocolSubscription of topic t's partitions `owned` (v1+ carries them)."""
    out = bytearray(struct.pack(">h", version))
    names = list(topics)
    out += struct.pack(">i", len(names))
    for name in names:
        out += struct.pack(">h", len(name)) + name.encode()
    out += struct.pack(">i", -1)  # no user data
    if version >= 1:
        ps = sorted(owned)
        out += struct.pack(">i", 1 if ps else 0)
        if ps:
            out += struct.pack(">h", 1) + b"t" + struct.pack(">i", len(ps))
            out += b"".join(struct.pack(">i", p) for p in ps)
    return bytes(out)


def protocols(owned: Iterable[int] = (), name: str = "cooperative-sticky") -> tuple[Protocol, ...]:
    return (Protocol(name, subscription(owned=owned)),)


def assignment(*partitions: int) -> bytes:
    return encode_assignment(frozenset(("t", p) for p in partitions), 1)


def tps(*partitions: int) -> frozenset[TopicIdPartition]:
    return frozenset(TopicIdPartition(TOPIC_T.topic_id, p) for p in partitions)


def partitions_of(data: bytes) -> set[int]:
    return {p for _, p in decode_assignment(data)}


def classic_group(ctx: Context, n: int = 2, group_id: str = "g", **kw: object) -> list[str]:
    """n classic members sharing topic t's 6 partitions, in a stable generation."""
    tokens, members = [], []
    for _ in range(n):
        token, member_id = ctx.join_new_member(group_id, protocols=protocols(), **kw)
        tokens.append(token)
        members.append(member_id)
    ctx.sleep(0)
    joined = [ctx.replies[t] for t in tokens]
    assert all(r.error_code is ErrorCode.NONE for r in joined), joined
    leader, generation = joined[0].leader, joined[0].generation_id
    share = {m: [p for p in range(6) if p % n == i] for i, m in enumerate(members)}
    ctx.sync(group_id, leader, generation, {m: assignment(*ps) for m, ps in share.items()})
    for m in members:
        if m != leader:
            ctx.sync(group_id, m, generation)
    assert ctx.shard.groups[group_id].state is GroupState.STABLE
    return members


def classic_join(ctx: Context, member_id: str, owned: Iterable[int], **kw: object):  # type: ignore[no-untyped-def]
    token, _ = ctx.join("g", member_id, protocols=protocols(owned), **kw)
    return ctx.replies[token]


def classic_sync(ctx: Context, member_id: str, generation: int, **kw: object):  # type: ignore[no-untyped-def]
    token, _ = ctx.sync("g", member_id, generation, **kw)
    return ctx.replies[token]


def owners(ctx: Context) -> dict[int, str]:
    group = ctx.shard.consumer.groups["g"]
    return {tp.partition: owner for tp, (owner, _) in group.owned_partitions().items()}


def upgraded(ctx: Context) -> tuple[list[str], str]:
    """A 2-member classic group, upgraded by member "new"; (classic members, "new")."""
    classic = classic_group(ctx)
    resp, _ = ctx.consumer_heartbeat("g", "new", 0)
    assert resp.error_code is ErrorCode.NONE
    return classic, "new"


def roll(ctx: Context, member_id: str, epoch: int, owned: set[int]) -> tuple[int, set[int]]:
    """A cooperative classic member's round: JoinGroup owning `owned`, SyncGroup; then what it
    owns is what the sync gave it (it revoked the rest). (generation, owned)."""
    joined = classic_join(ctx, member_id, owned)
    assert joined.error_code is ErrorCode.NONE, joined
    assert joined.leader == "" and joined.members == ()
    synced = classic_sync(ctx, member_id, joined.generation_id)
    assert synced.error_code is ErrorCode.NONE, synced
    return joined.generation_id, partitions_of(synced.assignment)


# --- up --------------------------------------------------------------------------------------


def test_a_heartbeat_upgrades_a_live_classic_group_with_kafkas_records() -> None:
    ctx = Context()
    a, b = classic_group(ctx)
    generation = ctx.shard.groups["g"].generation
    resp, result = ctx.consumer_heartbeat("g", "new", 0)
    assert resp.error_code is ErrorCode.NONE
    # The classic members still own everything: the new member waits for its share.
    assert resp.assignment == frozenset() and resp.member_epoch == generation + 1
    keys = [decode_key(r.key) or decode_consumer_group_key(r.key) for r in result.records]
    assert keys[0] == GroupMetadataKey("g") and result.records[0].value is None
    assert keys[1:9] == [
        ConsumerGroupMemberMetadataKey("g", a),
        ConsumerGroupMemberMetadataKey("g", b),
        ConsumerGroupMetadataKey("g"),
        ConsumerGroupTargetAssignmentMemberKey("g", a),
        ConsumerGroupTargetAssignmentMemberKey("g", b),
        ConsumerGroupTargetAssignmentMetadataKey("g"),
        ConsumerGroupCurrentMemberAssignmentKey("g", a),
        ConsumerGroupCurrentMemberAssignmentKey("g", b),
    ]
    value = decode_consumer_group_value(keys[1], result.records[1].value)  # type: ignore[arg-type]
    assert isinstance(value, ConsumerGroupMemberMetadataValue)
    (protocol,) = protocols()
    expected = ClassicMemberMetadata(10_000, ((protocol.name, protocol.metadata),))
    assert value.classic_member_metadata == expected
    assert "g" not in ctx.shard.groups
    group = ctx.shard.consumer.groups["g"]
    assert owners(ctx) == {0: a, 2: a, 4: a, 1: b, 3: b, 5: b}
    assert group.members[a].member_epoch == generation and group.members[a].uses_classic_protocol
    assert group.members["new"].state is MemberState.UNRELEASED_PARTITIONS
    # Classic members' sessions are their own.
    assert ctx.timers[TimerKey(TimerKind.SESSION, "g", a)] == ctx.now + 10_000
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)
    # ConsumerGroupDescribe says which protocol each member speaks.
    (described,) = ctx.consumer_describe("g")
    classic = {m.member_id: m.uses_classic_protocol for m in described.members}
    assert classic == {a: True, b: True, "new": False}


def test_partitions_move_to_the_new_member_only_after_their_classic_owner_released_them() -> None:
    ctx = Context()
    (a, b), new = upgraded(ctx)
    group = ctx.shard.consumer.groups["g"]
    epoch = group.group_epoch
    target_new = {tp.partition for tp in group.target_of(new)}
    assert len(target_new) == 2

    # Heartbeats tell the classic members to rejoin, and start their join deadline.
    assert ctx.heartbeat("g", a, epoch - 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert TimerKey(TimerKind.CLASSIC_JOIN, "g", a) in ctx.timers
    owned = {member: {p for p, o in owners(ctx).items() if o == member} for member in (a, b)}

    # a rejoins still owning everything: it keeps its epoch until it revoked what goes.
    generation, kept = roll(ctx, a, epoch - 1, owned[a])
    losing = owned[a] - {tp.partition for tp in group.target_of(a)}
    assert generation == epoch - 1 and kept == owned[a] - losing
    assert TimerKey(TimerKind.CLASSIC_JOIN, "g", a) not in ctx.timers
    assert group.members[a].state is MemberState.UNREVOKED_PARTITIONS
    # Not yet released: the new member does not get them.
    resp, _ = ctx.consumer_heartbeat("g", new, epoch)
    assert not ({tp.partition for tp in resp.assignment or ()} & losing)
    assert ctx.heartbeat("g", a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    # It revoked them and rejoins without: released, and it is at the group's epoch.
    generation, kept = roll(ctx, a, generation, kept)
    assert generation == epoch and group.members[a].state is MemberState.STABLE
    assert ctx.heartbeat("g", a, generation) is ErrorCode.NONE
    resp, _ = ctx.consumer_heartbeat("g", new, epoch)
    got = {tp.partition for tp in group.members[new].assigned}
    assert losing <= got and not (got & kept)

    # b releases the same way; then the new member has its whole target.
    generation, kept_b = roll(ctx, b, epoch - 1, owned[b])
    generation, kept_b = roll(ctx, b, generation, kept_b)
    ctx.consumer_heartbeat("g", new, epoch)
    assert {tp.partition for tp in group.members[new].assigned} == target_new
    assert group.state.value == "Stable"
    assert sorted(kept | kept_b | target_new) == list(range(6))
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


def test_an_eager_classic_member_releases_by_rejoining_with_nothing() -> None:
    ctx = Context()
    (a, _), new = upgraded(ctx)
    group = ctx.shard.consumer.groups["g"]
    epoch = group.group_epoch
    # An eager client revoked everything before rejoining.
    generation, got = roll(ctx, a, epoch - 1, set())
    assert generation == epoch
    assert got == {tp.partition for tp in group.target_of(a)}
    resp, _ = ctx.consumer_heartbeat("g", new, epoch)
    assert {tp.partition for tp in resp.assignment or ()} == {
        tp.partition for tp in group.target_of(new) if owners(ctx).get(tp.partition) == new
    }
    assert all(owners(ctx).get(p) != a for p in range(6) if p not in got)


def test_a_classic_member_that_does_not_rejoin_in_time_is_fenced() -> None:
    ctx = Context()
    (a, b), new = upgraded(ctx)
    epoch = ctx.shard.consumer.groups["g"].group_epoch
    roll(ctx, b, epoch - 1, set())  # b does as told
    assert ctx.heartbeat("g", a, epoch - 1) is ErrorCode.REBALANCE_IN_PROGRESS
    for _ in range(3):  # heartbeats keep a's session, not its join deadline
        ctx.sleep(9_000)
        assert ctx.heartbeat("g", a, epoch - 1) is ErrorCode.REBALANCE_IN_PROGRESS
        assert ctx.heartbeat("g", b, epoch) is ErrorCode.NONE
    ctx.sleep(3_000)  # its 30 s rebalance timeout
    group = ctx.shard.consumer.groups["g"]
    assert a not in group.members and b in group.members
    assert ctx.heartbeat("g", a, epoch - 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_classic_member_that_joins_but_never_syncs_is_fenced() -> None:
    ctx = Context()
    (a, _), _ = upgraded(ctx)
    epoch = ctx.shard.consumer.groups["g"].group_epoch
    classic_join(ctx, a, set())
    assert TimerKey(TimerKind.CLASSIC_SYNC, "g", a) in ctx.timers
    assert classic_sync(ctx, a, epoch).error_code is ErrorCode.NONE
    assert TimerKey(TimerKind.CLASSIC_SYNC, "g", a) not in ctx.timers
    classic_join(ctx, a, set())
    ctx.sleep(30_000)
    assert a not in ctx.shard.consumer.groups["g"].members


def test_classic_requests_inside_a_consumer_group_answer_kafkas_errors() -> None:
    ctx = Context()
    (a, _), new = upgraded(ctx)
    epoch = ctx.shard.consumer.groups["g"].group_epoch
    assert ctx.heartbeat("g", "nobody", epoch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("g", a, epoch + 5) is ErrorCode.ILLEGAL_GENERATION
    # The new-protocol member is not a classic one.
    assert ctx.heartbeat("g", new, epoch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert classic_sync(ctx, new, epoch).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert classic_sync(ctx, a, epoch + 5).error_code is ErrorCode.ILLEGAL_GENERATION
    # The group epoch moved on and a has not rejoined: it must.
    assert classic_sync(ctx, a, epoch - 1).error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert (
        classic_sync(ctx, a, epoch - 1, protocol_name="range").error_code
        is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    token, _ = ctx.join("g", a, protocols=(Protocol("roundrobin", subscription()),))
    assert ctx.replies[token].error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    token, _ = ctx.join("g", protocol_type="connect", protocols=protocols())
    assert ctx.replies[token].error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    left = ctx.leave("g", LeavingMember(new), LeavingMember("nobody"))
    assert [m.error_code for m in left.members] == [ErrorCode.UNKNOWN_MEMBER_ID] * 2
    # Commits: the generation is the member epoch; older OffsetCommit versions are fine.
    response, _ = ctx.commit("g", {("t", 0): 1}, generation=epoch - 1, member_id=a, version=8)
    assert response.topics[0].partitions[0].error_code is ErrorCode.NONE
    response, _ = ctx.commit("g", {("t", 0): 1}, generation=epoch, member_id=a, version=8)
    assert response.topics[0].partitions[0].error_code is ErrorCode.ILLEGAL_GENERATION


def test_static_classic_members_are_fenced_by_instance_id() -> None:
    ctx = Context()
    # One static classic member, upgraded.
    token, _ = ctx.join("g", instance_id="i0", protocols=protocols())
    ctx.sleep(0)
    joined = ctx.replies[token]
    ctx.sync(
        "g",
        joined.member_id,
        joined.generation_id,
        {joined.member_id: assignment(0, 1)},
        instance_id="i0",
    )
    ctx.consumer_heartbeat("g", "new", 0)
    a = joined.member_id
    epoch = joined.generation_id
    assert ctx.heartbeat("g", "other", epoch, instance_id="i0") is ErrorCode.FENCED_INSTANCE_ID
    assert ctx.heartbeat("g", a, epoch, instance_id="i9") is ErrorCode.UNKNOWN_MEMBER_ID
    left = ctx.leave("g", LeavingMember("other", "i0"))
    assert left.members[0].error_code is ErrorCode.FENCED_INSTANCE_ID
    # Back under a new id (a restart): it takes the old one's place and partitions.
    token, _ = ctx.join("g", instance_id="i0", protocols=protocols())
    rejoined = ctx.replies[token]
    assert rejoined.error_code is ErrorCode.NONE and rejoined.member_id != a
    group = ctx.shard.consumer.groups["g"]
    assert a not in group.members and group.static_members["i0"] == rejoined.member_id
    assert ctx.heartbeat("g", a, epoch, instance_id="i0") is ErrorCode.FENCED_INSTANCE_ID
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


def test_a_conversion_mid_rebalance_sends_parked_members_back_to_rejoin() -> None:
    ctx = Context()
    a, b = classic_group(ctx)
    generation = ctx.shard.groups["g"].generation
    token, _ = ctx.join("g", a, protocols=protocols([0, 2, 4]))  # a rebalance: a is parked
    assert ctx.shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    ctx.consumer_heartbeat("g", "new", 0)
    assert ctx.replies[token].error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert not [k for k in ctx.timers if k.kind in (TimerKind.JOIN, TimerKind.HEARTBEAT)]
    group = ctx.shard.consumer.groups["g"]
    assert group.members[a].member_epoch == generation
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


def test_a_classic_member_joins_a_consumer_group_and_is_assigned_server_side() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    token, _ = ctx.join("g", protocols=protocols())
    first = ctx.replies[token]
    assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED
    joined = classic_join(ctx, first.member_id, ())
    assert joined.error_code is ErrorCode.NONE
    assert joined.protocol_type == "consumer" and joined.protocol_name == "cooperative-sticky"
    synced = classic_sync(ctx, first.member_id, joined.generation_id)
    target = ctx.shard.consumer.groups["g"].target_of(first.member_id)
    # m1 had all six: the classic member gets its share once m1 revoked them.
    assert target and partitions_of(synced.assignment) == set()
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    ctx.consumer_heartbeat("g", "m1", resp.member_epoch, owned=resp.assignment)
    assert (
        ctx.heartbeat("g", first.member_id, joined.generation_id) is ErrorCode.REBALANCE_IN_PROGRESS
    )
    generation, got = roll(ctx, first.member_id, joined.generation_id, set())
    assert got == {tp.partition for tp in target}


# --- down ------------------------------------------------------------------------------------


def test_the_last_new_member_leaving_turns_the_group_back_into_a_classic_one() -> None:
    ctx = Context()
    (a, b), new = upgraded(ctx)
    group = ctx.shard.consumer.groups["g"]
    epoch = group.group_epoch
    roll(ctx, a, epoch - 1, set())
    targets = {m: {tp.partition for tp in group.target_of(m)} for m in (a, b)}
    resp, result = ctx.consumer_heartbeat("g", new, -1)
    assert resp.error_code is ErrorCode.NONE
    assert "g" not in ctx.shard.consumer.groups
    classic = ctx.shard.groups["g"]
    assert classic.state is GroupState.PREPARING_REBALANCE and classic.generation == epoch
    assert set(classic.members) == {a, b}
    assert {m: partitions_of(x.assignment) for m, x in classic.members.items()} == targets
    # Consumer group tombstones, then the classic group's metadata.
    assert all(r.value is None for r in result.records[:-1])
    assert decode_key(result.records[-1].key) == GroupMetadataKey("g")
    assert not [k for k in ctx.timers if k.kind in (TimerKind.SESSION, TimerKind.CLASSIC_JOIN)]
    # The members rejoin with the classic protocol; the leader assigns again.
    assert ctx.heartbeat("g", a, epoch) is ErrorCode.REBALANCE_IN_PROGRESS
    ta, _ = ctx.join("g", a, protocols=protocols(targets[a]))
    tb, _ = ctx.join("g", b, protocols=protocols())
    ja, jb = ctx.replies[ta], ctx.replies[tb]
    assert ja.error_code is jb.error_code is ErrorCode.NONE and ja.generation_id == epoch + 1
    leader = ja.leader
    ctx.sync("g", leader, epoch + 1, {a: assignment(0, 1, 2), b: assignment(3, 4, 5)})
    follower = b if leader == a else a
    ctx.sync("g", follower, epoch + 1)
    assert classic.state is GroupState.STABLE
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


def test_a_new_member_whose_session_expires_also_turns_the_group_back() -> None:
    ctx = Context()
    (a, b), new = upgraded(ctx)
    epoch = ctx.shard.consumer.groups["g"].group_epoch
    for m in (a, b):
        roll(ctx, m, epoch - 1, set())
    for _ in range(4):  # the classic members keep their sessions; the new member is silent
        ctx.sleep(9_000)
        assert {ctx.heartbeat("g", m, epoch) for m in (a, b)} == {ErrorCode.NONE}
    ctx.sleep(9_000)  # its 45 s session ends
    assert "g" in ctx.shard.groups and "g" not in ctx.shard.consumer.groups
    assert set(ctx.shard.groups["g"].members) == {a, b}


# --- policies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "upgrades", "downgrades"),
    [
        (Policy.BIDIRECTIONAL, True, True),
        (Policy.UPGRADE, True, False),
        (Policy.DOWNGRADE, False, True),
        (Policy.DISABLED, False, False),
    ],
)
def test_each_migration_policy(policy: Policy, upgrades: bool, downgrades: bool) -> None:
    ctx = Context(replace(TEST_CONFIG, consumer_migration_policy=policy))
    classic_group(ctx)
    resp, result = ctx.consumer_heartbeat("g", "new", 0)
    if not upgrades:
        assert resp.error_code is ErrorCode.GROUP_ID_NOT_FOUND and not result.records
        assert resp.error_message == "Group g is not a consumer group."
        assert "g" in ctx.shard.groups
    else:
        assert resp.error_code is ErrorCode.NONE and "g" in ctx.shard.consumer.groups

    # A consumer group with classic members, however it came to be: a classic member may
    # join a live consumer group whatever the policy, as in Kafka.
    other = Context(replace(TEST_CONFIG, consumer_migration_policy=policy))
    other.consumer_heartbeat("h", "new", 0)
    token, _ = other.join("h", protocols=protocols())
    token, _ = other.join("h", other.replies[token].member_id, protocols=protocols())
    assert other.replies[token].error_code is ErrorCode.NONE
    other.consumer_heartbeat("h", "new", -1)
    assert ("h" in other.shard.groups) is downgrades
    assert ("h" in other.shard.consumer.groups) is not downgrades
    replayed = other.replayed(other.log)
    if downgrades:  # the live group is rebalancing; the log has it as it began
        assert set(replayed.groups["h"].members) == set(other.shard.groups["h"].members)
    else:
        assert snapshot(replayed) == snapshot(other.shard)


def test_a_group_of_another_protocol_type_is_never_upgraded() -> None:
    ctx = Context()
    token, member_id = ctx.join_new_member("g", protocol_type="connect")
    ctx.sleep(0)
    resp, result = ctx.consumer_heartbeat("g", "new", 0)
    assert resp.error_code is ErrorCode.GROUP_ID_NOT_FOUND and not result.records


# --- records -----------------------------------------------------------------------------------


def test_classic_member_metadata_is_tagged_field_0_of_the_member_value() -> None:
    classic = ClassicMemberMetadata(45_000, (("range", b"\x00\x01"), ("roundrobin", b"")))
    value = ConsumerGroupMemberMetadataValue(
        None, None, "c", "/h", ("t",), None, 30_000, None, classic
    )
    data = encode_consumer_group_value(value)
    # ... the plain value's fields, then one tagged field: tag 0, its size, its bytes.
    plain = encode_consumer_group_value(replace(value, classic_member_metadata=None))
    assert (
        data[: len(plain) - 1] == plain[:-1]
        and data[len(plain) - 1 : len(plain) + 1] == b"\x01\x00"
    )
    key = ConsumerGroupMemberMetadataKey("g", "m")
    assert decode_consumer_group_value(key, data) == value
    assert decode_consumer_group_value(key, plain).classic_member_metadata is None  # type: ignore[union-attr]


def test_the_last_new_static_member_back_with_the_classic_protocol_downgrades_at_once() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "s", 0, instance_id="i1")
    token, _ = ctx.join("g", protocols=protocols())
    classic_id = ctx.replies[token].member_id
    classic_join(ctx, classic_id, ())
    group = ctx.shard.consumer.groups["g"]
    target = {tp.partition for tp in group.target_of("s")}
    # The static member restarts with the classic protocol: it takes its own place back.
    token, result = ctx.join("g", instance_id="i1", protocols=protocols())
    joined = ctx.replies[token]
    assert joined.error_code is ErrorCode.NONE and joined.leader == ""
    assert "g" not in ctx.shard.consumer.groups
    classic = ctx.shard.groups["g"]
    assert classic.state is GroupState.STABLE and classic.generation == joined.generation_id
    assert set(classic.members) == {classic_id, joined.member_id}
    assert decode_key(result.records[-1].key) == GroupMetadataKey("g")
    synced = classic_sync(ctx, joined.member_id, joined.generation_id, instance_id="i1")
    assert synced.error_code is ErrorCode.NONE and partitions_of(synced.assignment) == target
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


class Committed(RuntimeContext):
    """Every write replicated at once: answers go out as they are given."""

    def apply(self, result: Result) -> Result:
        super().apply(result)
        self.replicate(len(self.log))
        return result


@pytest.mark.parametrize("warm", [True, False], ids=["standby", "reload"])
def test_a_new_leader_has_the_converted_group_both_ways(warm: bool) -> None:
    ctx = Committed()
    (a, b), new = upgraded(ctx)
    ctx.replicate(len(ctx.log))
    ctx.standby_replays(len(ctx.log))
    ctx.move_leadership(truncate=True, warm=warm)
    group = ctx.shard.consumer.groups["g"]
    assert set(group.members) == {a, b, new} and group.members[a].uses_classic_protocol
    assert ctx.timers[TimerKey(TimerKind.SESSION, "g", a)] == ctx.now + 10_000
    # The classic members go on as before: told to rejoin, they release.
    epoch = group.group_epoch
    assert ctx.heartbeat("g", a, epoch - 1) is ErrorCode.REBALANCE_IN_PROGRESS
    generation, _ = roll(ctx, a, epoch - 1, set())
    assert generation == epoch

    ctx.consumer_heartbeat("g", new, -1)
    ctx.replicate(len(ctx.log))
    ctx.standby_replays(len(ctx.log))
    ctx.move_leadership(truncate=True, warm=warm)
    assert "g" not in ctx.shard.consumer.groups
    assert set(ctx.shard.groups["g"].members) == {a, b}


def test_a_static_classic_member_restarted_with_the_new_protocol_takes_its_own_place() -> None:
    ctx = Context()
    tokens = [ctx.join("g", instance_id=f"i{i}", protocols=protocols())[0] for i in range(2)]
    ctx.sleep(0)
    joined = [ctx.replies[t] for t in tokens]
    ids = [r.member_id for r in joined]
    generation = joined[0].generation_id
    ctx.sync(
        "g",
        joined[0].leader,
        generation,
        {ids[0]: assignment(0, 1, 2), ids[1]: assignment(3, 4, 5)},
        instance_id="i0" if joined[0].leader == ids[0] else "i1",
    )
    # i0 stops without leaving (static) and comes back with the new protocol.
    resp, _ = ctx.consumer_heartbeat("g", "n0", 0, instance_id="i0")
    assert resp.error_code is ErrorCode.NONE
    group = ctx.shard.consumer.groups["g"]
    assert ids[0] not in group.members and group.static_members["i0"] == "n0"
    assert not group.members["n0"].uses_classic_protocol
    # Its partitions were its own: it has them back at once, nobody else held them.
    assert {tp.partition for tp in group.members["n0"].assigned} == {0, 1, 2}
    assert {tp.partition for tp in group.members[ids[1]].assigned} == {3, 4, 5}
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)
