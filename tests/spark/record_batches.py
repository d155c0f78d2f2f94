"""Record batches as a broker stores them, built with kafka-python's record builder."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder

from herdless.protocol.records import iter_record_slices, parse_header, rebuild_batch

CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd
TRANSACTIONAL = 0x10
CONTROL = 0x20
LOG_APPEND_TIME = 0x08
ABORT, COMMIT = 0, 1

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Record:
    offset_gap: int  # offsets the cleaner removed before this record
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


def build_batch(
    base_offset: int,
    records: list[Record],
    codec: int = 0,
    attributes: int = 0,
    producer_id: int = -1,
    tail_gap: int = 0,
    log_append_time: int | None = None,
) -> bytes:
    """A batch as a broker stores it: base offset assigned, possibly cleaned and stamped."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=bool(attributes & TRANSACTIONAL),
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 24,
    )
    delta = -1
    for record in records:
        delta += 1 + record.offset_gap
        builder.append(delta, record.timestamp, record.key, record.value, record.headers)
    plain = bytes(builder.build())
    header = parse_header(plain)
    slices = [bytes(s) for _, s in iter_record_slices(memoryview(plain), header)]
    max_timestamp = header.max_timestamp
    if log_append_time is not None:
        attributes |= LOG_APPEND_TIME
        max_timestamp = log_append_time
    header = header._replace(
        base_offset=base_offset,
        attributes=attributes | codec,
        # The cleaner keeps lastOffsetDelta when it drops a batch's last records.
        last_offset_delta=delta + tail_gap,
    )
    return rebuild_batch(header, slices, max_timestamp)


def control_batch(base_offset: int, producer_id: int, kind: int) -> bytes:
    marker = Record(
        0, 1_700_000_000_000, struct.pack(">hh", 0, kind), b"\x00\x00\x00\x00\x00\x00", []
    )
    return build_batch(base_offset, [marker], 0, TRANSACTIONAL | CONTROL, producer_id)
