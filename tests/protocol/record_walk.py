"""The record-by-record check of a batch's records, as herdless made it before checking
runs of records in bulk: the oracle the bulk check (records.check_records) must agree
with, record for record and error for error."""

from __future__ import annotations

from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import InvalidBatch, _varint


def walk_check_records(payload: memoryview, record_count: int) -> None:
    pos = 0
    end = len(payload)
    for expected_delta in range(record_count):
        length, pos = _varint(payload, pos)
        record_end = pos + length
        if length < 3 or record_end > end:
            raise InvalidBatch("record length runs past the batch")
        pos += 1  # attributes
        _, pos = _varint(payload, pos)  # timestamp delta
        offset_delta, pos = _varint(payload, pos)
        if offset_delta != expected_delta:
            raise InvalidBatch("record offset deltas are not consecutive", ErrorCode.INVALID_RECORD)
        if pos > record_end:
            raise InvalidBatch("record header runs past its length")
        pos = record_end
    if pos != end:
        raise InvalidBatch("record count disagrees with the records in the batch")
