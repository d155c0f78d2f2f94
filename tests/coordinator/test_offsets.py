"""OffsetCommit, OffsetFetch, OffsetDelete, expiry (KIP-211), DeleteGroups, List/Describe."""

from __future__ import annotations

from herdless.coordinator import CoordinatorConfig, GroupState, TimerKey, TimerKind
from herdless.coordinator.messages import (
    DeleteGroupsResponse,
    FetchedPartition,
    FetchedTopic,
    LeavingMember,
    ListedGroup,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionError,
    TopicErrors,
)
from herdless.coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    group_metadata_record,
    offset_commit_record,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import Context

DAY = 24 * 3600 * 1000


def _errors(response: OffsetCommitResponse) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p.partition): p.error_code for t in response.topics for p in t.partitions}


def test_simple_commit_creates_group_writes_record_and_fetches() -> None:
    ctx = Context(now_ms=5, wall_ms=42)  # the commit time is written: the wall clock's
    response, result = ctx.commit("g", {("t", 0): 10, ("t", 1): 20}, metadata="meta")
    assert response == OffsetCommitResponse(
        (TopicErrors("t", (PartitionError(0, ErrorCode.NONE), PartitionError(1, ErrorCode.NONE))),)
    )
    assert result.records == [
        offset_commit_record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(10, "meta", 42)),
        offset_commit_record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(20, "meta", 42)),
    ]
    assert ctx.shard.groups["g"].state is GroupState.EMPTY
    assert ctx.fetch("g", {"t": [0, 5]}) == OffsetFetchResponse(
        "g",
        (
            FetchedTopic(
                "t", (FetchedPartition(0, 10, -1, "meta"), FetchedPartition(5, -1, -1, ""))
            ),
        ),
    )
    assert ctx.committed("g") == {("t", 0): 10, ("t", 1): 20}
    assert ctx.fetch("unknown") == OffsetFetchResponse("unknown", ())
    assert ctx.fetch("unknown", {"t": [0]}).topics[0].partitions[0].offset == -1


def test_commit_metadata_too_large_is_per_partition() -> None:
    ctx = Context()
    response, result = ctx.commit("g", {("t", 0): 1}, metadata="x" * 4097)
    assert _errors(response) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert result.records == []
    response, _ = ctx.commit("g", {("t", 0): 1}, metadata="x" * 4096)
    assert _errors(response) == {("t", 0): ErrorCode.NONE}
    # Java counts UTF-16 units: 2049 emoji are 4098 units.
    response, _ = ctx.commit("g", {("t", 0): 1}, metadata="\U0001f600" * 2049)
    assert _errors(response) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}


def test_member_commit_fencing() -> None:
    ctx = Context()
    a, b = ctx.stable_group("g", 2)
    ok = {("t", 0): ErrorCode.NONE}

    def err(**kw: object) -> dict[tuple[str, int], ErrorCode]:
        return _errors(ctx.commit("g", {("t", 0): 5}, **kw)[0])

    assert err(generation=1, member_id=a) == ok
    assert err(generation=0, member_id=a) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert err(generation=1, member_id="x") == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # A simple commit to a group with members is refused.
    assert err() == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    ctx.join("g", a)  # PreparingRebalance: commits of the old generation still go in
    assert err(generation=1, member_id=b) == ok
    ctx.join("g", b)  # CompletingRebalance
    assert err(generation=2, member_id=b) == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    # Unknown group with a generation: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND after.
    assert _errors(ctx.commit("nope", {("t", 0): 1}, generation=1, member_id="m")[0]) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert _errors(
        ctx.commit("nope", {("t", 0): 1}, generation=1, member_id="m", version=9)[0]
    ) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    assert _errors(ctx.commit("", {("t", 0): 1})[0]) == {("t", 0): ErrorCode.INVALID_GROUP_ID}


def test_static_member_commit_fenced() -> None:
    ctx = Context()
    a, _ = ctx.stable_group("g", 2, static=True)
    response, _ = ctx.commit("g", {("t", 0): 1}, generation=1, member_id="old", instance_id="i0")
    assert _errors(response) == {("t", 0): ErrorCode.FENCED_INSTANCE_ID}


def test_commit_keeps_the_session_alive() -> None:
    ctx = Context()
    (a,) = ctx.stable_group("g", 1)
    for _ in range(5):
        ctx.sleep(9_000)
        ctx.commit("g", {("t", 0): 1}, generation=1, member_id=a)
    assert a in ctx.shard.groups["g"].members


def test_offset_delete() -> None:
    ctx = Context()
    response, _ = ctx.offset_delete("nope", {"t": [0]})
    assert response == OffsetDeleteResponse(ErrorCode.GROUP_ID_NOT_FOUND)
    a, _ = ctx.stable_group("g", 2)
    ctx.commit("g", {("t", 0): 1, ("old", 0): 2}, generation=1, member_id=a)
    response, result = ctx.offset_delete("g", {"t": [0], "old": [0, 1]})
    assert response == OffsetDeleteResponse(
        ErrorCode.NONE,
        (
            TopicErrors("t", (PartitionError(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),)),
            TopicErrors(
                "old", (PartitionError(0, ErrorCode.NONE), PartitionError(1, ErrorCode.NONE))
            ),
        ),
    )
    assert result.records == [offset_commit_record(OffsetCommitKey("g", "old", 0), None)]
    assert ctx.committed("g") == {("t", 0): 1}


