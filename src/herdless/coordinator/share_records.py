"""Kafka's `__consumer_offsets` records of share groups (KIP-932), byte for byte.

A share group is written as a consumer group is (consumer_records.py): the group
epoch, each member's subscription, the target assignment (its epoch, and each
member's share) and each member's current assignment, each a record of its own
that a tombstone removes. Kafka numbers their types 10 to 14. Keys are plain
structs; every value is version 0 and flexible.

Kafka 4.1 put the hash of the subscribed topics' metadata into the group's
metadata value (KIP-1101) as a plain field, where 4.0 wrote a
ShareGroupPartitionMetadata record (type 9); we write the hash and read values
with or without it. Type 9 and ShareGroupStatePartitionMetadata (15, which
topics the share coordinator has initialized) are recognised and skipped, so a
log Kafka wrote still loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from herdless.coordinator.consumer_records import (
    read_partitions,
    read_strings,
    write_partitions,
    write_strings,
)
from herdless.coordinator.records import FieldReader, FieldWriter, Record, RecordFormatError
from herdless.coordinator.topic_metadata import Partitions

PARTITION_METADATA = 9
MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
VALUE_VERSION = 0
# Record types of share groups that herdless reads past without applying.
_SKIPPED_TYPES = frozenset({PARTITION_METADATA, STATE_PARTITION_METADATA})


# --- keys ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


ShareGroupKey = (
    ShareGroupMetadataKey
    | ShareGroupMemberMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
)

_KEY_TYPES: dict[int, type] = {
    MEMBER_METADATA: ShareGroupMemberMetadataKey,
    GROUP_METADATA: ShareGroupMetadataKey,
    TARGET_ASSIGNMENT_METADATA: ShareGroupTargetAssignmentMetadataKey,
    TARGET_ASSIGNMENT_MEMBER: ShareGroupTargetAssignmentMemberKey,
    CURRENT_MEMBER_ASSIGNMENT: ShareGroupCurrentMemberAssignmentKey,
}
_KEY_VERSIONS = {kind: version for version, kind in _KEY_TYPES.items()}
_MEMBER_KEYS = (
    ShareGroupMemberMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
)


class SkippedShareRecord:
    """A share group record type herdless does not apply (see the module's docstring)."""


SKIPPED = SkippedShareRecord()


def encode_share_group_key(key: ShareGroupKey) -> bytes:
    w = FieldWriter()
    w.int16(_KEY_VERSIONS[type(key)])
    w.string(key.group)
    if isinstance(key, _MEMBER_KEYS):
        w.string(key.member_id)
    return bytes(w.out)


def decode_share_group_key(data: bytes) -> ShareGroupKey | SkippedShareRecord | None:
    """The key; SKIPPED for a share group type not applied; None if not a share group's."""
    r = FieldReader(data)
    version = r.int16()
    if version in _SKIPPED_TYPES:
        return SKIPPED
    kind = _KEY_TYPES.get(version)
    if kind is None:
        return None
    group = r.string()
    if kind in _MEMBER_KEYS:
        return kind(group, r.string())  # type: ignore[no-any-return]
    return kind(group)  # type: ignore[no-any-return]


# --- values ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int
    # The subscribed topics' metadata the group epoch was last bumped for (KIP-1101);
    # 0 when read from a log Kafka 4.0 wrote.
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # always 0 (stable): a share member has nothing to revoke
    assigned_partitions: Partitions


ShareGroupValue = (
    ShareGroupMetadataValue
    | ShareGroupMemberMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
)

# The bytes left after the epoch of a 4.0 ShareGroupMetadataValue: its empty tagged fields.
_HASH_SIZE = 8


def _write_value(value: ShareGroupValue, w: FieldWriter) -> None:
    if isinstance(value, ShareGroupMetadataValue):
        w.int32(value.epoch)
        w.int64(value.metadata_hash)
    elif isinstance(value, ShareGroupMemberMetadataValue):
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        write_strings(w, value.subscribed_topic_names)
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        write_partitions(w, value.partitions)
    else:
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        write_partitions(w, value.assigned_partitions)


def encode_share_group_value(value: ShareGroupValue) -> bytes:
    w = FieldWriter(flexible=True)
    w.int16(VALUE_VERSION)
    _write_value(value, w)
    w.no_tagged_fields()
    return bytes(w.out)


def _read_group_metadata(r: FieldReader) -> ShareGroupMetadataValue:
    epoch = r.int32()
    has_hash = len(r.data) - r.pos > _HASH_SIZE
    return ShareGroupMetadataValue(epoch, r.int64() if has_hash else 0)


def _read_member_metadata(r: FieldReader) -> ShareGroupMemberMetadataValue:
    return ShareGroupMemberMetadataValue(
        rack_id=r.nullable_string(),
        client_id=r.string(),
        client_host=r.string(),
        subscribed_topic_names=read_strings(r),
    )


def _read_current_assignment(r: FieldReader) -> ShareGroupCurrentMemberAssignmentValue:
    return ShareGroupCurrentMemberAssignmentValue(
        member_epoch=r.int32(),
        previous_member_epoch=r.int32(),
        state=r.int8(),
        assigned_partitions=read_partitions(r),
    )


_VALUE_READERS: dict[type, Callable[[FieldReader], ShareGroupValue]] = {
    ShareGroupMetadataKey: _read_group_metadata,
    ShareGroupMemberMetadataKey: _read_member_metadata,
    ShareGroupTargetAssignmentMetadataKey: lambda r: ShareGroupTargetAssignmentMetadataValue(
        r.int32()
    ),
    ShareGroupTargetAssignmentMemberKey: lambda r: ShareGroupTargetAssignmentMemberValue(
        read_partitions(r)
    ),
    ShareGroupCurrentMemberAssignmentKey: _read_current_assignment,
}


def decode_share_group_value(key: ShareGroupKey, data: bytes) -> ShareGroupValue:
    """The value of a record with `key`; RecordFormatError if it is not one."""
    r = FieldReader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"{type(key).__name__} value version {version}")
    r.flexible = True
    value = _VALUE_READERS[type(key)](r)
    r.skip_tagged_fields()
    return value


def share_group_record(key: ShareGroupKey, value: ShareGroupValue | None) -> Record:
    """A record of the pair; value None is the tombstone of what the key names."""
    return Record(
        encode_share_group_key(key),
        None if value is None else encode_share_group_value(value),
    )
