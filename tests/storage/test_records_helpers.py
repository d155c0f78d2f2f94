"""The helpers storage added to protocol/records.py."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch

from herdless.protocol.records import (
    crc_matches,
    iter_record_timestamps,
    parse_header,
    rewrite_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from tests.storage.batches import GZIP, NONE, build


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_record_timestamps_match_kafka_python(compression: int) -> None:
    raw = bytearray(build([b"a", b"bb", b"c"], timestamps=[50, 20, 70], compression=compression))
    rewrite_base_offset(raw, 1000)
    header = parse_header(raw)
    expected = [(r.offset, r.timestamp) for r in DefaultRecordBatch(bytes(raw))]
    assert list(iter_record_timestamps(memoryview(raw), header)) == expected
    assert expected == [(1000, 50), (1001, 20), (1002, 70)]


def test_log_append_time_rewrites_the_timestamp_and_the_crc() -> None:
    raw = bytearray(build([b"a", b"b"], timestamps=[5, 6], compression=GZIP))
    set_log_append_time(raw, 99_000)
    header = parse_header(raw)
    assert header.log_append_time and header.max_timestamp == 99_000
    assert crc_matches(raw, header)
    decoded = DefaultRecordBatch(bytes(raw))
    assert decoded.validate_crc()
    assert [r.timestamp for r in decoded] == [99_000, 99_000]
    assert list(iter_record_timestamps(memoryview(raw), header)) == [(0, 99_000), (1, 99_000)]


def test_partition_leader_epoch_needs_no_new_crc() -> None:
    raw = bytearray(build([b"a"]))
    set_partition_leader_epoch(raw, 42)
    header = parse_header(raw)
    assert header.partition_leader_epoch == 42 and crc_matches(raw, header)
