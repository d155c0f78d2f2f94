"""Kafka's `__consumer_offsets` records of consumer groups (KIP-848), byte for byte.

A consumer group is not one record but several, each a projection of part of
its state, written and compacted on its own: the group epoch, the topic
metadata its target assignment was computed from, each member's subscription,
the target assignment (its epoch, and each member's share), and each member's
current assignment. A key's int16 version is the record type; Kafka numbers
them 3 to 8, and 16 for the topics a subscribed regular expression resolved
to. Keys are plain structs; every value is version 0 and flexible (compact
lengths, tagged fields), so fields a later Kafka adds as tagged fields are
skipped when read. A tombstone of each removes that part.

Kafka 4.0 writes ConsumerGroupPartitionMetadata whenever the subscribed
topics' metadata changes (4.1 replaced it with a hash in the group metadata
value, KIP-1101); so do we, and a hash written by a newer Kafka is skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from herdless.coordinator.records import FieldReader, FieldWriter, Record, RecordFormatError
from herdless.coordinator.topic_metadata import (
    Partitions,
    TopicMetadata,
    by_topic,
    from_topics,
)

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
VALUE_VERSION = 0


# --- keys ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group: str
    regex: str


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)

_KEY_TYPES: dict[int, type] = {
    GROUP_METADATA: ConsumerGroupMetadataKey,
    PARTITION_METADATA: ConsumerGroupPartitionMetadataKey,
    MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
    TARGET_ASSIGNMENT_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
    TARGET_ASSIGNMENT_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
    CURRENT_MEMBER_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
    REGULAR_EXPRESSION: ConsumerGroupRegularExpressionKey,
}
_KEY_VERSIONS = {kind: version for version, kind in _KEY_TYPES.items()}
_TWO_FIELD_KEYS = (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)


def is_consumer_group_key_version(version: int) -> bool:
    return version in _KEY_TYPES


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    w = FieldWriter()
    w.int16(_KEY_VERSIONS[type(key)])
    w.string(key.group)
    if isinstance(key, ConsumerGroupRegularExpressionKey):
        w.string(key.regex)
    elif isinstance(key, _TWO_FIELD_KEYS):
        w.string(key.member_id)
    return bytes(w.out)


def decode_consumer_group_key(data: bytes) -> ConsumerGroupKey | None:
    """The key, or None if its version is not a consumer group record type."""
    r = FieldReader(data)
    kind = _KEY_TYPES.get(r.int16())
    if kind is None:
        return None
    group = r.string()
    if kind in _TWO_FIELD_KEYS:
        return kind(group, r.string())  # type: ignore[no-any-return]
    return kind(group)  # type: ignore[no-any-return]


# --- values ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group brought with its
    JoinGroup: its session timeout and its protocols (name, embedded metadata), in its order
    of preference. Kafka stores it as tagged field 0 of the member's metadata value."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


# The tag of ClassicMemberMetadata in ConsumerGroupMemberMetadataValue.
CLASSIC_MEMBER_METADATA_TAG = 0
# The tag of AssignmentTimestamp in ConsumerGroupTargetAssignmentMetadataValue (Kafka 4.3,
# KIP-1263): an int64, absent when 0.
ASSIGNMENT_TIMESTAMP_TAG = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    # When the computation of this target finished (ms); 0 for one that never ran (a
    # converted classic group, a log Kafka 4.2 or earlier wrote): the next may run at once.
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's value
    assigned_partitions: Partitions
    partitions_pending_revocation: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)


def write_partitions(w: FieldWriter, partitions: Partitions) -> None:
    topics = by_topic(partitions)
    w.array_len(len(topics))
    for topic_id, ps in topics.items():
        w.uuid_(topic_id)
        w.array_len(len(ps))
        for p in ps:
            w.int32(p)
        w.no_tagged_fields()


def read_partitions(r: FieldReader) -> Partitions:
    topics: list[tuple[uuid.UUID, list[int]]] = []
    for _ in range(r.array_len()):
        topic_id = r.uuid_()
        partitions = [r.int32() for _ in range(r.array_len())]
        r.skip_tagged_fields()
        topics.append((topic_id, partitions))
    return from_topics(topics)


def write_strings(w: FieldWriter, strings: tuple[str, ...]) -> None:
    w.array_len(len(strings))
    for s in strings:
        w.string(s)


def read_strings(r: FieldReader) -> tuple[str, ...]:
    return tuple(r.string() for _ in range(r.array_len()))


def _write_value(value: ConsumerGroupValue, w: FieldWriter) -> None:
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        w.array_len(len(value.topics))
        for topic in value.topics:
            w.uuid_(topic.topic_id)
            w.string(topic.name)
            w.int32(topic.num_partitions)
            # Racks by partition, as Kafka wrote them before 4.0 (and still reads them).
            w.array_len(len(topic.partition_racks))
            for partition, racks in enumerate(topic.partition_racks):
                w.int32(partition)
                write_strings(w, tuple(sorted(racks)))
                w.no_tagged_fields()
            w.no_tagged_fields()
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        write_strings(w, value.subscribed_topic_names)
        w.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        write_partitions(w, value.partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        write_partitions(w, value.assigned_partitions)
        write_partitions(w, value.partitions_pending_revocation)
    else:
        write_strings(w, value.topics)
        w.int64(value.version)
        w.int64(value.timestamp)


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    w = FieldWriter(flexible=True)
    w.int16(VALUE_VERSION)
    _write_value(value, w)
    classic = getattr(value, "classic_member_metadata", None)
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        if value.assignment_timestamp_ms:
            w.uvarint(1)
            w.uvarint(ASSIGNMENT_TIMESTAMP_TAG)
            w.uvarint(8)
            w.int64(value.assignment_timestamp_ms)
        else:
            w.no_tagged_fields()
    elif classic is None:
        w.no_tagged_fields()
    else:
        field = FieldWriter(flexible=True)
        field.int32(classic.session_timeout_ms)
        field.array_len(len(classic.supported_protocols))
        for name, metadata in classic.supported_protocols:
            field.string(name)
            field.bytes_(metadata)
            field.no_tagged_fields()
        field.no_tagged_fields()
        w.uvarint(1)
        w.uvarint(CLASSIC_MEMBER_METADATA_TAG)
        w.uvarint(len(field.out))
        w.out += field.out
    return bytes(w.out)


def _read_partition_metadata(r: FieldReader) -> ConsumerGroupPartitionMetadataValue:
    topics = []
    for _ in range(r.array_len()):
        topic_id = r.uuid_()
        name = r.string()
        num_partitions = r.int32()
        racks: dict[int, frozenset[str]] = {}
        for _ in range(r.array_len()):
            partition = r.int32()
            racks[partition] = frozenset(read_strings(r))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        partition_racks = (
            tuple(racks.get(p, frozenset()) for p in range(num_partitions)) if racks else ()
        )
        topics.append(TopicMetadata(topic_id, name, num_partitions, partition_racks))
    return ConsumerGroupPartitionMetadataValue(tuple(topics))


def _read_member_metadata(r: FieldReader) -> ConsumerGroupMemberMetadataValue:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=r.nullable_string(),
        rack_id=r.nullable_string(),
        client_id=r.string(),
        client_host=r.string(),
        subscribed_topic_names=read_strings(r),
        subscribed_topic_regex=r.nullable_string(),
        rebalance_timeout_ms=r.int32(),
        server_assignor=r.nullable_string(),
    )
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == CLASSIC_MEMBER_METADATA_TAG:
            classic = _read_classic_member_metadata(r)
        r.pos = end  # fields a later version added to the tagged struct, or other tags
    return replace(value, classic_member_metadata=classic)


def _read_target_assignment_metadata(r: FieldReader) -> ConsumerGroupTargetAssignmentMetadataValue:
    epoch = r.int32()
    timestamp = 0
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == ASSIGNMENT_TIMESTAMP_TAG:
            timestamp = r.int64()
        r.pos = end
    return ConsumerGroupTargetAssignmentMetadataValue(epoch, timestamp)


def _read_classic_member_metadata(r: FieldReader) -> ClassicMemberMetadata:
    session_timeout_ms = r.int32()
    protocols = []
    for _ in range(r.array_len()):
        name = r.string()
        metadata = r.bytes_()
        r.skip_tagged_fields()
        protocols.append((name, metadata))
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def _read_current_assignment(r: FieldReader) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=r.int32(),
        previous_member_epoch=r.int32(),
        state=r.int8(),
        assigned_partitions=read_partitions(r),
        partitions_pending_revocation=read_partitions(r),
    )


def _read_regular_expression(r: FieldReader) -> ConsumerGroupRegularExpressionValue:
    return ConsumerGroupRegularExpressionValue(read_strings(r), r.int64(), r.int64())


_VALUE_READERS: dict[type, Callable[[FieldReader], ConsumerGroupValue]] = {
    ConsumerGroupMetadataKey: lambda r: ConsumerGroupMetadataValue(r.int32()),
    ConsumerGroupPartitionMetadataKey: _read_partition_metadata,
    ConsumerGroupMemberMetadataKey: _read_member_metadata,
    ConsumerGroupTargetAssignmentMetadataKey: _read_target_assignment_metadata,
    ConsumerGroupTargetAssignmentMemberKey: lambda r: ConsumerGroupTargetAssignmentMemberValue(
        read_partitions(r)
    ),
    ConsumerGroupCurrentMemberAssignmentKey: _read_current_assignment,
    ConsumerGroupRegularExpressionKey: _read_regular_expression,
}


# Values whose readers read their tagged fields themselves.
_READ_OWN_TAGS = (ConsumerGroupMemberMetadataKey, ConsumerGroupTargetAssignmentMetadataKey)


def decode_consumer_group_value(key: ConsumerGroupKey, data: bytes) -> ConsumerGroupValue:
    """The value of a record with `key`; RecordFormatError if it is not one."""
    r = FieldReader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"{type(key).__name__} value version {version}")
    r.flexible = True
    value = _VALUE_READERS[type(key)](r)
    if not isinstance(key, _READ_OWN_TAGS):
        r.skip_tagged_fields()
    return value


def consumer_group_record(key: ConsumerGroupKey, value: ConsumerGroupValue | None) -> Record:
    """A record of the pair; value None is the tombstone of what the key names."""
    return Record(
        encode_consumer_group_key(key),
        None if value is None else encode_consumer_group_value(value),
    )
