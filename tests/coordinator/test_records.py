from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herdless.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)

# Hand-assembled from Kafka's JSON schemas: int16 version, then the fields, strings
# as int16 length + UTF-8, nullable strings with length -1.
OFFSET_KEY_BYTES = bytes.fromhex("000100016700017400000007")
OFFSET_VALUE_V3_BYTES = bytes.fromhex("000300000000000000050000000200016d00000000000003e8")
GROUP_KEY_BYTES = bytes.fromhex("000200026731")
GROUP_VALUE_V3_BYTES = bytes.fromhex(
    "0003"
    "0008" + b"consumer".hex() + "00000003"  # protocol type, generation
    "0005"
    + b"range".hex()
    + "0002"
    + b"m1".hex()  # protocol, leader
    + "0000000000000064"  # current state timestamp
    "00000001"  # one member
    "0002" + b"m1".hex() + "ffff"  # member id, null instance id
    "0002"
    + b"c1".hex()
    + "0002"
    + b"/h".hex()  # client id, host
    + "00007530"
    "00002710"  # rebalance 30000, session 10000
    "00000001"
    "aa"
    "00000002"
    "bbcc"  # subscription, assignment
)


def test_offset_commit_key_bytes() -> None:
    key = OffsetCommitKey("g", "t", 7)
    assert encode_key(key) == OFFSET_KEY_BYTES
    assert decode_key(OFFSET_KEY_BYTES) == key
    # Version 0 keys (very old Kafka) decode the same way.
    assert decode_key(b"\x00\x00" + OFFSET_KEY_BYTES[2:]) == key


def test_offset_commit_value_v3_bytes() -> None:
    value = OffsetCommitValue(offset=5, metadata="m", commit_timestamp=1000, leader_epoch=2)
    assert encode_offset_commit_value(value) == OFFSET_VALUE_V3_BYTES
    assert decode_offset_commit_value(OFFSET_VALUE_V3_BYTES) == value


def test_offset_commit_value_v3_without_metadata_bytes() -> None:
    # What nearly every commit writes, packed in one go: the same layout, length 0.
    value = OffsetCommitValue(offset=5, metadata="", commit_timestamp=1000, leader_epoch=-1)
    data = bytes.fromhex("00030000000000000005ffffffff000000000000000003e8")
    assert encode_offset_commit_value(value) == data
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_with_expiry_is_written_as_v1() -> None:
    value = OffsetCommitValue(5, "m", 1000, expire_timestamp=2000)
    data = encode_offset_commit_value(value)
    assert data == bytes.fromhex("0001000000000000000500016d00000000000003e800000000000007d0")
    # v1 has no leader epoch
    assert decode_offset_commit_value(data) == OffsetCommitValue(5, "m", 1000, -1, 2000)


def test_group_metadata_key_and_value_bytes() -> None:
    assert encode_key(GroupMetadataKey("g1")) == GROUP_KEY_BYTES
    assert decode_key(GROUP_KEY_BYTES) == GroupMetadataKey("g1")
    value = GroupMetadataValue(
        "consumer",
        3,
        "range",
        "m1",
        100,
        (MemberMetadata("m1", None, "c1", "/h", 30000, 10000, b"\xaa", b"\xbb\xcc"),),
    )
    assert encode_group_metadata_value(value) == GROUP_VALUE_V3_BYTES
    assert decode_group_metadata_value(GROUP_VALUE_V3_BYTES) == value


def test_unknown_record_types_decode_to_none() -> None:
    # Key versions 3+ are KIP-848 consumer group records etc.
    assert decode_key(b"\x00\x03\x00\x01g") is None


def test_truncated_and_bad_versions_raise() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(OFFSET_KEY_BYTES[:-1])
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(b"\x00\x05" + OFFSET_VALUE_V3_BYTES[2:])
    with pytest.raises(RecordFormatError):
        decode_group_metadata_value(GROUP_VALUE_V3_BYTES[:-3])


names = st.text(max_size=20)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, ints32)
def test_key_round_trip(group: str, topic: str, partition: int) -> None:
    for key in (OffsetCommitKey(group, topic, partition), GroupMetadataKey(group)):
        assert decode_key(encode_key(key)) == key


@given(st.integers(0, 4), ints64, names, ints64, ints32, ints64)
def test_offset_value_round_trip(
    version: int, offset: int, metadata: str, commit: int, epoch: int, expire: int
) -> None:
    value = OffsetCommitValue(
        offset,
        metadata,
        commit,
        leader_epoch=epoch if version >= 3 else -1,
        expire_timestamp=expire if version == 1 else -1,
    )
    assert decode_offset_commit_value(encode_offset_commit_value(value, version)) == value


members = st.builds(
    MemberMetadata,
    names,
    st.none() | names,
    names,
    names,
    ints32,
    ints32,
    st.binary(max_size=30),
    st.binary(max_size=30),
)


@given(
    st.integers(0, 4),
    names,
    ints32,
    st.none() | names,
    st.none() | names,
    ints64,
    st.lists(members, max_size=4),
)
def test_group_value_round_trip(
    version: int,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    timestamp: int,
    member_list: list[MemberMetadata],
) -> None:
    # Fields a version lacks read back as their defaults.
    fitted = tuple(
        MemberMetadata(
            m.member_id,
            m.group_instance_id if version >= 3 else None,
            m.client_id,
            m.client_host,
            m.rebalance_timeout if version >= 1 else -1,
            m.session_timeout,
            m.subscription,
            m.assignment,
        )
        for m in member_list
    )
    value = GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp if version >= 2 else -1, fitted
    )
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


def test_flexible_v4_reads_tagged_fields() -> None:
    value = GroupMetadataValue(
        "consumer", 1, "range", "m", 5, (MemberMetadata("m", "i", "c", "h", 1, 2, b"s", b"a"),)
    )
    data = bytearray(encode_group_metadata_value(value, 4))
    # Replace the trailing empty top-level tag buffer with one unknown tagged field.
    assert data[-1] == 0
    data[-1:] = bytes([1, 7, 2, 0xAB, 0xCD])
    assert decode_group_metadata_value(bytes(data)) == value


@given(st.integers(0, 4), names, names, st.data())
def test_every_truncation_is_a_format_error(
    version: int, group: str, metadata: str, data: st.DataObject
) -> None:
    # A torn or garbled record must fail as RecordFormatError, never as struct.error
    # or IndexError, so that loading reports the record instead of crashing.
    value = OffsetCommitValue(
        7,
        metadata,
        9,
        leader_epoch=3 if version >= 3 else -1,
        expire_timestamp=11 if version == 1 else -1,
    )
    encoded = [
        (decode_key, encode_key(OffsetCommitKey(group, "t", 1))),
        (decode_key, encode_key(GroupMetadataKey(group))),
        (decode_offset_commit_value, encode_offset_commit_value(value, version)),
    ]
    for decode, whole in encoded:
        cut = data.draw(st.integers(0, len(whole) - 1))
        with pytest.raises(RecordFormatError):
            decode(whole[:cut])
