"""Records with their headers: read out of a stored batch, and written into a new one.

records.py reads and writes keys and values alone, which is all the log and the
coordinators need; the broker writes headers of its own only for dead letters
(KIP-1191), whose headers say where the record came from, and which carry the
original record's headers when they copy it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from herdless.protocol.records import (
    BatchHeader,
    InvalidBatch,
    _framed_batch,
    _varint,
    _varint_bytes,
    _zigzag,
    iter_record_slices,
)

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class HeadedRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def iter_headed_records(batch: memoryview, header: BatchHeader) -> Iterator[HeadedRecord]:
    """The records of a validated batch with their headers; InvalidBatch if a header runs
    past its record."""
    for record, encoding in iter_record_slices(batch, header):
        yield HeadedRecord(
            record.offset, record.timestamp, record.key, record.value, _headers(encoding)
        )


def _headers(encoding: memoryview) -> tuple[Header, ...]:
    length, pos = _varint(encoding, 0)
    end = pos + length
    pos += 1  # attributes
    _, pos = _varint(encoding, pos)  # timestamp delta
    _, pos = _varint(encoding, pos)  # offset delta
    _, pos = _varint_bytes(encoding, pos)  # key
    _, pos = _varint_bytes(encoding, pos)  # value
    count, pos = _varint(encoding, pos)
    headers: list[Header] = []
    for _ in range(count):
        name, pos = _varint_bytes(encoding, pos)
        value, pos = _varint_bytes(encoding, pos)
        if name is None or pos > end:
            raise InvalidBatch("record header runs past its record")
        headers.append((name.decode("utf-8", "replace"), value))
    return tuple(headers)


def encode_headed_batch(
    entries: Sequence[tuple[int, bytes | None, bytes | None, Sequence[Header]]],
) -> bytes:
    """An uncompressed magic v2 batch of (timestamp, key, value, headers) records,
    CreateTime, no producer, base offset 0: the log assigns the offsets."""
    body = bytearray()
    base_timestamp = max_timestamp = entries[0][0]
    for delta, (timestamp, key, value, headers) in enumerate(entries):
        max_timestamp = max(max_timestamp, timestamp)
        record = bytearray(b"\x00")  # attributes
        record += _zigzag(timestamp - base_timestamp)
        record += _zigzag(delta)
        _put(record, key)
        _put(record, value)
        record += _zigzag(len(headers))
        for name, header_value in headers:
            _put(record, name.encode())
            _put(record, header_value)
        body += _zigzag(len(record))
        body += record
    return _framed_batch(body, len(entries), base_timestamp, max_timestamp)


def _put(out: bytearray, field: bytes | None) -> None:
    if field is None:
        out += _zigzag(-1)
    else:
        out += _zigzag(len(field))
        out += field
