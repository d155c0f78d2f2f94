"""Consumer group records (KIP-848) byte for byte, as Kafka's schemas lay them out."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herdless.coordinator.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    decode_consumer_group_key,
    decode_consumer_group_value,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from herdless.coordinator.records import RecordFormatError, decode_key
from herdless.coordinator.topic_metadata import TopicIdPartition, TopicMetadata

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")

# Keys: int16 record type (Kafka's key version), then int16-length strings.
KEYS: list[tuple[ConsumerGroupKey, str]] = [
    (ConsumerGroupMetadataKey("g"), "0003 0001 67"),
    (ConsumerGroupPartitionMetadataKey("g"), "0004 0001 67"),
    (ConsumerGroupMemberMetadataKey("g", "m"), "0005 0001 67 0001 6d"),
    (ConsumerGroupTargetAssignmentMetadataKey("g"), "0006 0001 67"),
    (ConsumerGroupTargetAssignmentMemberKey("g", "m"), "0007 0001 67 0001 6d"),
    (ConsumerGroupCurrentMemberAssignmentKey("g", "m"), "0008 0001 67 0001 6d"),
    (ConsumerGroupRegularExpressionKey("g", "t.*"), "0010 0001 67 0003 742e2a"),
]

# Values: int16 version 0, then flexible fields: compact strings and arrays (length + 1
# as an unsigned varint, 0 for null), uuids as 16 bytes, a tagged-field count (0)
# closing every struct.
TP = TOPIC.hex
VALUES: list[tuple[ConsumerGroupKey, ConsumerGroupValue, str]] = [
    (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7), "0000 00000007 00"),
    (
        ConsumerGroupPartitionMetadataKey("g"),
        ConsumerGroupPartitionMetadataValue((TopicMetadata(TOPIC, "t", 3),)),
        f"0000 02 {TP} 0274 00000003 01 00 00",
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "m"),
        ConsumerGroupMemberMetadataValue("i", None, "c", "/h", ("a", "b"), None, 5000, "range"),
        "0000 0269 00 0263 032f68 03 0261 0262 00 00001388 0672616e6765 00",
    ),
    (
        ConsumerGroupTargetAssignmentMetadataKey("g"),
        ConsumerGroupTargetAssignmentMetadataValue(4),
        "0000 00000004 00",
    ),
    (
        ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        ConsumerGroupTargetAssignmentMemberValue(
            frozenset({TopicIdPartition(TOPIC, 2), TopicIdPartition(TOPIC, 0)})
        ),
        f"0000 02 {TP} 03 00000000 00000002 00 00",
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        ConsumerGroupCurrentMemberAssignmentValue(
            5, 4, 1, frozenset({TopicIdPartition(TOPIC, 1)}), frozenset()
        ),
        f"0000 00000005 00000004 01 02 {TP} 02 00000001 00 01 00",
    ),
    (
        ConsumerGroupRegularExpressionKey("g", "t.*"),
        ConsumerGroupRegularExpressionValue(("t1",), 9, 1000),
        "0000 02 037431 0000000000000009 00000000000003e8 00",
    ),
]


@pytest.mark.parametrize(("key", "hex_bytes"), KEYS)
def test_keys(key: ConsumerGroupKey, hex_bytes: str) -> None:
    data = bytes.fromhex(hex_bytes.replace(" ", ""))
    assert encode_consumer_group_key(key) == data
    assert decode_consumer_group_key(data) == key
    # The classic decoder leaves them to us.
    assert decode_key(data) is None


@pytest.mark.parametrize(("key", "value", "hex_bytes"), VALUES)
def test_values(key: ConsumerGroupKey, value: ConsumerGroupValue, hex_bytes: str) -> None:
    data = bytes.fromhex(hex_bytes.replace(" ", ""))
    assert encode_consumer_group_value(value) == data
    assert decode_consumer_group_value(key, data) == value


def test_tagged_fields_a_newer_kafka_adds_are_skipped() -> None:
    # ConsumerGroupMetadataValue with KIP-1101's metadata hash (tag 0, an int64).
    data = bytes.fromhex("0000 00000007 01 00 08 0000000000000001".replace(" ", ""))
    assert decode_consumer_group_value(
        ConsumerGroupMetadataKey("g"), data
    ) == ConsumerGroupMetadataValue(7)


def test_partition_metadata_with_racks_from_before_kafka_4() -> None:
    racks = "02 00000000 02 037231 00"  # one partition, 0, on one rack, "r1"
    data = bytes.fromhex(f"0000 02 {TP} 0274 00000001 {racks} 00 00".replace(" ", ""))
    value = decode_consumer_group_value(ConsumerGroupPartitionMetadataKey("g"), data)
    topic = TopicMetadata(TOPIC, "t", 1, (frozenset({"r1"}),))
    assert value == ConsumerGroupPartitionMetadataValue((topic,))
    # Written back the same way: the racks are part of what the target was computed from.
    assert encode_consumer_group_value(value) == data


def test_other_record_types_and_bad_values() -> None:
    assert decode_consumer_group_key(bytes.fromhex("000a00016700016d")) is None  # share group
    with pytest.raises(RecordFormatError):
        decode_consumer_group_value(ConsumerGroupMetadataKey("g"), bytes.fromhex("000100000007"))
    with pytest.raises(RecordFormatError):
        decode_consumer_group_value(ConsumerGroupMetadataKey("g"), bytes.fromhex("000000"))


partitions = st.frozensets(
    st.builds(TopicIdPartition, st.sampled_from([TOPIC, uuid.UUID(int=1)]), st.integers(0, 99))
)


@given(
    st.builds(
        ConsumerGroupMemberMetadataValue,
        st.none() | st.text(),
        st.none() | st.text(),
        st.text(),
        st.text(),
        st.lists(st.text()).map(tuple),
        st.none() | st.text(),
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.text(),
    ),
    st.builds(
        ConsumerGroupCurrentMemberAssignmentValue,
        st.integers(-2, 2**31 - 1),
        st.integers(-2, 2**31 - 1),
        st.integers(0, 127),
        partitions,
        partitions,
    ),
)
def test_values_round_trip(
    member: ConsumerGroupMemberMetadataValue, current: ConsumerGroupCurrentMemberAssignmentValue
) -> None:
    key = ConsumerGroupMemberMetadataKey("g", "m")
    assert decode_consumer_group_value(key, encode_consumer_group_value(member)) == member
    key2 = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    assert decode_consumer_group_value(key2, encode_consumer_group_value(current)) == current
