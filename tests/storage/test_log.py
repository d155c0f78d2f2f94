from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from herdless.protocol.records import parse_header
from herdless.storage import LogClosed, OffsetOutOfRange, PartitionLog, RecordTooLarge
from tests.storage.batches import GZIP, batch, build, offsets_of, records_of, split
from tests.storage.conftest import OpenLog


def consume(partition_log: PartitionLog, start: int, max_bytes: int) -> list[int]:
    """Fetch like a consumer: from `start` to the end, skipping records below the position."""
    offsets: list[int] = []
    position = start
    while position < partition_log.log_end_offset:
        fetched = [o for o in offsets_of(partition_log.read(position, max_bytes)) if o >= position]
        assert fetched, f"no progress at {position}"
        offsets.extend(fetched)
        position = fetched[-1] + 1
    return offsets


def test_append_assigns_offsets_and_reads_back(open_log: OpenLog) -> None:
    log = open_log()
    first = log.append(split(build([b"a", b"b", b"c"])), now_ms=5)
    second = log.append(split(build([b"d"]), build([b"e", b"f"])), now_ms=6)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 5)
    assert first.log_append_time_ms == -1 and not first.duplicate
    assert log.log_end_offset == log.high_watermark == 6
    assert log.log_start_offset == 0
    got = records_of(log.read(0, 1 << 20))
    assert [(o, v) for o, _, v in got] == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f"]))


