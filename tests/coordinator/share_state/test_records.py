"""`__share_group_state` records against bytes laid out by hand from Kafka's JSON specs
(ShareSnapshotKey/Value, ShareUpdateKey/Value), and state batch merging."""

from __future__ import annotations

import struct
import uuid

import pytest

from herdless.coordinator.records import RecordFormatError
from herdless.coordinator.share_state import (
    RecordState,
    SharePartitionKey,
    StateBatch,
    coordinator_key,
    share_state_partition,
)
from herdless.coordinator.share_state.batches import merge_batches
from herdless.coordinator.share_state.records import (
    SHARE_SNAPSHOT_RECORD_TYPE,
    SHARE_UPDATE_RECORD_TYPE,
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    tombstones,
)

TOPIC_ID = uuid.UUID("0d3e6a4c-2f0b-4c9e-9d1a-8b7c6d5e4f30")
KEY = SharePartitionKey("g", TOPIC_ID, 3)
A, ACK, ARC = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED


def test_keys_are_the_record_type_then_a_plain_struct() -> None:
    body = b"\x00\x01g" + TOPIC_ID.bytes + struct.pack(">i", 3)
    assert encode_key(SHARE_SNAPSHOT_RECORD_TYPE, KEY) == b"\x00\x00" + body
    assert encode_key(SHARE_UPDATE_RECORD_TYPE, KEY) == b"\x00\x01" + body
    assert decode_key(b"\x00\x01" + body) == (SHARE_UPDATE_RECORD_TYPE, KEY)
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x07" + body)


def test_a_snapshot_value_is_flexible_with_its_batches_and_times() -> None:
    value = ShareSnapshotValue(2, 1, 5, 100, 1_700, 1_800, (StateBatch(100, 104, ACK, 1),))
    expected = (
        struct.pack(">hiiiqqq", 0, 2, 1, 5, 100, 1_700, 1_800)
        + b"\x02"  # compact array of one
        + struct.pack(">qqbh", 100, 104, 2, 1)
        + b"\x00"  # the batch's tagged fields
        + b"\x00"  # the value's tagged fields
    )
    assert encode_value(value) == expected
    assert decode_value(SHARE_SNAPSHOT_RECORD_TYPE, expected) == value


def test_an_update_value_carries_no_state_epoch_and_may_keep_the_start() -> None:
    value = ShareUpdateValue(2, 5, -1, (StateBatch(7, 7, ARC, 3),))
    expected = (
        struct.pack(">hiiq", 0, 2, 5, -1) + b"\x02" + struct.pack(">qqbh", 7, 7, 4, 3) + b"\x00\x00"
    )
    assert encode_value(value) == expected
    assert decode_value(SHARE_UPDATE_RECORD_TYPE, expected) == value


def test_tagged_fields_of_newer_versions_are_read_past() -> None:
    # KIP-1226 adds a tagged delivery-complete count: tag 0, 4 bytes.
    data = struct.pack(">hiiq", 0, 0, 1, 10) + b"\x01" + b"\x01\x00\x04" + b"\x00\x00\x00\x09"
    assert decode_value(SHARE_UPDATE_RECORD_TYPE, data) == ShareUpdateValue(0, 1, 10, ())


def test_a_value_that_lies_is_a_format_error() -> None:
    with pytest.raises(RecordFormatError):
        decode_value(SHARE_UPDATE_RECORD_TYPE, struct.pack(">hii", 0, 0, 1))
    with pytest.raises(RecordFormatError):
        decode_value(SHARE_UPDATE_RECORD_TYPE, struct.pack(">hiiq", 3, 0, 1, 1) + b"\x01\x00")
    bad_state = struct.pack(">hiiq", 0, 0, 1, 1) + b"\x02" + struct.pack(">qqbh", 1, 1, 9, 1)
    with pytest.raises(RecordFormatError):
        decode_value(SHARE_UPDATE_RECORD_TYPE, bad_state + b"\x00\x00")


def test_deleting_writes_a_tombstone_for_both_keys() -> None:
    records = tombstones(KEY)
    assert [decode_key(r.key)[0] for r in records] == [0, 1]
    assert all(r.value is None for r in records)


def test_placement_hashes_kafkas_coordinator_key() -> None:
    # Kafka's Uuid.toString of TOPIC_ID, and Java's String.hashCode of the whole key.
    assert coordinator_key(KEY) == "g:DT5qTC8LTJ6dGot8bV5PMA:3"
    h = 0
    for ch in coordinator_key(KEY):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - 2**32 if h >= 2**31 else h
    assert share_state_partition(KEY, 50) == abs(h) % 50


# -- merging batches -------------------------------------------------------------------


def b(first: int, last: int, state: RecordState = A, count: int = 1) -> StateBatch:
    return StateBatch(first, last, state, count)


def test_a_later_batch_wins_where_it_overlaps() -> None:
    merged = merge_batches([b(0, 9)], [b(3, 5, ACK)], 0)
    assert merged == (b(0, 2), b(3, 5, ACK), b(6, 9))


def test_offsets_below_the_start_offset_are_dropped() -> None:
    assert merge_batches([b(0, 9, ACK)], [b(10, 12)], 5) == (b(5, 9, ACK), b(10, 12))
    assert merge_batches([b(0, 4)], [], 5) == ()


def test_neighbours_alike_become_one_batch() -> None:
    assert merge_batches([b(0, 4, ACK)], [b(5, 9, ACK), b(10, 10, ACK, 2)], 0) == (
        b(0, 9, ACK),
        b(10, 10, ACK, 2),
    )


def test_overlaps_within_one_write_keep_the_last() -> None:
    assert merge_batches([], [b(0, 9, ACK), b(2, 3, ARC, 5), b(0, 0)], 0) == (
        b(0, 0),
        b(1, 1, ACK),
        b(2, 3, ARC, 5),
        b(4, 9, ACK),
    )
