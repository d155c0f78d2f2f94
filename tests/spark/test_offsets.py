"""The offset model alone: JSON shape Spark checkpoints, batch ranges, rate limiting."""

from __future__ import annotations

import json

import pytest

from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import (
    OffsetRange,
    StreamOffset,
    batch_ranges,
    limit_ranges,
    parse_offsets_json,
    split_ranges,
)


def test_stream_offset_json_is_sorted_the_way_spark_compares_it() -> None:
    offset = StreamOffset(positions={("b", 10): 5, ("b", 2): 7, ("a", 0): 1}, starts={("b", 2): 3})
    encoded = offset.to_json()
    # Partitions sort as strings: Spark compares offsets as JSON text.
    assert json.dumps(encoded) == (
        '{"offsets": {"a": {"0": 1}, "b": {"10": 5, "2": 7}}, "starts": {"b": {"2": 3}}}'
    )
    assert StreamOffset.from_json(json.loads(json.dumps(encoded))) == offset


def test_batch_ranges_continue_from_the_last_batch_or_jump_to_a_start() -> None:
    start = StreamOffset(positions={("t", 0): 10, ("t", 1): 20})
    end = StreamOffset(positions={("t", 0): 15, ("t", 1): 20, ("t", 2): 9}, starts={("t", 2): 4})
    assert batch_ranges(start, end) == [OffsetRange("t", 0, 10, 15), OffsetRange("t", 2, 4, 9)]


def test_a_partition_without_a_start_is_an_error() -> None:
    with pytest.raises(HerdlessSparkError, match="t-3 ends at 5 but has no start"):
        batch_ranges(StreamOffset(), StreamOffset(positions={("t", 3): 5}))


def test_limit_shares_rows_fairly_and_never_exceeds_the_limit() -> None:
    starts = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    ends = {("t", 0): 1000, ("t", 1): 103, ("t", 2): 1050}
    limited = limit_ranges(starts, ends, 100)
    assert limited[("t", 1)] == 103  # the small partition takes all it has
    assert sum(limited[tp] - starts[tp] for tp in starts) == 100
    assert abs((limited[("t", 0)] - 0) - (limited[("t", 2)] - 50)) <= 1


def test_offsets_json_sentinels_and_errors() -> None:
    assert parse_offsets_json('{"t": {"0": -2, "1": 7}}', "startingOffsets") == {
        ("t", 0): -2,
        ("t", 1): 7,
    }
    with pytest.raises(HerdlessSparkError, match="-3 of t-0 is not an offset"):
        parse_offsets_json('{"t": {"0": -3}}', "startingOffsets")
    with pytest.raises(HerdlessSparkError, match="-2 of t-0 is not an offset"):
        parse_offsets_json('{"t": {"0": -2}}', "endingOffsets", allow_earliest=False)
    with pytest.raises(HerdlessSparkError, match="partition 'x' of topic 't' is not a number"):
        parse_offsets_json('{"t": {"x": 1}}', "startingOffsets")


def test_split_ranges_as_min_partitions_and_max_records_per_partition_ask() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 50, 150), OffsetRange("t", 2, 7, 7)]
    assert split_ranges(ranges, None, None) == ranges[:2]  # empty ranges are dropped
    # minPartitions=4: the big range is cut in three, the small one stays whole.
    assert split_ranges(ranges, 4, None) == [
        OffsetRange("t", 0, 0, 300),
        OffsetRange("t", 0, 300, 600),
        OffsetRange("t", 0, 600, 900),
        OffsetRange("t", 1, 50, 150),
    ]
    # maxRecordsPerPartition=400: no piece longer than 400, every offset read once.
    pieces = split_ranges(ranges, None, 400)
    assert [p.count for p in pieces] == [300, 300, 300, 100]
    assert [(p.start, p.until) for p in pieces if p.partition == 0] == [
        (0, 300),
        (300, 600),
        (600, 900),
    ]
