"""Consumer groups (KIP-848) beside the rest of the shard: offsets, listing, describing,
deleting, expiry, regular expressions, and group ids shared with classic groups."""

from __future__ import annotations

import uuid
from dataclasses import replace

from herdless.coordinator import TimerKey, TimerKind
from herdless.coordinator.config import ConsumerGroupMigrationPolicy
from herdless.coordinator.consumer_group import ConsumerGroupState
from herdless.coordinator.consumer_records import (
    ConsumerGroupMetadataKey,
    decode_consumer_group_key,
)
from herdless.coordinator.group_config import (
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    GroupConfigs,
)
from herdless.coordinator.messages import FetchTopic, OffsetFetchRequest
from herdless.coordinator.reconciliation import MemberState
from herdless.coordinator.records import GroupMetadataKey, decode_key
from herdless.coordinator.topic_metadata import TopicIdPartition, TopicMetadata, TopicsImage
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, TOPIC_T, TOPIC_U, Context
from tests.coordinator.snapshot import snapshot

DAY_MS = 24 * 3600 * 1000


def stable_group(ctx: Context) -> None:
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)
    ctx.consumer_heartbeat("g", "m1", 1)
    ctx.consumer_heartbeat("g", "m1", 1, owned=ctx.shard.consumer.groups["g"].target_of("m1"))
    ctx.consumer_heartbeat("g", "m2", 2)


def fetch(ctx: Context, member_id: str | None, epoch: int) -> object:
    req = OffsetFetchRequest("g", (FetchTopic("t", (0,)),), member_id=member_id, member_epoch=epoch)
    token, result = ctx.send(lambda s, t, now: s.offset_fetch(req, t, now))
    return result.reply_to(token)


# --- offsets ---------------------------------------------------------------------------


def test_members_commit_with_their_member_epoch() -> None:
    ctx = Context()
    stable_group(ctx)
    resp, _ = ctx.commit("g", {("t", 0): 5}, generation=2, member_id="m1", version=9)
    assert resp.topics[0].partitions[0].error_code is ErrorCode.NONE
    assert ctx.committed("g") == {("t", 0): 5}
    for fields, error in (
        ({"generation": 1, "member_id": "m1", "version": 9}, ErrorCode.STALE_MEMBER_EPOCH),
        ({"generation": 2, "member_id": "zz", "version": 9}, ErrorCode.UNKNOWN_MEMBER_ID),
        ({"generation": 2, "member_id": "m1", "version": 8}, ErrorCode.UNSUPPORTED_VERSION),
        ({"generation": -1, "member_id": "", "version": 9}, ErrorCode.UNKNOWN_MEMBER_ID),
    ):
        resp, result = ctx.commit("g", {("t", 0): 7}, **fields)  # type: ignore[arg-type]
        assert resp.topics[0].partitions[0].error_code is error, fields
        assert result.records == []
    assert "g" not in ctx.shard.groups  # no classic group appears beside it


def test_an_empty_group_takes_commits_from_anyone() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m1", -1)
    resp, _ = ctx.commit("g", {("t", 0): 3})
    assert resp.topics[0].partitions[0].error_code is ErrorCode.NONE


def test_members_fetch_with_their_member_epoch_and_anyone_else_without() -> None:
    ctx = Context()
    stable_group(ctx)
    ctx.commit("g", {("t", 0): 5}, generation=2, member_id="m1", version=9)
    assert fetch(ctx, "m1", 2).topics[0].partitions[0].offset == 5  # type: ignore[attr-defined]
    assert fetch(ctx, None, -1).topics[0].partitions[0].offset == 5  # type: ignore[attr-defined]
    assert fetch(ctx, "m1", 1).error_code is ErrorCode.STALE_MEMBER_EPOCH  # type: ignore[attr-defined]
    assert fetch(ctx, "zz", 2).error_code is ErrorCode.UNKNOWN_MEMBER_ID  # type: ignore[attr-defined]


def test_offsets_of_subscribed_topics_cannot_be_deleted() -> None:
    ctx = Context()
    stable_group(ctx)
    ctx.commit("g", {("t", 0): 5, ("u", 1): 2}, generation=2, member_id="m1", version=9)
    resp, _ = ctx.offset_delete("g", {"t": [0], "u": [1]})
    assert resp.error_code is ErrorCode.NONE
    errors = {t.name: t.partitions[0].error_code for t in resp.topics}
    assert errors == {"t": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "u": ErrorCode.NONE}
    assert ctx.committed("g") == {("t", 0): 5}