def test_offset_delete_non_consumer_group_with_members_is_refused() -> None:
    ctx = Context()
    ctx.stable_group("g", 1, protocol_type="connect")
    response, _ = ctx.offset_delete("g", {"t": [0]})
    assert response == OffsetDeleteResponse(ErrorCode.NON_EMPTY_GROUP)


def test_delete_groups() -> None:
    ctx = Context()
    ctx.stable_group("live", 1)
    ctx.commit("simple", {("t", 0): 1})
    response, result = ctx.delete_groups("live", "simple", "nope", "")
    assert response == DeleteGroupsResponse(
        (
            ("live", ErrorCode.NON_EMPTY_GROUP),
            ("simple", ErrorCode.NONE),
            ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
            ("", ErrorCode.INVALID_GROUP_ID),
        )
    )
    assert result.records == [
        offset_commit_record(OffsetCommitKey("simple", "t", 0), None),
        group_metadata_record(GroupMetadataKey("simple"), None),
    ]
    assert "simple" not in ctx.shard.groups
    assert ctx.committed("simple") == {}


def test_list_and_describe_groups() -> None:
    ctx = Context()
    a, b = ctx.stable_group("s", 2)
    ctx.commit("e", {("t", 0): 1})
    ctx.join("p")  # a pending member only: Empty
    assert set(ctx.list_groups()) == {
        ListedGroup("s", "consumer", "Stable"),
        ListedGroup("e", "", "Empty"),
        ListedGroup("p", "", "Empty"),
    }
    assert ctx.list_groups("STABLE") == (ListedGroup("s", "consumer", "Stable"),)
    d = ctx.describe("s")
    assert (d.group_state, d.protocol_type, d.protocol_data, d.generation_id) == (
        "Stable",
        "consumer",
        "range",
        1,
    )
    assert [m.member_id for m in d.members] == [a, b] and d.members[0].member_assignment
    ctx.join("s", a)
    d = ctx.describe("s")
    assert d.group_state == "PreparingRebalance" and d.protocol_data == ""
    assert d.members[0].member_metadata == b"" and d.members[0].member_assignment == b""
    assert ctx.describe("nope").group_state == "Dead"
    assert ctx.describe("nope").error_code is ErrorCode.NONE
    assert ctx.describe("nope", version=6).error_code is ErrorCode.GROUP_ID_NOT_FOUND


# --- expiry (KIP-211) --------------------------------------------------------------


def test_standalone_offsets_expire_retention_after_commit_and_the_group_goes() -> None:
    ctx = Context(CoordinatorConfig(initial_rebalance_delay_ms=0))
    ctx.commit("g", {("t", 0): 1})
    ctx.sleep(DAY)
    ctx.commit("g", {("t", 1): 2})
    ctx.sleep(6 * DAY)  # t-0 is 7 days old; the check runs every 10 minutes
    assert ctx.committed("g") == {("t", 1): 2}
    result = ctx.sleep(DAY)
    assert offset_commit_record(OffsetCommitKey("g", "t", 1), None) in result.records
    assert group_metadata_record(GroupMetadataKey("g"), None) in result.records
    assert "g" not in ctx.shard.groups
    assert TimerKey(TimerKind.RETENTION) in ctx.timers


def test_consumer_group_offsets_expire_retention_after_it_became_empty() -> None:
    ctx = Context()
    (a,) = ctx.stable_group("g", 1, session_ms=1_800_000)
    ctx.commit("g", {("t", 0): 1}, generation=1, member_id=a)
    for _ in range(8 * 24 * 3):  # a live member for 8 days: nothing expires
        ctx.sleep(1_200_000)
        assert ctx.heartbeat("g", a, 1) is ErrorCode.NONE
    assert ctx.committed("g") == {("t", 0): 1}
    ctx.leave("g", LeavingMember(a))
    assert ctx.shard.groups["g"].state is GroupState.EMPTY
    ctx.sleep(7 * DAY - 600_000)
    assert ctx.committed("g") == {("t", 0): 1}
    ctx.sleep(600_000)  # the next check at or after 7 days since the group emptied
    assert ctx.committed("g") == {}
    assert "g" not in ctx.shard.groups


def test_offsets_with_explicit_retention_expire_at_their_own_deadline() -> None:
    ctx = Context()
    ctx.commit("g", {("t", 0): 1}, retention_ms=1000, version=2)
    assert ctx.log[-1].value[:2] == b"\x00\x01"  # written as OffsetCommitValue v1
    ctx.sleep(600_000)
    assert ctx.committed("g") == {}


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    ctx = Context()
    (a,) = ctx.stable_group("g", 1, session_ms=1_800_000)
    ctx.commit("g", {("t", 0): 1, ("gone", 0): 2}, generation=1, member_id=a)
    for _ in range(8 * 24 * 3):
        ctx.sleep(1_200_000)
        assert ctx.heartbeat("g", a, 1) is ErrorCode.NONE
    assert ctx.committed("g") == {("t", 0): 1}
