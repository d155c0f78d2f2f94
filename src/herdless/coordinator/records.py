"""Kafka's own `__consumer_offsets` record formats, byte for byte.

A record key starts with an int16 that Kafka calls the key version and, since
the KIP-848 coordinator, the record type: 0 and 1 are offset commits, 2 is
group metadata; 3 to 8 and 16 are consumer groups' (consumer_records.py), the
rest belong to group types we do not run (share and streams groups). A value
starts with its own int16 version. Versions 0-3 are plain structs; version 4
of both values is "flexible" (compact lengths, tagged fields), which Kafka
reads but does not write yet, so we read it and write what Kafka 3.x writes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
# Kafka writes GroupMetadataValue v3 and OffsetCommitValue v3, or v1 when the
# commit carries an explicit expire timestamp (OffsetCommit v2-v4 retention).
GROUP_METADATA_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


class RecordFormatError(ValueError):
    """Bytes that are not a record of a known version."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH
    expire_timestamp: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int  # -1 when read from v0, which predates it
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = NO_TIMESTAMP
    members: tuple[MemberMetadata, ...] = ()


RecordKey = OffsetCommitKey | GroupMetadataKey


# --- primitive codec -------------------------------------------------------

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class FieldWriter:
    """Fields in order, plain or flexible, as Kafka's generated message classes write them."""

    def __init__(self, flexible: bool = False) -> None:
        self.out = bytearray()
        self.flexible = flexible

    def int8(self, v: int) -> None:
        self.out += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def uuid_(self, v: uuid.UUID) -> None:
        self.out += v.bytes

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def string(self, v: str | None) -> None:
        if v is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.int16(-1)
            return
        data = v.encode("utf-8")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.int16(len(data))
        self.out += data

    def bytes_(self, v: bytes) -> None:
        if self.flexible:
            self.uvarint(len(v) + 1)
        else:
            self.int32(len(v))
        self.out += v

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def no_tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)


