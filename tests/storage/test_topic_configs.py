"""Topic configs that change what the log stores or refuses: compression.type,
message.timestamp.before/after.max.ms, segment.jitter.ms, max.compaction.lag.ms."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch

from herdless.protocol.records import Compression, iter_batches
from herdless.storage import InvalidTimestamp
from herdless.storage.cleaner import clean, needs_cleaning
from tests.storage.batches import GZIP, build, records_of, split
from tests.storage.conftest import OpenLog

VALUES = [b"value-%d" % i * 20 for i in range(50)]


def stored_codecs(data: bytes) -> list[int]:
    return [header.compression for _, header in iter_batches(data)]


@pytest.mark.parametrize("codec", ["zstd", "lz4", "snappy", "gzip", "uncompressed"])
def test_batches_are_stored_in_the_topics_codec(open_log: OpenLog, codec: str) -> None:
    log = open_log(compression_type=codec)
    sent = [
        build(VALUES, compression=GZIP, producer_id=7, producer_epoch=0, base_sequence=0),
        build(VALUES[:3], producer_id=7, producer_epoch=0, base_sequence=50),
    ]
    for raw in sent:
        log.append(split(raw), now_ms=5)
    data = log.read(0, 1 << 20)
    want = Compression[{"uncompressed": "NONE"}.get(codec, codec.upper())]
    assert stored_codecs(data) == [want, want]
    # Same records at the same offsets, and the producer fields kept for idempotence.
    stamps = [1_000 + i for i in range(len(VALUES))] + [1_000, 1_001, 1_002]
    assert records_of(data) == list(
        zip(range(len(stamps)), stamps, VALUES + VALUES[:3], strict=True)
    )
    first = DefaultRecordBatch(data[: next(iter_batches(data))[1].size])
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 0, 0)
    # A retry of the first batch is still recognised as a duplicate after recompression.
    again = log.append(split(sent[0]), now_ms=6)
    assert again.duplicate and again.first_offset == 0


def test_producer_codec_is_kept_as_sent(open_log: OpenLog) -> None:
    log = open_log()
    raw = build(VALUES, compression=GZIP)
    log.append(split(raw), now_ms=5)
    data = log.read(0, 1 << 20)
    assert stored_codecs(data) == [Compression.GZIP]
    assert data[12:] == raw[12:]  # byte for byte past the base offset


def test_timestamps_outside_the_bounds_refuse_the_whole_batch(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_before_max_ms="1000", message_timestamp_after_max_ms="10")
    now = 100_000
    log.append(split(build([b"a", b"b"], timestamps=[now - 1000, now + 10])), now_ms=now)
    for stamps in ([now, now - 1001], [now + 11, now]):
        with pytest.raises(InvalidTimestamp, match="out of range"):
            log.append(split(build([b"x", b"y"], timestamps=stamps)), now_ms=now)
    assert log.log_end_offset == 2


def test_log_append_time_topics_take_any_producer_timestamp(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_before_max_ms="0", message_timestamp_type="LogAppendTime")
    log.append(split(build([b"a"], timestamps=[1])), now_ms=100_000)
    assert [t for _, t, _ in records_of(log.read(0, 1 << 20))] == [100_000]


def test_segment_jitter_rolls_earlier_by_the_drawn_amount(open_log: OpenLog) -> None:
    log = open_log(segment_ms="1000", segment_jitter_ms="100000")
    jitters = set()
    for _ in range(20):
        start = log.log_end_offset * 10_000
        log.append(split(build([b"a"])), now_ms=start)  # the first append of a segment
        jitter = log.roll_jitter_ms
        jitters.add(jitter)
        assert 0 <= jitter < 1000  # bounded by segment.ms as well
        segments = len(log.segment_base_offsets)
        log.append(split(build([b"b"])), now_ms=start + 1000 - jitter)
        assert len(log.segment_base_offsets) == segments
        log.append(split(build([b"c"])), now_ms=start + 1001 - jitter)
        assert len(log.segment_base_offsets) == segments + 1  # and a new jitter is drawn
    assert len(jitters) > 1


def test_without_jitter_segments_roll_at_segment_ms(open_log: OpenLog) -> None:
    log = open_log(segment_ms="1000")
    assert log.roll_jitter_ms == 0


def test_max_compaction_lag_makes_a_little_dirt_worth_cleaning(open_log: OpenLog) -> None:
    compact = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": "0.99"}
    lagged = open_log(**compact, max_compaction_lag_ms="5000")
    for i in range(40):
        lagged.append(split(build([b"v%d" % i], keys=[b"k%d" % i], timestamps=[1_000])), 1_000)
    lagged.roll()
    lagged.append(split(build([b"new"], keys=[b"k0"], timestamps=[2_000])), 2_000)
    lagged.roll()
    clean(lagged, 2_500)  # everything clean; then one record of new dirt
    lagged.append(split(build([b"newer"], keys=[b"k1"], timestamps=[3_000])), 3_000)
    lagged.roll()
    assert not needs_cleaning(lagged, 3_000 + 5_000)  # below the ratio, within the lag
    assert needs_cleaning(lagged, 3_000 + 5_001)  # overdue