def test_offsets_expire_unless_subscribed_and_an_empty_group_goes_with_them() -> None:
    # Sessions of a day: the members heartbeat every hour of the week that follows.
    ctx = Context(replace(TEST_CONFIG, consumer_session_timeout_ms=DAY_MS))
    stable_group(ctx)
    ctx.commit("g", {("t", 0): 5, ("u", 1): 2}, generation=2, member_id="m1", version=9)
    for _ in range(7 * 24 + 1):
        ctx.sleep(3_600_000)
        ctx.consumer_heartbeat("g", "m1", 2)
        ctx.consumer_heartbeat("g", "m2", 2)
    assert ctx.committed("g") == {("t", 0): 5}
    ctx.consumer_heartbeat("g", "m1", -1)
    ctx.consumer_heartbeat("g", "m2", -1)
    ctx.sleep(7 * DAY_MS + 600_000)
    assert "g" not in ctx.shard.consumer.groups
    assert ctx.committed("g") == {}


# --- listing, describing, deleting ----------------------------------------------------------


def test_list_groups_by_type_and_state() -> None:
    ctx = Context()
    stable_group(ctx)
    ctx.commit("simple", {("t", 0): 1})
    listed = {(g.group_id, g.group_type, g.group_state) for g in ctx.list_groups()}
    assert listed == {("g", "consumer", "Stable"), ("simple", "classic", "Empty")}
    token = ctx.token()
    result = ctx.apply(ctx.shard.list_groups(token, (), ("Consumer",)))
    assert [g.group_id for g in result.reply_to(token)] == ["g"]
    result = ctx.apply(ctx.shard.list_groups(token, ("empty",), ()))
    assert [g.group_id for g in result.reply_to(token)] == ["simple"]
    result = ctx.apply(ctx.shard.list_groups(token, (), ("share",)))
    assert result.reply_to(token) == ()


def test_describe_names_members_assignments_and_targets() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0, server_assignor="range", instance_id="i1")
    ctx.consumer_heartbeat("g", "m2", 0)
    (described,) = ctx.consumer_describe("g")
    assert (described.error_code, described.group_state) == (ErrorCode.NONE, "Reconciling")
    assert (described.group_epoch, described.assignment_epoch) == (2, 2)
    assert described.assignor_name == "range"
    m1, m2 = described.members
    assert (m1.member_id, m1.instance_id, m1.member_epoch) == ("m1", "i1", 1)
    assert m1.subscribed_topic_names == ("t",)
    assert [(a.topic_name, a.partitions) for a in m1.assignment] == [("t", (0, 1, 2, 3, 4, 5))]
    assert [(a.topic_name, a.partitions) for a in m1.target_assignment] == [("t", (0, 1, 2))]
    assert (m2.assignment, m2.target_assignment[0].partitions) == ((), (3, 4, 5))
    assert (m1.member_state, m1.pending_revocation) == (MemberState.STABLE, ())
    assert m2.member_state == MemberState.UNRELEASED_PARTITIONS
    ctx.consumer_heartbeat("g", "m1", 1)  # told to revoke 3-5: it keeps 0-2 meanwhile
    m1, _ = ctx.consumer_describe("g")[0].members
    assert (m1.member_state, m1.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 1)
    assert [(a.topic_name, a.partitions) for a in m1.assignment] == [("t", (0, 1, 2))]
    assert [(a.topic_name, a.partitions) for a in m1.pending_revocation] == [("t", (3, 4, 5))]
    classic_and_unknown = ctx.consumer_describe("", "nope")
    assert [d.error_code for d in classic_and_unknown] == [
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.GROUP_ID_NOT_FOUND,
    ]
    # The classic DescribeGroups does not know consumer groups.
    assert ctx.describe("g").group_state == "Dead"


def test_only_an_empty_group_is_deleted_and_it_leaves_nothing_behind() -> None:
    ctx = Context()
    stable_group(ctx)
    ctx.commit("g", {("t", 0): 5}, generation=2, member_id="m1", version=9)
    resp, result = ctx.delete_groups("g")
    assert resp.results == (("g", ErrorCode.NON_EMPTY_GROUP),) and result.records == []
    ctx.consumer_heartbeat("g", "m1", -1)
    ctx.consumer_heartbeat("g", "m2", -1)
    resp, result = ctx.delete_groups("g")
    assert resp.results == (("g", ErrorCode.NONE),)
    assert all(r.value is None for r in result.records)
    assert "g" not in ctx.shard.consumer.groups and ctx.committed("g") == {}
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


# --- classic and consumer groups share ids ---------------------------------------------------


def test_a_consumer_group_takes_over_an_empty_classic_group_keeping_its_offsets() -> None:
    ctx = Context()
    ctx.commit("g", {("t", 0): 5})  # a simple classic group
    resp, result = ctx.consumer_heartbeat("g", "m1", 0)
    assert resp.error_code is ErrorCode.NONE
    assert decode_key(result.records[0].key) == GroupMetadataKey("g")
    assert result.records[0].value is None
    assert "g" not in ctx.shard.groups and ctx.committed("g") == {("t", 0): 5}
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