class FieldReader:
    """Versioned fields in order: group metadata values, flexible (v4) offset values and
    the values of consumer group records."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.flexible = False

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise RecordFormatError("record truncated")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def _unpack(self, fmt: struct.Struct) -> int:
        try:
            (value,) = fmt.unpack_from(self.data, self.pos)
        except struct.error as e:
            raise RecordFormatError("record truncated") from e
        self.pos += fmt.size
        return int(value)

    def int8(self) -> int:
        return self._unpack(_I8)

    def int16(self) -> int:
        return self._unpack(_I16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def uuid_(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint too long")

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError("string is not UTF-8") from e

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise RecordFormatError("null where bytes are required")
        return self._take(n)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise RecordFormatError("null where an array is required")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def end(self) -> None:
        # Kafka ignores trailing bytes of values written by newer versions; so do we.
        pass


# --- keys ------------------------------------------------------------------


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return offset_key_head(key.group, key.topic) + _I32.pack(key.partition)
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string_bytes(key.group)


@lru_cache(maxsize=4096)
def offset_key_head(group: str, topic: str) -> bytes:
    """Everything of an offset commit key but the partition: the same for every
    partition of a commit, and for every commit of a group."""
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _string_bytes(group) + _string_bytes(topic)


def _string_bytes(s: str) -> bytes:
    """A non-null int16-length string: the inverse of _string_at."""
    data = s.encode("utf-8")
    return _I16.pack(len(data)) + data


def decode_key(data: bytes) -> RecordKey | None:
    """The key, or None for record types of group protocols we do not run."""
    data = bytes(data)
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version in (0, 1):
            group, pos = _string_at(data, 2)
            topic, pos = _string_at(data, pos)
            (partition,) = _I32.unpack_from(data, pos)
            return OffsetCommitKey(group, topic, partition)
        if version == 2:
            return GroupMetadataKey(_string_at(data, 2)[0])
    except struct.error as e:
        raise RecordFormatError("record truncated") from e
    if version < 0:
        raise RecordFormatError(f"negative key version {version}")
    return None


def decode_offset_key_prefix(prefix: bytes) -> tuple[str, str] | None:
    """The group and topic of every offset commit key that is `prefix` and a partition
    (int32), when decode_key reads such keys as exactly that; else None.

    Loading applies a run of commits of one group and topic at once: the keys of
    a run differ only in their last four bytes, so their shared head is read once.
    """
    try:
        (version,) = _I16.unpack_from(prefix, 0)
        if version not in (0, 1):
            return None
        group, pos = _string_at(prefix, 2)
        topic, pos = _string_at(prefix, pos)
    except (struct.error, RecordFormatError):
        return None
    # Bytes after the partition are ignored by decode_key, so they would be read here
    # as the partition: such keys are left to decode_key.
    return (group, topic) if pos == len(prefix) else None


def _string_at(data: bytes, pos: int) -> tuple[str, int]:
    """The non-null int16-length string at pos, and the position after it.

    Keys and offset values, read on every replay, are decoded with this and
    unpack_from rather than through FieldReader: a third less time per record.
    """
    (n,) = _I16.unpack_from(data, pos)
    start = pos + 2
    end = start + n
    if n < 0:
        raise RecordFormatError("null where a string is required")
    if end > len(data):
        raise RecordFormatError("record truncated")
    try:
        return data[start:end].decode("utf-8"), end
    except UnicodeDecodeError as e:
        raise RecordFormatError("string is not UTF-8") from e


# --- offset commit value -----------------------------------------------------


def offset_commit_value_version(value: OffsetCommitValue) -> int:
    if value.expire_timestamp != NO_TIMESTAMP:
        return OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    return OFFSET_COMMIT_VALUE_VERSION


def encode_offset(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp: int, expire_timestamp: int
) -> bytes:
    """encode_offset_commit_value of OffsetCommitValue(offset, metadata, commit_timestamp,
    leader_epoch, expire_timestamp), without the object: what an OffsetCommit writes for
    each partition it commits."""
    if expire_timestamp == NO_TIMESTAMP and not metadata:
        return _V3_NO_METADATA.pack(3, offset, leader_epoch, 0, commit_timestamp)
    return encode_offset_commit_value(
        OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)
    )


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = offset_commit_value_version(value)
    if not 0 <= version <= 4:
        raise RecordFormatError(f"OffsetCommitValue version {version}")
    if version == 4:
        return _encode_flexible_offset_commit_value(value)
    if version == 3 and not value.metadata:
        # What nearly every commit writes: one pack.
        return _V3_NO_METADATA.pack(3, value.offset, value.leader_epoch, 0, value.commit_timestamp)
    # Written once per committed partition: packed directly, like the decoder reads.
    parts = [_OFFSET_VALUE_HEAD.pack(version, value.offset)]
    if version == 3:
        parts.append(_I32.pack(value.leader_epoch))
    parts.append(_string_bytes(value.metadata))
    parts.append(_I64.pack(value.commit_timestamp))
    if version == 1:
        parts.append(_I64.pack(value.expire_timestamp))
    return b"".join(parts)


def _encode_flexible_offset_commit_value(value: OffsetCommitValue) -> bytes:
    w = FieldWriter(flexible=True)
    w.int16(4)
    w.int64(value.offset)
    w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    w.no_tagged_fields()
    return bytes(w.out)


_OFFSET_VALUE_HEAD = struct.Struct(">hq")  # version, offset
# Version 3 with empty metadata: version, offset, leader epoch, metadata length 0, commit time.
_V3_NO_METADATA = struct.Struct(">hqihq")


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    data = bytes(data)
    try:
        version, offset = _OFFSET_VALUE_HEAD.unpack_from(data, 0)
        if version == 4:
            return _decode_flexible_offset_commit_value(data)
        if not 0 <= version <= 3:
            raise RecordFormatError(f"OffsetCommitValue version {version}")
        pos = _OFFSET_VALUE_HEAD.size
        leader_epoch = NO_LEADER_EPOCH
        if version == 3:
            (leader_epoch,) = _I32.unpack_from(data, pos)
            pos += _I32.size
        metadata, pos = _string_at(data, pos)
        (commit_timestamp,) = _I64.unpack_from(data, pos)
        expire_timestamp = NO_TIMESTAMP
        if version == 1:
            (expire_timestamp,) = _I64.unpack_from(data, pos + _I64.size)
    except struct.error as e:
        raise RecordFormatError("record truncated") from e
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def offset_commit_value_offset(data: bytes) -> int:
    """The committed offset alone: the same field at the same place in every version."""
    try:
        version, offset = _OFFSET_VALUE_HEAD.unpack_from(data, 0)
    except struct.error as e:
        raise RecordFormatError("record truncated") from e
    if not 0 <= version <= 4:
        raise RecordFormatError(f"OffsetCommitValue version {version}")
    return int(offset)


def _decode_flexible_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = FieldReader(data)
    r.flexible = True
    r.int16()  # version 4
    offset = r.int64()
    leader_epoch = r.int32()
    metadata = r.string()
    commit_timestamp = r.int64()
    r.skip_tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, NO_TIMESTAMP)


# --- group metadata value ----------------------------------------------------


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    if not 0 <= version <= 4:
        raise RecordFormatError(f"GroupMetadataValue version {version}")
    w = FieldWriter(flexible=version >= 4)
    w.int16(version)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.no_tagged_fields()
    w.no_tagged_fields()
    return bytes(w.out)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = FieldReader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else NO_TIMESTAMP
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        group_instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tagged_fields()
        members.append(
            MemberMetadata(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.skip_tagged_fields()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )


# --- whole records -----------------------------------------------------------


class Record(NamedTuple):
    """One `__consumer_offsets` record as the log stores it; value None is a tombstone.

    A named tuple, as records.build_batch takes its entries: every commit makes one per
    partition, and a frozen dataclass took several times as long to make."""

    key: bytes
    value: bytes | None


def offset_commit_record(key: OffsetCommitKey, value: OffsetCommitValue | None) -> Record:
    return Record(encode_key(key), None if value is None else encode_offset_commit_value(value))


def group_metadata_record(key: GroupMetadataKey, value: GroupMetadataValue | None) -> Record:
    return Record(encode_key(key), None if value is None else encode_group_metadata_value(value))
