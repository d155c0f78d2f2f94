"""The high watermark: following the log end on a lone broker, set by its owner otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from herdless.storage import LogConfig, LogManager, OffsetOutOfRange, cleaner
from tests.storage.batches import batch, offsets_of, split
from tests.storage.conftest import OpenLog


def test_by_default_it_follows_the_log_end(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    assert log.high_watermark_follows_log_end
    log.append(split(batch(3)), 0)
    assert log.high_watermark == log.log_end_offset == 3
    with pytest.raises(ValueError, match="follows"):
        log.set_high_watermark(1)
    log.close()
    # Nothing to keep: it is the log end offset after a restart too.
    assert not (tmp_path / "t-0" / "high-watermark").exists()


def test_set_by_the_owner_clamped_and_never_backwards(open_log: OpenLog) -> None:
    log = open_log(follows_log_end=False)
    assert not log.high_watermark_follows_log_end
    assert log.high_watermark == 0
    for _ in range(3):
        log.append(split(batch(2)), 0)
    assert log.high_watermark == 0
    assert log.set_high_watermark(4) == 4
    assert log.set_high_watermark(2) == 4
    assert log.set_high_watermark(100) == 6 == log.log_end_offset
    log.append(split(batch(2)), 0)
    assert log.high_watermark == 6
    log.delete_records(5)
    assert log.set_high_watermark(0) == 6


def test_checkpointed_at_flush_and_close(open_log: OpenLog, tmp_path: Path) -> None:
    checkpoint = tmp_path / "t-0" / "high-watermark"
    log = open_log(follows_log_end=False)
    for _ in range(4):
        log.append(split(batch(2)), 0)
    log.set_high_watermark(3)
    log.flush()
    assert checkpoint.read_text().split() == ["0", "3"]
    log.set_high_watermark(7)
    log.close()
    assert checkpoint.read_text().split() == ["0", "7"]
    again = open_log(follows_log_end=False)
    assert (again.high_watermark, again.log_end_offset) == (7, 8)
    again.close()
    # A checkpoint past the log (its tail lost in a crash) is clamped to the log end.
    checkpoint.write_text("0\n1000\n")
    assert open_log(follows_log_end=False).high_watermark == 8


def test_without_a_checkpoint_it_starts_at_the_log_start(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="14")
    for _ in range(3):
        log.append(split(batch(3)), 0)
    log.delete_records(4)
    log.close()
    again = open_log(follows_log_end=False, segment_bytes="14")
    assert again.high_watermark == again.log_start_offset == 4


def test_truncation_lowers_it_and_says_so_at_once(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(follows_log_end=False)
    for _ in range(5):
        log.append(split(batch(2)), 0)
    log.set_high_watermark(8)
    log.flush()
    log.truncate_to(4, now_ms=0)
    assert log.high_watermark == 4
    # New records must not pass for committed if the broker dies before the next flush.
    assert (tmp_path / "t-0" / "high-watermark").read_text().split() == ["0", "4"]
    log.truncate_fully_and_start_at(20)
    assert log.high_watermark == 20


def test_reads_stop_at_max_offset(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="200", follows_log_end=False)
    for _ in range(6):
        log.append(split(batch(3, size=20)), 0)
    assert len(log.segment_base_offsets) > 2
    log.set_high_watermark(9)
    hw = log.high_watermark
    assert offsets_of(log.read(0, 1 << 20, max_offset=hw)) == list(range(9))
    assert offsets_of(log.read(4, 1 << 20, max_offset=hw)) == list(range(3, 9))
    # A batch starting below the limit is served whole (a high watermark, always at a
    # batch boundary in Kafka, never falls inside one).
    assert offsets_of(log.read(0, 1 << 20, max_offset=10)) == list(range(12))
    assert offsets_of(log.read(0, 1 << 20, max_offset=9)) == list(range(9))
    # Between the high watermark and the log end: nothing, and no error.
    for offset in (9, 12, 18):
        assert log.read(offset, 1 << 20, max_offset=hw) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(19, 1 << 20, max_offset=hw)
    # Followers read to the log end; without max_offset, reads do too.
    assert log.read(0, 1 << 20, max_offset=log.log_end_offset) == log.read(0, 1 << 20)
    # The first batch comes whole even over max_bytes, if it is below the limit.
    assert offsets_of(log.read(0, 1, max_offset=hw)) == [0, 1, 2]


def test_retention_and_delete_records_stay_below_it(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="14", retention_ms="1000", follows_log_end=False)
    for i in range(4):
        log.append(split(batch(2, first_timestamp=10 * (i + 1))), 0)
    assert log.segment_base_offsets == [0, 2, 4, 6]
    log.set_high_watermark(4)
    # Everything is past retention; only segments wholly below the high watermark go.
    assert log.apply_retention(now_ms=10**9) == 2
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange, match="high watermark"):
        log.delete_records(5)
    log.set_high_watermark(7)
    assert log.delete_records(-1) == 7


def test_the_log_manager_opens_logs_whose_owner_sets_it(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), high_watermark_follows_log_end=False)
    manager.open(now_ms=0)
    try:
        log = manager.create_topic("t", 1).partitions[0]
        log.append(split(batch()), 0)
        assert not log.high_watermark_follows_log_end and log.high_watermark == 0
    finally:
        manager.close()


def test_compaction_stays_below_it(open_log: OpenLog) -> None:
    """A record past the high watermark may yet be truncated: it must not replace older ones."""
    log = open_log(segment_bytes="150", cleanup_policy="compact", follows_log_end=False)
    for _ in range(8):
        log.append(split(batch(key=b"k")), 0)
    assert log.segment_base_offsets == list(range(8))  # one batch a segment
    log.set_high_watermark(2)
    cleaner.clean(log, now_ms=0)
    # Only segments 0 and 1 were compacted: 1 holds the latest of the key below the mark.
    assert offsets_of(log.read(0, 1 << 20)) == [1, 2, 3, 4, 5, 6, 7]
    log.set_high_watermark(8)
    cleaner.clean(log, now_ms=0)
    # The active segment is never cleaned.
    assert offsets_of(log.read(0, 1 << 20)) == [6, 7]
