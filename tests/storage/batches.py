"""Real Kafka record batches for storage tests, built by kafka-python's own builder."""

from __future__ import annotations

from collections.abc import Sequence

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from herdless.protocol.records import (
    BatchHeader,
    iter_batches,
    rewrite_base_offset,
    set_partition_leader_epoch,
    split_batches,
)

NONE = 0
GZIP = 1


def build(
    values: Sequence[bytes | None],
    *,
    timestamps: Sequence[int] | None = None,
    compression: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    keys: Sequence[bytes | None] | None = None,
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        timestamp = timestamps[i] if timestamps is not None else 1_000 + i
        key = keys[i] if keys is not None else None
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return bytes(builder.build())


def batch(
    count: int = 1,
    *,
    size: int = 10,
    first_timestamp: int = 1_000,
    key: bytes | None = None,
    **kwargs: int,
) -> bytes:
    """`count` records of `size` bytes, stamped first_timestamp, +1, +2..., all keyed `key`."""
    values = [bytes([65 + i % 26]) * size for i in range(count)]
    timestamps = [first_timestamp + i for i in range(count)]
    keys = [key] * count if key is not None else None
    return build(values, timestamps=timestamps, keys=keys, **kwargs)


def split(*raw: bytes) -> list[tuple[BatchHeader, memoryview]]:
    return split_batches(b"".join(raw), 1 << 30)


def records_of(data: bytes) -> list[tuple[int, int, bytes | None]]:
    """(offset, timestamp, value) of every record in a read's bytes, decoded by kafka-python."""
    return [(offset, timestamp, value) for offset, timestamp, _, value in keyed_records_of(data)]


def offsets_of(data: bytes) -> list[int]:
    return [offset for offset, _, _ in records_of(data)]


def keyed_records_of(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of each record of a read, decoded by kafka-python."""
    out = []
    position = 0
    while position < len(data):
        length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True) + 12
        decoded = DefaultRecordBatch(data[position : position + length])
        assert decoded.validate_crc()
        for record in decoded:
            out.append((record.offset, record.timestamp, record.key, record.value))
        position += length
    return out


def restamped(
    raw: bytes, *, base_offset: int | None = None, leader_epoch: int | None = None
) -> bytes:
    """A batch with its base offset or partition leader epoch changed (both outside the CRC)."""
    data = bytearray(raw)
    if base_offset is not None:
        rewrite_base_offset(data, base_offset)
    if leader_epoch is not None:
        set_partition_leader_epoch(data, leader_epoch)
    return bytes(data)


def stored_batches(data: bytes) -> list[tuple[BatchHeader, bytes]]:
    """Each batch of a read's bytes, with its header."""
    return [(header, data[p : p + header.size]) for p, header in iter_batches(data)]
