"""Kafka's own `__transaction_state` record formats, byte for byte, so that Kafka's tools
(kafka-dump-log --transaction-log-decoder) read what herdless writes.

The key is TransactionLogKey v0: an int16 version, then the transactional id. The value
is TransactionLogValue: v0 is a plain struct; v1 is flexible (compact lengths, tagged
fields) and carries, tagged, the previous and next producer ids and the client's
transaction version that KIP-890's epoch bump per transaction needs. Kafka writes v1
once transaction.version is 1 or more, and v0 before. A tombstone (value None) removes
an expired transactional id. kafka-python carries no schema for either record, so they
are written here with the group records' field codec.
"""

from __future__ import annotations

from dataclasses import dataclass

from herdless.coordinator.records import FieldReader, FieldWriter, Record, RecordFormatError
from herdless.coordinator.runtime.writer import TopicPartition

TRANSACTION_LOG_KEY_VERSION = 0
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    # TransactionState's id (state.py).
    transaction_status: int
    # None is how Kafka writes the partitions of an Empty transaction.
    transaction_partitions: tuple[TopicPartition, ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    # Tagged fields of v1; v0 reads them as their defaults.
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


def encode_transaction_key(transactional_id: str) -> bytes:
    w = FieldWriter()
    w.int16(TRANSACTION_LOG_KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.out)


def decode_transaction_key(data: bytes) -> str:
    r = FieldReader(data)
    version = r.int16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise RecordFormatError(f"unknown transaction log key version {version}")
    return r.string()


def encode_transaction_value(value: TransactionLogValue, version: int) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue has no version {version}")
    w = FieldWriter(flexible=version >= 1)
    w.int16(version)
    w.int64(value.producer_id)
    w.int16(value.producer_epoch)
    w.int32(value.transaction_timeout_ms)
    w.int8(value.transaction_status)
    partitions = value.transaction_partitions
    if partitions is None:
        if w.flexible:
            w.uvarint(0)
        else:
            w.int32(-1)
    else:
        by_topic = _by_topic(partitions)
        w.array_len(len(by_topic))
        for topic, ids in by_topic.items():
            w.string(topic)
            w.array_len(len(ids))
            for partition in ids:
                w.int32(partition)
            w.no_tagged_fields()
    w.int64(value.transaction_last_update_timestamp_ms)
    w.int64(value.transaction_start_timestamp_ms)
    if w.flexible:
        _write_tagged_fields(w, value)
    return bytes(w.out)


def decode_transaction_value(data: bytes) -> TransactionLogValue:
    r = FieldReader(data)
    version = r.int16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown transaction log value version {version}")
    r.flexible = version >= 1
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout_ms = r.int32()
    status = r.int8()
    count = r.uvarint() - 1 if r.flexible else r.int32()
    partitions: tuple[TopicPartition, ...] | None = None
    if count >= 0:
        found: list[TopicPartition] = []
        for _ in range(count):
            topic = r.string()
            found += [TopicPartition(topic, r.int32()) for _ in range(r.array_len())]
            r.skip_tagged_fields()
        partitions = tuple(found)
    last_update_ms = r.int64()
    start_ms = r.int64()
    tagged = _read_tagged_fields(r) if r.flexible else {}
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update_ms,
        start_ms,
        previous_producer_id=tagged.get(_TAG_PREVIOUS_PRODUCER_ID, NO_PRODUCER_ID),
        next_producer_id=tagged.get(_TAG_NEXT_PRODUCER_ID, NO_PRODUCER_ID),
        client_transaction_version=tagged.get(_TAG_CLIENT_TRANSACTION_VERSION, 0),
    )


def transaction_record(
    transactional_id: str, value: TransactionLogValue | None, version: int
) -> Record:
    """The record of one transactional id's state; value None is its tombstone."""
    encoded = None if value is None else encode_transaction_value(value, version)
    return Record(encode_transaction_key(transactional_id), encoded)


def _by_topic(partitions: tuple[TopicPartition, ...]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def _write_tagged_fields(w: FieldWriter, value: TransactionLogValue) -> None:
    # Kafka writes a tagged field only when it differs from its default, in tag order.
    fields: list[tuple[int, bytes]] = []
    if value.previous_producer_id != NO_PRODUCER_ID:
        fields.append(
            (_TAG_PREVIOUS_PRODUCER_ID, value.previous_producer_id.to_bytes(8, "big", signed=True))
        )
    if value.next_producer_id != NO_PRODUCER_ID:
        fields.append(
            (_TAG_NEXT_PRODUCER_ID, value.next_producer_id.to_bytes(8, "big", signed=True))
        )
    if value.client_transaction_version != 0:
        fields.append(
            (
                _TAG_CLIENT_TRANSACTION_VERSION,
                value.client_transaction_version.to_bytes(2, "big", signed=True),
            )
        )
    w.uvarint(len(fields))
    for tag, data in fields:
        w.uvarint(tag)
        w.uvarint(len(data))
        w.out += data


_TAG_SIZES = {
    _TAG_PREVIOUS_PRODUCER_ID: 8,
    _TAG_NEXT_PRODUCER_ID: 8,
    _TAG_CLIENT_TRANSACTION_VERSION: 2,
}


def _read_tagged_fields(r: FieldReader) -> dict[int, int]:
    """The known tagged fields' values; unknown tags, from newer versions, are skipped."""
    values: dict[int, int] = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        size = r.uvarint()
        end = r.pos + size
        if end > len(r.data):
            raise RecordFormatError("record truncated")
        if _TAG_SIZES.get(tag) == size:
            values[tag] = int.from_bytes(r.data[r.pos : end], "big", signed=True)
        elif tag in _TAG_SIZES:
            raise RecordFormatError(f"tagged field {tag} has {size} bytes")
        r.pos = end
    return values
