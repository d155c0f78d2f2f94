"""The offsets manager alone, with the groups it asks played by a stub: what it asks of
them, and what it does with each answer, for commits, fetches, deletes and expiry."""

from __future__ import annotations

from dataclasses import dataclass, field

from herdless.coordinator import CoordinatorConfig, Now, Result
from herdless.coordinator.messages import (
    FetchTopic,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    PartitionError,
)
from herdless.coordinator.offset_manager import OffsetManager, SubscribedGroup
from herdless.coordinator.records import OffsetCommitKey, decode_key, decode_offset_commit_value
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import commit_request

NOW = Now(wall_ms=1_763_900_000_000, monotonic_ms=5_000)
RETENTION_MS = 60_000


@dataclass
class Subscribed:
    group_id: str
    topics: frozenset[str] = frozenset()

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.topics


@dataclass
class StubGroups:
    """Answers as told, and remembers what it was asked."""

    commit_error: ErrorCode = ErrorCode.NONE
    fetch_answer: tuple[ErrorCode, bool] = (ErrorCode.NONE, True)
    delete_answer: tuple[ErrorCode, SubscribedGroup | None] = (ErrorCode.NONE, None)
    ensured: list[str] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)

    def ensure_group(self, group_id: str) -> None:
        self.ensured.append(group_id)

    def validate_offset_commit(self, req: OffsetCommitRequest) -> ErrorCode:
        return self.commit_error

    def offset_committed(self, out: Result, req: OffsetCommitRequest, now: Now) -> None:
        self.committed.append(req.member_id)

    def validate_offset_fetch(self, req: OffsetFetchRequest) -> tuple[ErrorCode, bool]:
        return self.fetch_answer

    def validate_offset_delete(self, group_id: str) -> tuple[ErrorCode, SubscribedGroup | None]:
        return self.delete_answer


def manager(groups: StubGroups) -> OffsetManager:
    return OffsetManager(CoordinatorConfig(offsets_retention_ms=RETENTION_MS), groups)


def commit(offsets: OffsetManager, **kw: object) -> Result:
    req = commit_request("g", {("t", 0): 5, ("t", 1): 7, ("u", 0): 9}, **kw)  # type: ignore[arg-type]
    return offsets.offset_commit(req, "token", NOW)


def test_a_commit_the_groups_refuse_writes_nothing_and_answers_every_partition() -> None:
    groups = StubGroups(commit_error=ErrorCode.ILLEGAL_GENERATION)
    offsets = manager(groups)
    result = commit(offsets, generation=3, member_id="m")
    assert result.records == [] and groups.committed == [] and groups.ensured == []
    (topic_t, topic_u) = result.reply_to("token").topics
    assert topic_t.partitions == (
        PartitionError(0, ErrorCode.ILLEGAL_GENERATION),
        PartitionError(1, ErrorCode.ILLEGAL_GENERATION),
    )
    assert topic_u.partitions == (PartitionError(0, ErrorCode.ILLEGAL_GENERATION),)
    assert not offsets.table.has_group("g")


def test_a_commit_the_groups_accept_is_written_stored_and_told_to_them() -> None:
    groups = StubGroups()
    offsets = manager(groups)
    result = commit(offsets, member_id="m")
    assert groups.committed == ["m"]
    assert groups.ensured == ["g", "g"]  # once a topic: the group holds offsets from now on
    keys = [decode_key(r.key) for r in result.records]
    assert keys == [
        OffsetCommitKey("g", "t", 0),
        OffsetCommitKey("g", "t", 1),
        OffsetCommitKey("g", "u", 0),
    ]
    values = [decode_offset_commit_value(r.value) for r in result.records if r.value is not None]
    assert [v.offset for v in values] == [5, 7, 9]
    assert {v.commit_timestamp for v in values} == {NOW.wall_ms}
    stored = offsets.table.get("g", "t", 1)
    assert stored is not None and stored.offset == 7


def test_a_commit_replayed_on_a_fresh_manager_gives_the_same_table() -> None:
    live = manager(StubGroups())
    written = commit(live).records
    loaded_groups = StubGroups()
    loaded = manager(loaded_groups)
    for record in written:
        key = decode_key(record.key)
        assert isinstance(key, OffsetCommitKey)
        loaded.replay(key, record.value)
    assert list(loaded.table.entries("g")) == list(live.table.entries("g"))
    assert loaded_groups.ensured == ["g", "g", "g"]


def test_a_fetch_shows_offsets_only_of_a_group_the_groups_call_known() -> None:
    groups = StubGroups()
    offsets = manager(groups)
    commit(offsets)
    every = OffsetFetchRequest("g")
    some = OffsetFetchRequest("g", (FetchTopic("t", (1, 2)),))
    shown = offsets.offset_fetch(every, "all", NOW).reply_to("all")
    assert [(t.name, [p.offset for p in t.partitions]) for t in shown.topics] == [
        ("t", [5, 7]),
        ("u", [9]),
    ]
    groups.fetch_answer = (ErrorCode.NONE, False)
    assert offsets.offset_fetch(every, "all", NOW).reply_to("all").topics == ()
    (hidden,) = offsets.offset_fetch(some, "some", NOW).reply_to("some").topics
    assert [p.offset for p in hidden.partitions] == [-1, -1]
    groups.fetch_answer = (ErrorCode.STALE_MEMBER_EPOCH, True)
    refused = offsets.offset_fetch(some, "some", NOW).reply_to("some")
    assert refused.error_code is ErrorCode.STALE_MEMBER_EPOCH and refused.topics == ()


def test_a_delete_keeps_the_offsets_of_topics_the_group_reads() -> None:
    groups = StubGroups(delete_answer=(ErrorCode.NONE, Subscribed("g", frozenset({"t"}))))
    offsets = manager(groups)
    commit(offsets)
    req = OffsetDeleteRequest("g", (FetchTopic("t", (0,)), FetchTopic("u", (0, 3))))
    result = offsets.offset_delete(req, "token", NOW)
    (topic_t, topic_u) = result.reply_to("token").topics
    assert topic_t.partitions == (PartitionError(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),)
    assert topic_u.partitions == (
        PartitionError(0, ErrorCode.NONE),
        PartitionError(3, ErrorCode.NONE),
    )
    # A tombstone for the one stored offset of u; none for partition 3, never committed.
    assert [(decode_key(r.key), r.value) for r in result.records] == [
        (OffsetCommitKey("g", "u", 0), None)
    ]
    assert offsets.table.get("g", "u", 0) is None and offsets.table.get("g", "t", 0) is not None

    groups.delete_answer = (ErrorCode.NON_EMPTY_GROUP, None)
    refused = offsets.offset_delete(req, "again", NOW)
    assert (
        refused.records == [] and refused.reply_to("again").error_code is ErrorCode.NON_EMPTY_GROUP
    )


def test_expiry_spares_subscribed_topics_and_says_when_the_group_has_none_left() -> None:
    offsets = manager(StubGroups())
    commit(offsets)
    later = Now(NOW.wall_ms + RETENTION_MS, NOW.monotonic_ms + RETENTION_MS)
    out = Result()
    reading_t = Subscribed("g", frozenset({"t"}))
    assert not offsets.expire(out, reading_t, lambda o: o.commit_timestamp_ms, later)
    assert [decode_key(r.key) for r in out.records] == [OffsetCommitKey("g", "u", 0)]
    # No base: nothing expires, whatever its age.
    assert not offsets.expire(out, Subscribed("g"), None, later)
    assert offsets.expire(out, Subscribed("g"), lambda o: o.commit_timestamp_ms, later)
    assert not offsets.table.has_group("g")
