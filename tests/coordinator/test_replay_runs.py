"""Replaying records a run at a time gives the shard replay() of each would give."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.coordinator import CoordinatorShard
from herdless.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_offset_commit_value,
    decode_offset_key_prefix,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    offset_commit_value_offset,
)
from tests.coordinator.snapshot import snapshot

GROUPS = ("g", "h")
TOPICS = ("t", "u")


def offset_key(group: str, topic: str, partition: int, version: int, tail: bytes) -> bytes:
    key = encode_key(OffsetCommitKey(group, topic, partition))
    return struct.pack(">h", version) + key[2:] + tail


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[bytes], list[bytes | None]]:
    """Mostly what loading hands over, one OffsetCommit's records; sometimes anything."""
    kind = draw(st.sampled_from(["commits", "commits", "tombstones", "mixed", "group", "odd"]))
    group, topic = draw(st.sampled_from(GROUPS)), draw(st.sampled_from(TOPICS))
    partitions = draw(st.lists(st.integers(0, 5), min_size=1, max_size=8))
    version = draw(st.sampled_from([0, 1]))
    keys = [offset_key(group, topic, p, version, b"") for p in partitions]
    if kind == "odd":
        # Keys a run must not be taken for: other groups, trailing bytes, other types.
        keys = [
            draw(
                st.sampled_from(
                    [
                        key,
                        offset_key(draw(st.sampled_from(GROUPS)), topic, 0, version, b""),
                        offset_key(group, topic, 0, version, b"\x00\x00\x00\x07"),
                        b"\x00\x11\x00\x01g\x00\x01m\x00\x00\x00\x01",
                    ]
                )
            )
            for key in keys
        ]
    if kind == "group":
        keys = [encode_key(GroupMetadataKey(group))] * len(keys)
        empty = encode_group_metadata_value(GroupMetadataValue("consumer", 1, None, None))
        values = [draw(st.sampled_from([None, empty])) for _ in keys]
        return keys, values
    commits = [
        encode_offset_commit_value(
            OffsetCommitValue(draw(st.integers(0, 99)), "", 5), draw(st.sampled_from([1, 3]))
        )
        for _ in keys
    ]
    if kind == "tombstones":
        return keys, [None] * len(keys)
    if kind == "mixed":
        return keys, [draw(st.sampled_from([None, c])) for c in commits]
    return keys, list(commits)


@settings(max_examples=200, deadline=None)
@given(st.lists(runs(), max_size=12))
def test_replaying_runs_equals_replaying_each_record(
    log: list[tuple[list[bytes], list[bytes | None]]],
) -> None:
    one_by_one, by_runs = CoordinatorShard(), CoordinatorShard()
    for keys, values in log:
        for key, value in zip(keys, values, strict=True):
            one_by_one.replay(key, value)
        by_runs.replay_records(tuple(keys), tuple(values))
    assert snapshot(by_runs) == snapshot(one_by_one)


def test_a_run_of_commits_creates_its_group_and_the_last_value_wins() -> None:
    shard = CoordinatorShard()
    keys = tuple(offset_key("g", "t", p, 1, b"") for p in (0, 1, 0))
    values = tuple(encode_offset_commit_value(OffsetCommitValue(o, "", 5)) for o in (7, 8, 9))
    shard.replay_records(keys, values)
    assert "g" in shard.groups
    assert [(p, o.offset) for _, p, o in shard.offsets.entries("g")] == [(0, 9), (1, 8)]
    shard.replay_records(keys[:2], (None, None))
    assert not shard.offsets.has_group("g") and "g" in shard.groups


@settings(deadline=None)
@given(st.text(max_size=12), st.text(max_size=12), st.integers(-(2**31), 2**31 - 1), st.data())
def test_a_key_prefix_reads_as_decode_key_reads_the_key(
    group: str, topic: str, partition: int, data: st.DataObject
) -> None:
    key = offset_key(group, topic, partition, data.draw(st.integers(-1, 3)), b"")
    # Damage it, or not: a prefix read must never disagree with decode_key.
    key = data.draw(st.sampled_from([key, key + b"\x00\x00\x00\x01", key[:-5], key[:3]]))
    if data.draw(st.booleans()) and len(key) > 4:
        at = data.draw(st.integers(0, len(key) - 1))
        key = key[:at] + bytes([data.draw(st.integers(0, 255))]) + key[at + 1 :]
    head = decode_offset_key_prefix(key[:-4])
    if head is not None:
        assert decode_key(key) == OffsetCommitKey(*head, int.from_bytes(key[-4:], signed=True))


@settings(deadline=None)
@given(st.integers(0, 4), st.integers(-(2**63), 2**63 - 1), st.text(max_size=5), st.data())
def test_the_offset_alone_reads_as_the_whole_value(
    version: int, offset: int, metadata: str, data: st.DataObject
) -> None:
    whole = encode_offset_commit_value(
        OffsetCommitValue(
            offset, metadata, 9, 3 if version >= 3 else -1, 11 if version == 1 else -1
        ),
        version,
    )
    value = whole[: data.draw(st.integers(10, len(whole)))]
    try:
        expected: int | type[RecordFormatError] = decode_offset_commit_value(value).offset
    except RecordFormatError:
        expected = RecordFormatError  # a torn value: the offset may still be whole
    if expected is not RecordFormatError:
        assert offset_commit_value_offset(value) == expected
    for bad in (value[:9], b"\x00\x05" + value[2:]):
        try:
            offset_commit_value_offset(bad)
        except RecordFormatError:
            continue
        raise AssertionError(f"{bad!r} read as an offset")
