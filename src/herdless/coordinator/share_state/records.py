"""Kafka's own `__share_group_state` record formats, byte for byte, so that Kafka's tools
(kafka-dump-log --share-group-state-decoder) read what herdless writes.

Two record types, told apart by the key's leading int16, the record type:
- ShareSnapshot (0): the whole state of one share partition.
- ShareUpdate (1): the batches one write changed, on top of the last snapshot.
Both keys are plain structs (group id, topic id, partition). Both values are flexible
(compact lengths, tagged fields) at value version 0, as Kafka 4.1 on writes them: the
snapshot epoch an int32, the snapshot carrying its create and write times. Tagged
fields of newer versions (KIP-1226's delivery-complete count) are read past. A
tombstone (value None) of both keys removes a share partition's state.
"""

from __future__ import annotations

from dataclasses import dataclass

from herdless.coordinator.records import FieldReader, FieldWriter, Record, RecordFormatError
from herdless.coordinator.share_state.state import RecordState, SharePartitionKey, StateBatch

SHARE_SNAPSHOT_RECORD_TYPE = 0
SHARE_UPDATE_RECORD_TYPE = 1
VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    # -1: the start offset did not move.
    start_offset: int
    state_batches: tuple[StateBatch, ...]


ShareStateValue = ShareSnapshotValue | ShareUpdateValue


def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    w = FieldWriter()
    w.int16(record_type)
    w.string(key.group_id)
    w.uuid_(key.topic_id)
    w.int32(key.partition)
    return bytes(w.out)


def decode_key(data: bytes) -> tuple[int, SharePartitionKey]:
    """The record type and the share partition of a key."""
    r = FieldReader(data)
    record_type = r.int16()
    if record_type not in (SHARE_SNAPSHOT_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE):
        raise RecordFormatError(f"unknown share state record type {record_type}")
    return record_type, SharePartitionKey(r.string(), r.uuid_(), r.int32())


def encode_value(value: ShareStateValue) -> bytes:
    w = FieldWriter(flexible=True)
    w.int16(VALUE_VERSION)
    w.int32(value.snapshot_epoch)
    if isinstance(value, ShareSnapshotValue):
        w.int32(value.state_epoch)
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
        w.int64(value.create_timestamp)
        w.int64(value.write_timestamp)
    else:
        w.int32(value.leader_epoch)
        w.int64(value.start_offset)
    w.array_len(len(value.state_batches))
    for batch in value.state_batches:
        w.int64(batch.first_offset)
        w.int64(batch.last_offset)
        w.int8(batch.delivery_state)
        w.int16(batch.delivery_count)
        w.no_tagged_fields()
    w.no_tagged_fields()
    return bytes(w.out)


def decode_value(record_type: int, data: bytes) -> ShareStateValue:
    r = FieldReader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown share state value version {version}")
    r.flexible = True
    snapshot_epoch = r.int32()
    if record_type == SHARE_SNAPSHOT_RECORD_TYPE:
        state_epoch, leader_epoch, start_offset = r.int32(), r.int32(), r.int64()
        created, written = r.int64(), r.int64()
        batches = _read_batches(r)
        r.skip_tagged_fields()
        return ShareSnapshotValue(
            snapshot_epoch, state_epoch, leader_epoch, start_offset, created, written, batches
        )
    leader_epoch, start_offset = r.int32(), r.int64()
    batches = _read_batches(r)
    r.skip_tagged_fields()
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches)


def _read_batches(r: FieldReader) -> tuple[StateBatch, ...]:
    batches = []
    for _ in range(r.array_len()):
        first, last, state, count = r.int64(), r.int64(), r.int8(), r.int16()
        r.skip_tagged_fields()
        try:
            delivery_state = RecordState(state)
        except ValueError:
            raise RecordFormatError(f"unknown delivery state {state}") from None
        batches.append(StateBatch(first, last, delivery_state, count))
    return tuple(batches)


def snapshot_record(key: SharePartitionKey, value: ShareSnapshotValue) -> Record:
    return Record(encode_key(SHARE_SNAPSHOT_RECORD_TYPE, key), encode_value(value))


def update_record(key: SharePartitionKey, value: ShareUpdateValue) -> Record:
    return Record(encode_key(SHARE_UPDATE_RECORD_TYPE, key), encode_value(value))


def tombstones(key: SharePartitionKey) -> list[Record]:
    """The records that forget a share partition: compaction then drops both its last
    snapshot and its last update."""
    return [
        Record(encode_key(SHARE_SNAPSHOT_RECORD_TYPE, key), None),
        Record(encode_key(SHARE_UPDATE_RECORD_TYPE, key), None),
    ]