def test_short_writes_are_written_on(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch goes down as its rewritten header and the rest of it, in one pwritev (a
    # small one joined, in one pwrite), which the kernel may cut short anywhere: the
    # rest must follow, in order.
    real_pwritev = os.pwritev
    real_pwrite = os.pwrite
    writes = []

    def short_pwritev(fd: int, buffers: list[memoryview], position: int) -> int:
        writes.append("pwritev")
        return real_pwritev(fd, [bytes(b"".join(buffers)[:7])], position)

    def short_pwrite(fd: int, data: bytes, position: int) -> int:
        writes.append("pwrite")
        return real_pwrite(fd, bytes(data)[:7], position)

    monkeypatch.setattr(os, "pwritev", short_pwritev)
    monkeypatch.setattr(os, "pwrite", short_pwrite)
    log = open_log()
    log.append(split(build([b"a" * 100, b"b"])), now_ms=5)
    log.append(split(build([b"c"]), build([b"d" * 30, b"e"])), now_ms=6)
    log.append(split(build([b"f" * 5000])), now_ms=7)
    monkeypatch.undo()
    assert {"pwrite", "pwritev"} <= set(writes)
    got = records_of(log.read(0, 1 << 20))
    values = [b"a" * 100, b"b", b"c", b"d" * 30, b"e", b"f" * 5000]
    assert [(o, v) for o, _, v in got] == list(enumerate(values))


def test_read_returns_the_batch_holding_the_offset(open_log: OpenLog) -> None:
    log = open_log()
    log.append(split(batch(5)), 0)
    log.append(split(batch(5)), 0)
    assert offsets_of(log.read(7, 1)) == [5, 6, 7, 8, 9]
    assert offsets_of(log.read(4, 1)) == [0, 1, 2, 3, 4]


def test_max_bytes_keeps_whole_batches_and_at_least_one(open_log: OpenLog) -> None:
    log = open_log()
    raw = batch(2, size=100)
    for _ in range(4):
        log.append(split(raw), 0)
    size = len(raw)
    assert offsets_of(log.read(0, 1)) == [0, 1]
    assert offsets_of(log.read(0, size - 1)) == [0, 1]
    assert offsets_of(log.read(0, 2 * size + 10)) == [0, 1, 2, 3]
    assert len(log.read(0, 2 * size + 10)) == 2 * size
    assert len(log.read(2, 1 << 20)) == 3 * size


def test_offsets_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    log.append(split(batch(3)), 0)
    assert log.read(3, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_empty_log_reads_nothing(open_log: OpenLog) -> None:
    log = open_log()
    assert log.read(0, 100) == b""
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() is None


def test_rolls_by_size_and_reads_across_segments(open_log: OpenLog) -> None:
    raw = batch(3, size=50)
    log = open_log(segment_bytes=str(3 * len(raw)), index_interval_bytes="1")
    for _ in range(10):
        log.append(split(raw), 0)
    assert log.segment_base_offsets == [0, 9, 18, 27]
    assert log.size_bytes == 10 * len(raw)
    for max_bytes in (1, len(raw) + 1, 4 * len(raw), 1 << 20):
        assert consume(log, 0, max_bytes) == list(range(30))
    assert offsets_of(log.read(0, 1 << 20)) == list(range(30))
    assert consume(log, 17, 1) == list(range(17, 30))


def test_rolls_by_time_since_first_append(open_log: OpenLog) -> None:
    log = open_log(segment_ms="1000")
    log.append(split(batch()), now_ms=10_000)
    log.append(split(batch()), now_ms=11_000)
    assert log.segment_base_offsets == [0]
    log.append(split(batch()), now_ms=11_001)
    assert log.segment_base_offsets == [0, 2]
    log.append(split(batch()), now_ms=11_500)
    assert log.segment_base_offsets == [0, 2]


def test_rolls_when_the_index_is_full(open_log: OpenLog) -> None:
    log = open_log(segment_index_bytes="24", index_interval_bytes="0")
    for i in range(6):
        log.append(split(batch(first_timestamp=i)), 0)
    # Two time index entries (12 bytes each) fit; the first batch of a segment never gets one.
    assert log.segment_base_offsets == [0, 3]


def test_restart_keeps_data_offsets_and_segments(open_log: OpenLog) -> None:
    raw = batch(2, size=30)
    log = open_log(segment_bytes=str(2 * len(raw)))
    for _ in range(5):
        log.append(split(raw), 0)
    bases = log.segment_base_offsets
    log.close()
    with pytest.raises(LogClosed):
        log.read(0, 10)
    again = open_log(segment_bytes=str(2 * len(raw)))
    assert again.log_end_offset == 10
    assert again.segment_base_offsets == bases
    assert offsets_of(again.read(0, 1 << 20)) == list(range(10))
    assert again.append(split(raw), 0).first_offset == 10


def test_log_append_time_stamps_batches(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    info = log.append(split(batch(3, first_timestamp=5)), now_ms=123_456)
    assert info.log_append_time_ms == 123_456
    data = log.read(0, 1 << 20)
    header = parse_header(data)
    assert header.log_append_time and header.max_timestamp == 123_456
    decoded = DefaultRecordBatch(data)
    assert decoded.validate_crc()
    assert [r.timestamp for r in decoded] == [123_456] * 3
    assert log.offset_for_timestamp(100_000) == (0, 123_456)


def test_leader_epoch_is_stamped_when_given(open_log: OpenLog) -> None:
    log = open_log()
    log.append(split(batch()), 0, leader_epoch=7)
    data = log.read(0, 1 << 20)
    assert parse_header(data).partition_leader_epoch == 7
    assert DefaultRecordBatch(data).validate_crc()


def test_offset_for_timestamp_finds_the_exact_record(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="400", index_interval_bytes="1")
    log.append(split(build([b"a", b"b", b"c"], timestamps=[100, 110, 120])), 0)
    # Compressed, and timestamps out of order as CreateTime allows.
    log.append(split(build([b"d", b"e", b"f"], timestamps=[150, 130, 160], compression=GZIP)), 0)
    for i in range(10):
        log.append(split(build([b"x" * 40, b"y"], timestamps=[200 + 10 * i, 205 + 10 * i])), 0)
    assert len(log.segment_base_offsets) > 2
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(105) == (1, 110)
    assert log.offset_for_timestamp(120) == (2, 120)
    assert log.offset_for_timestamp(121) == (3, 150)
    assert log.offset_for_timestamp(151) == (5, 160)
    assert log.offset_for_timestamp(255) == (17, 255)
    assert log.offset_for_timestamp(256) == (18, 260)
    assert log.offset_for_timestamp(296) is None
    expected = {t: log.offset_for_timestamp(t) for t in range(90, 300, 3)}
    log.close()
    again = open_log(segment_bytes="400", index_interval_bytes="1")
    assert {t: again.offset_for_timestamp(t) for t in range(90, 300, 3)} == expected


def test_max_timestamp_offset_is_the_first_record_with_it(open_log: OpenLog) -> None:
    log = open_log()
    log.append(split(build([b"a", b"b", b"c"], timestamps=[100, 900, 300])), 0)
    log.append(split(build([b"d"], timestamps=[500])), 0)
    assert log.max_timestamp_offset() == (1, 900)


def test_retention_by_time_deletes_old_segments_and_rolls_an_expired_active_one(
    open_log: OpenLog,
) -> None:
    log = open_log(segment_bytes="14", retention_ms="1000")
    for i in range(4):
        log.append(split(batch(2, first_timestamp=10_000 * (i + 1))), 0)
    assert log.segment_base_offsets == [0, 2, 4, 6]
    assert log.apply_retention(now_ms=21_500) == 2
    assert log.segment_base_offsets == [4, 6]
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100)
    assert log.apply_retention(now_ms=100_000) == 2
    assert log.segment_base_offsets == [8]
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)
    assert log.read(8, 100) == b""
    assert log.append(split(batch()), 0).first_offset == 8
    log.close()
    again = open_log(segment_bytes="14", retention_ms="1000")
    assert (again.log_start_offset, again.log_end_offset) == (8, 9)


def test_retention_by_size_keeps_the_newest_bytes(open_log: OpenLog) -> None:
    raw = batch(1, size=100)
    log = open_log(segment_bytes=str(len(raw)), retention_bytes=str(3 * len(raw) - 10))
    for _ in range(6):
        log.append(split(raw), 0)
    # As Kafka: delete only while what remains still reaches retention.bytes.
    assert log.apply_retention(now_ms=0) == 3
    assert log.segment_base_offsets == [3, 4, 5]
    assert log.size_bytes == 3 * len(raw)


def test_compacted_topics_are_not_deleted_by_age(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="14", retention_ms="1", cleanup_policy="compact")
    for _ in range(3):
        log.append(split(batch(key=b"k")), 0)
    assert log.apply_retention(now_ms=10**12) == 0
    assert log.segment_base_offsets == [0, 1, 2]


def test_delete_records_moves_the_log_start_and_it_survives_restart(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="14")
    for _ in range(3):
        log.append(split(batch(3)), 0)
    assert log.delete_records(4) == 4
    assert log.segment_base_offsets == [3, 6]
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100)
    assert offsets_of(log.read(4, 1)) == [3, 4, 5]
    with pytest.raises(OffsetOutOfRange):
        log.delete_records(10)
    log.close()
    again = open_log(segment_bytes="14")
    assert again.log_start_offset == 4
    assert again.delete_records(-1) == 9
    # The active segment stays until a roll, as in Kafka; nothing in it can be read.
    assert again.segment_base_offsets == [6]
    assert again.read(9, 100) == b""


def test_flush_counts_and_checkpoints(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes="14", flush_messages="5")
    log.append(split(batch(3)), 0)
    assert log.unflushed_messages == 3 and not log.flush_due(60)
    log.append(split(batch(3)), 0)
    assert log.flush_due(60)
    log.flush(monotonic_ms=70)
    assert log.unflushed_messages == 0 and log.last_flush_ms == 70
    assert not log.flush_due(80)
    # The log end offset at the flush: recovery after a crash starts there.
    assert (tmp_path / "t-0" / "recovery-point").read_text().split() == ["0", "6"]


def test_flush_in_a_thread_while_appending_and_rolling(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="2000", retention_bytes="20000")
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        while not stop.is_set():
            try:
                log.flush()
            except BaseException as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(1500):
            log.append(split(batch(2, size=50)), i)
            if i % 100 == 0:
                log.apply_retention(i)
    finally:
        stop.set()
        thread.join()
    assert not errors
    log.flush()
    assert log.unflushed_messages == 0
    assert log.log_end_offset == 3000
    assert consume(log, log.log_start_offset, 1 << 16) == list(range(log.log_start_offset, 3000))


def test_close_while_a_thread_flushes(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="2000")
    for i in range(200):
        log.append(split(batch(2, size=50)), i)
    errors: list[BaseException] = []
    started = threading.Event()

    def flusher() -> None:
        started.set()
        try:
            while not log.closed:
                log.flush()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    started.wait()
    log.close()
    thread.join()
    assert not errors
    assert open_log(segment_bytes="2000").log_end_offset == 400


def test_batches_over_max_message_bytes_are_refused(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes="100")
    with pytest.raises(RecordTooLarge):
        log.append(split(batch(1, size=200)), 0)
    assert log.log_end_offset == 0


def test_delete_removes_the_directory(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    log.append(split(batch()), 0)
    log.delete()
    assert not (tmp_path / "t-0").exists()
    with pytest.raises(LogClosed):
        log.append(split(batch()), 0)