def test_a_live_classic_group_is_not_a_consumer_group_when_upgrades_are_off() -> None:
    # (With upgrades on, group_conversion.py's tests.)
    ctx = Context(
        replace(TEST_CONFIG, consumer_migration_policy=ConsumerGroupMigrationPolicy.DOWNGRADE)
    )
    ctx.stable_group("g", 1)
    resp, result = ctx.consumer_heartbeat("g", "m1", 0)
    assert (resp.error_code, result.records) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    assert resp.error_message == "Group g is not a consumer group."


def test_a_classic_member_joins_an_empty_consumer_group_as_a_classic_group() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    token, result = ctx.join("g")
    # A live one takes it in as a member speaking the classic protocol (classic_members.py).
    assert ctx.replies[token].error_code is ErrorCode.MEMBER_ID_REQUIRED and not result.records
    assert "g" in ctx.shard.consumer.groups
    ctx.consumer_heartbeat("g", "m1", -1)
    token, result = ctx.join("g")
    assert ctx.replies[token].error_code is ErrorCode.MEMBER_ID_REQUIRED
    assert decode_consumer_group_key(result.records[-2].key) == ConsumerGroupMetadataKey("g")
    assert "g" in ctx.shard.groups and "g" not in ctx.shard.consumer.groups
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)


# --- regular expressions -----------------------------------------------------------------------


def test_a_regex_subscribes_to_every_topic_it_matches_and_to_new_ones() -> None:
    ctx = Context()
    ctx.topics = TopicsImage([TOPIC_T, TOPIC_U], version=1)
    resp, _ = ctx.consumer_heartbeat("g", "m1", 0, subscribed_topic_regex="[tu]")
    assert resp.assignment == frozenset(
        TopicIdPartition(t.topic_id, p) for t in (TOPIC_T, TOPIC_U) for p in range(t.num_partitions)
    )
    group = ctx.shard.consumer.groups["g"]
    assert group.resolved_regexes["[tu]"].topics == ("t", "u")
    assert group.is_subscribed_to_topic("u")

    w = TopicMetadata(uuid.UUID(int=0x77), "w", 1)
    tu = TopicMetadata(uuid.UUID(int=0x78), "tu", 1)  # not a full match: not taken
    ctx.topics = TopicsImage([TOPIC_T, TOPIC_U, w, tu], version=2)
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert resp.member_epoch == 1 and resp.assignment is None
    ctx.topics = TopicsImage([TOPIC_T, w], version=3)  # u deleted
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert group.resolved_regexes["[tu]"].topics == ("t",)
    t_only = frozenset(TopicIdPartition(TOPIC_T.topic_id, p) for p in range(6))
    assert (resp.member_epoch, resp.assignment) == (1, t_only)  # u's to revoke first
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1, owned=t_only)
    assert resp.member_epoch == 2
    assert snapshot(ctx.replayed(ctx.log)) == snapshot(ctx.shard)

    resp, _ = ctx.consumer_heartbeat("g", "m1", 2, subscribed_topic_regex="")
    assert "[tu]" not in group.resolved_regexes
    assert group.state is not ConsumerGroupState.STABLE or not group.subscribed_topic_names()


def test_an_invalid_regex_is_refused() -> None:
    ctx = Context()
    resp, result = ctx.consumer_heartbeat("g", "m1", 0, subscribed_topic_regex="(t")
    assert resp.error_code is ErrorCode.INVALID_REGULAR_EXPRESSION and result.records == []


def test_a_groups_own_session_and_heartbeat_interval_apply_from_its_next_heartbeat() -> None:
    ctx = Context(replace(TEST_CONFIG, group_configs=GroupConfigs()))
    resp, _ = ctx.consumer_heartbeat("g", "m1", 0)
    assert resp.heartbeat_interval_ms == TEST_CONFIG.consumer_heartbeat_interval_ms
    ctx.config.group_configs.put(
        "g", {CONSUMER_SESSION_TIMEOUT_MS: "8000", CONSUMER_HEARTBEAT_INTERVAL_MS: "700"}
    )
    ctx.sleep(100)
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert resp.heartbeat_interval_ms == 700
    assert ctx.timers[TimerKey(TimerKind.SESSION, "g", "m1")] == 100 + 8_000
    other, _ = ctx.consumer_heartbeat("h", "m1", 0)
    assert other.heartbeat_interval_ms == TEST_CONFIG.consumer_heartbeat_interval_ms
    ctx.sleep(8_000)
    assert "m1" not in ctx.shard.consumer.groups["g"].members
    assert "m1" in ctx.shard.consumer.groups["h"].members
