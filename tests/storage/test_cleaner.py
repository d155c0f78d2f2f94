"""The log cleaner: the latest record per key survives, tombstones go after delete.retention.ms,
the active segment and the log end offset never change, and a crash at any step loses nothing."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import iter_batches
from herdless.storage import (
    InvalidRecord,
    InvalidTimestamp,
    LogConfig,
    LogManager,
    PartitionLog,
    StorageIOError,
)
from herdless.storage.cleaner import (
    CLEANER_CHECKPOINT_FILE,
    clean,
    cleanable_ratio,
    needs_cleaning,
)
from tests.storage.batches import build, keyed_records_of, split
from tests.storage.conftest import OpenLog

COMPACT = {"cleanup_policy": "compact", "segment_bytes": "400", "index_interval_bytes": "100"}
DAY = 86_400_000

Row = tuple[int, int, bytes | None, bytes | None]


def put(
    log: PartitionLog,
    pairs: Sequence[tuple[bytes, bytes | None]],
    timestamp: int = 1_000,
    **kwargs: int,
) -> tuple[int, int]:
    raw = build(
        [value for _, value in pairs],
        keys=[key for key, _ in pairs],
        timestamps=[timestamp] * len(pairs),
        **kwargs,
    )
    info = log.append(split(raw), timestamp)
    return info.first_offset, info.last_offset


def rows(log: PartitionLog, offset: int | None = None) -> list[Row]:
    start = log.log_start_offset if offset is None else offset
    return keyed_records_of(log.read(start, 1 << 30))


def latest(rows_: list[Row]) -> dict[bytes | None, Row]:
    return {row[2]: row for row in rows_}


def fill(log: PartitionLog, rounds: int, keys: int = 4, timestamp: int = 1_000) -> None:
    for i in range(rounds):
        put(log, [(b"k%d" % (i % keys), b"v%d" % i)], timestamp + i)


def test_overwritten_keys_keep_only_their_latest_value(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    fill(log, 60)
    log.roll()
    before = rows(log)
    end, start = log.log_end_offset, log.log_start_offset
    stats = clean(log, now_ms=2_000)
    after = rows(log)
    assert after == sorted(latest(before).values())
    assert [row[3] for row in after] == [b"v56", b"v57", b"v58", b"v59"]
    assert (log.log_end_offset, log.log_start_offset) == (end, start)
    assert stats.records_read == 60 and stats.records_kept == 4
    assert stats.end_offset == end and not stats.aborted


def test_the_active_segment_is_never_cleaned(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(**COMPACT)
    fill(log, 30)
    active = tmp_path / "t-0" / f"{log.segment_base_offsets[-1]:020d}.log"
    held = active.read_bytes()
    active_rows = rows(log, log.segment_base_offsets[-1])
    assert len({row[2] for row in active_rows}) < len(active_rows)  # it has duplicates
    clean(log, now_ms=2_000)
    assert active.read_bytes() == held
    assert rows(log)[-len(active_rows) :] == active_rows
    # Everything below it holds one record per key.
    below = [row for row in rows(log) if row[0] < log.segment_base_offsets[-1]]
    assert len({row[2] for row in below}) == len(below)


def test_tombstones_go_only_after_delete_retention_ms(open_log: OpenLog) -> None:
    log = open_log(**COMPACT, delete_retention_ms="500")
    put(log, [(b"a", b"1"), (b"b", b"1")], 1_000)
    put(log, [(b"a", None)], 1_100)
    put(log, [(b"b", b"2")], 1_200)
    log.roll()
    clean(log, now_ms=1_300)
    assert [(r[2], r[3]) for r in rows(log)] == [(b"a", None), (b"b", b"2")]
    # The segment's largest timestamp is 1200: the tombstone lives until 1700.
    clean(log, now_ms=1_700)
    assert [(r[2], r[3]) for r in rows(log)] == [(b"a", None), (b"b", b"2")]
    stats = clean(log, now_ms=1_701)
    assert stats.tombstones_dropped == 1
    assert [(r[2], r[3]) for r in rows(log)] == [(b"b", b"2")]


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_keep_codec_offsets_and_producer_fields(
    open_log: OpenLog, codec: int
) -> None:
    log = open_log(**{**COMPACT, "segment_bytes": "100000"})
    keys = [b"a", b"b", b"c", b"d"]
    # Compressible enough that kafka-python's builder does compress.
    put(log, [(k, b"old" * 50) for k in keys], producer_id=3, producer_epoch=1, base_sequence=0)
    put(log, [(b"b", b"new" * 50), (b"d", None), (b"e", b"e" * 100)], compression=codec)
    put(log, [(b"e", b"last" * 50)] * 3, compression=codec)
    log.roll()
    data = log.read(0, 1 << 30)
    assert [h.compression for _, h in iter_batches(data)] == [0, codec, codec]
    put(log, [(b"a", b"newer" * 30)], compression=codec)
    log.roll()
    clean(log, now_ms=2_000)
    data = log.read(0, 1 << 30)
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset_delta, h.record_count) for h in headers] == [
        (0, 3, 1),
        (4, 2, 2),
        (7, 2, 1),
        (10, 0, 1),
    ]
    assert [h.compression for h in headers] == [0, codec, codec, codec]
    assert (headers[0].producer_id, headers[0].producer_epoch, headers[0].base_sequence) == (
        3,
        1,
        0,
    )
    assert [(r[0], r[2], r[3]) for r in keyed_records_of(data)] == [
        (2, b"c", b"old" * 50),
        (4, b"b", b"new" * 50),
        (5, b"d", None),
        (9, b"e", b"last" * 50),
        (10, b"a", b"newer" * 30),
    ]


def test_reads_timestamps_and_indexes_after_cleaning_and_restart(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    for i in range(80):
        put(log, [(b"k%d" % (i % 10), b"value-%d" % i)], 1_000 + 10 * i)
    log.roll()
    end = log.log_end_offset
    clean(log, now_ms=10_000)
    expected = rows(log)
    kept = [row[0] for row in expected]
    assert kept == list(range(70, 80))

    def check(log: PartitionLog) -> None:
        assert rows(log) == expected
        assert log.log_end_offset == end and log.log_start_offset == 0
        for offset in range(end):
            # A read from any offset starts at the first record at or after it.
            assert rows(log, offset)[0][0] == next(k for k in kept if k >= offset)
        assert log.offset_for_timestamp(1_000) == (70, 1_700)
        assert log.offset_for_timestamp(1_755) == (76, 1_760)
        assert log.offset_for_timestamp(1_791) is None
        assert log.max_timestamp_offset() == (79, 1_790)

    check(log)
    log.close()
    check(open_log(**COMPACT))
    log = open_log(**COMPACT)
    log.close()
    # As after a crash before any flush: every segment is recovered, gaps and all.
    (log.directory / "recovery-point").unlink()
    for index in log.directory.glob("*.index"):
        index.unlink()
    check(open_log(**COMPACT))


def test_log_append_time_batches_keep_their_record_offsets(open_log: OpenLog) -> None:
    log = open_log(**COMPACT, message_timestamp_type="LogAppendTime")
    put(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], 5_000)
    put(log, [(b"a", b"2")], 6_000)
    log.roll()
    clean(log, now_ms=7_000)
    assert [(r[0], r[1]) for r in rows(log)] == [(1, 5_000), (2, 5_000), (3, 6_000)]
    assert log.offset_for_timestamp(4_000) == (1, 5_000)


def test_small_segments_are_merged_up_to_segment_bytes(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACT, "segment_bytes": "100"})
    fill(log, 12, keys=12)
    log.roll()
    assert len(log.segment_base_offsets) == 13
    before = rows(log)
    log.config = dataclasses.replace(log.config, segment_bytes=500)
    stats = clean(log, now_ms=2_000)
    # Each group's sizes add up to at most segment.bytes; nothing goes, yet they merge.
    assert stats.records_kept == 12 and stats.segments_read == 12
    assert log.segment_base_offsets == [0, 6, 12]
    sizes = [(log.directory / f"{base:020d}.log").stat().st_size for base in (0, 6)]
    assert all(400 < size <= 500 for size in sizes)
    assert rows(log) == before
    log.close()
    assert rows(open_log(**COMPACT)) == before


def test_an_emptied_first_segment_keeps_the_log_start_across_restart(open_log: OpenLog) -> None:
    log = open_log(**COMPACT, delete_retention_ms="0")
    put(log, [(b"a", b"1")])
    put(log, [(b"a", None)])
    log.roll()
    put(log, [(b"b", b"1")])
    clean(log, now_ms=DAY)
    assert rows(log) == [(2, 1_000, b"b", b"1")]
    assert log.log_start_offset == 0 and log.segment_base_offsets == [0, 2]
    log.close()
    log = open_log(**COMPACT)
    assert log.log_start_offset == 0 and log.log_end_offset == 3
    assert rows(log, 0) == [(2, 1_000, b"b", b"1")]


def test_min_compaction_lag_leaves_young_records_alone(open_log: OpenLog) -> None:
    log = open_log(**COMPACT, min_compaction_lag_ms="1000")
    fill(log, 20, timestamp=1_000)
    log.roll()
    fill(log, 20, timestamp=5_000)
    log.roll()
    young = [row for row in rows(log) if row[1] >= 5_000]
    stats = clean(log, now_ms=5_500)
    assert stats.end_offset <= 20
    assert [row for row in rows(log) if row[1] >= 5_000] == young
    assert len([row for row in rows(log) if row[1] < 5_000]) == 4
    clean(log, now_ms=7_000)
    assert len(rows(log)) == 4


def test_compacted_topics_refuse_records_without_a_key(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    raw = build([b"x", b"y"], keys=[b"k", None])
    with pytest.raises(InvalidRecord) as caught:
        log.append(split(raw), 0)
    assert caught.value.error_code == ErrorCode.INVALID_RECORD
    assert "without a key" in str(caught.value) and "t-0" in str(caught.value)
    assert log.log_end_offset == 0
    log.close()
    assert open_log().append(split(raw), 0).last_offset == 1


def test_a_keyed_append_still_checks_timestamps(open_log: OpenLog) -> None:
    # keyed: the caller vouches for the keys of batches it built (the coordinator's),
    # which spares only the walk looking for a record without one.
    log = open_log(**COMPACT, message_timestamp_after_max_ms="10")
    now = 100_000
    ok = build([b"x", b"y"], keys=[b"k", b"l"], timestamps=[now, now + 10])
    assert log.append(split(ok), now, keyed=True).last_offset == 1
    late = build([b"x", b"y"], keys=[b"k", b"l"], timestamps=[now, now + 11])
    with pytest.raises(InvalidTimestamp, match="out of range"):
        log.append(split(late), now, keyed=True)
    assert log.log_end_offset == 2


def test_keyless_records_from_before_compaction_are_dropped(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="400")
    log.append(split(build([b"x"], keys=[None])), 0)
    log.append(split(build([b"y"], keys=[b"k"])), 0)
    log.roll()
    log.config = LogConfig.from_topic_configs({"cleanup.policy": "compact"})
    stats = clean(log, now_ms=0)
    assert stats.keyless_dropped == 1
    assert [(r[0], r[2]) for r in rows(log)] == [(1, b"k")]


def test_the_last_batches_of_a_producer_survive_as_headers(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    for seq in range(8):
        raw = build([b"v%d" % seq], keys=[b"k"], producer_id=7, producer_epoch=0, base_sequence=seq)
        log.append(split(raw), 0)
    log.roll()
    stats = clean(log, now_ms=1)
    # The producer's last five batches (sequences 3..7) stay; the first three go.
    assert stats.empty_batches_kept == 4
    headers = [h for _, h in iter_batches(log.read(0, 1 << 30))]
    assert [(h.base_offset, h.record_count, h.base_sequence) for h in headers] == [
        (3, 0, 3),
        (4, 0, 4),
        (5, 0, 5),
        (6, 0, 6),
        (7, 1, 7),
    ]
    assert [row[3] for row in rows(log)] == [b"v7"]
    log.close()
    log = open_log(**COMPACT)
    for seq in (7, 4):
        retry = build(
            [b"v%d" % seq], keys=[b"k"], producer_id=7, producer_epoch=0, base_sequence=seq
        )
        info = log.append(split(retry), 0)
        assert info.duplicate and (info.first_offset, info.last_offset) == (seq, seq)
    following = build([b"v8"], keys=[b"k"], producer_id=7, producer_epoch=0, base_sequence=8)
    assert log.append(split(following), 0).first_offset == 8
    # Once the producer moved on, the emptied headers it forgot go too.
    for seq in range(9, 14):
        raw = build([b"v%d" % seq], keys=[b"k"], producer_id=7, producer_epoch=0, base_sequence=seq)
        log.append(split(raw), 0)
    log.roll()
    clean(log, now_ms=1)
    headers = [h for _, h in iter_batches(log.read(0, 1 << 30))]
    assert [h.base_offset for h in headers] == [9, 10, 11, 12, 13]


def test_manager_cleans_compacted_logs_past_the_dirty_ratio(tmp_path: Path) -> None:
    manager = LogManager(tmp_path / "data")
    manager.open(now_ms=0)
    try:
        configs = {"cleanup.policy": "compact", "segment.bytes": "400"}
        manager.create_topic("c", 1, configs, now_ms=0)
        manager.create_topic("d", 1, {"segment.bytes": "400"}, now_ms=0)
        manager.create_topic("lazy", 1, {**configs, "min.cleanable.dirty.ratio": "0.99"}, now_ms=0)
        for name in ("c", "d", "lazy"):
            partition = manager.partition(name, 0)
            assert partition is not None
            fill(partition, 40)
            partition.roll()
        c = manager.partition("c", 0)
        assert c is not None
        assert cleanable_ratio(c, 2_000) == 1.0
        assert manager.clean(now_ms=2_000) == 2  # c and lazy: both wholly dirty
        assert cleanable_ratio(c, 2_000) == 0.0 and not needs_cleaning(c, 2_000)
        assert manager.clean(now_ms=2_000) == 0
        assert len(rows(c)) == 4
        assert (c.directory / CLEANER_CHECKPOINT_FILE).exists()
        d = manager.partition("d", 0)
        assert d is not None and len(rows(d)) == 40
        # A little new dirt stays below the lazy topic's ratio but not c's default 0.5.
        for name in ("c", "lazy"):
            partition = manager.partition(name, 0)
            assert partition is not None
            fill(partition, 12, timestamp=3_000)
            partition.roll()
        assert manager.clean(now_ms=4_000) == 1
    finally:
        manager.close()


def test_manager_cleans_again_when_a_kept_tombstone_expires(tmp_path: Path) -> None:
    manager = LogManager(tmp_path / "data")
    manager.open(now_ms=0)
    try:
        configs = {"cleanup.policy": "compact", "delete.retention.ms": "1000"}
        manager.create_topic("c", 1, configs, now_ms=0)
        c = manager.partition("c", 0)
        assert c is not None
        put(c, [(b"a", b"1"), (b"b", b"1")], 1_000)
        put(c, [(b"a", None)], 1_000)
        c.roll()
        assert manager.clean(now_ms=1_500) == 1
        assert c.tombstone_expiry_ms == 2_001
        assert manager.clean(now_ms=2_000) == 0
        assert manager.clean(now_ms=2_001) == 1
        assert [(r[2], r[3]) for r in rows(c)] == [(b"b", b"1")]
        assert manager.clean(now_ms=DAY) == 0
    finally:
        manager.close()


def test_a_full_offset_map_leaves_the_rest_dirty(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    for i in range(30):
        put(log, [(b"k%d" % i, b"v")])  # every key new: the map grows with every record
    log.roll()
    bases = log.segment_base_offsets
    stats = clean(log, now_ms=2_000, max_map_keys=1)
    # The first dirty segment always goes in; the map was full after it.
    assert stats.end_offset == bases[1]
    assert cleanable_ratio(log, 2_000) > 0.5
    assert clean(log, now_ms=2_000, max_map_keys=1).end_offset == bases[2]
    assert clean(log, now_ms=2_000).end_offset == log.segment_base_offsets[-1]
    assert len(rows(log)) == 30


def test_new_configs_parse_and_render() -> None:
    config = LogConfig.from_topic_configs(
        {"min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "60000"}
    )
    assert (config.min_cleanable_dirty_ratio, config.min_compaction_lag_ms) == (0.25, 60000)
    assert LogConfig().to_topic_configs()["min.cleanable.dirty.ratio"] == "0.5"
    assert LogConfig().to_topic_configs()["min.compaction.lag.ms"] == "0"
    for bad in ("1.5", "-0.1", "nan", "half"):
        with pytest.raises(ValueError, match="min.cleanable.dirty.ratio"):
            LogConfig.from_topic_configs({"min.cleanable.dirty.ratio": bad})


def test_segments_deleted_meanwhile_abort_the_swap(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(**{**COMPACT, "cleanup_policy": "compact,delete"})
    fill(log, 40)
    log.roll()
    before = rows(log)
    replace = PartitionLog.replace_segments

    def retention_first(self: PartitionLog, old: list, cleaned: object, aborted: list) -> bool:
        bases = self.segment_base_offsets
        self.delete_records(bases[bases.index(old[-1].base_offset) + 1])
        return replace(self, old, cleaned, aborted)  # type: ignore[arg-type]

    monkeypatch.setattr(PartitionLog, "replace_segments", retention_first)
    stats = clean(log, now_ms=2_000)
    assert stats.aborted
    assert rows(log) == [row for row in before if row[0] >= log.log_start_offset]
    assert not list(log.directory.glob("*.cleaned"))
    assert not (log.directory / CLEANER_CHECKPOINT_FILE).exists()


def test_cleaning_in_a_thread_while_appending_and_reading(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACT, "segment_bytes": "2000"})
    stop = threading.Event()
    errors: list[BaseException] = []
    cleanings = 0

    def cleaner() -> None:
        nonlocal cleanings
        while not stop.is_set():
            try:
                clean(log, now_ms=0)
                log.flush()
                cleanings += 1
            except BaseException as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=cleaner)
    thread.start()
    try:
        for i in range(600):
            put(log, [(b"k%d" % (i % 7), b"v%d" % i)], i)
            if i % 50 == 0:
                got = rows(log)
                offsets = [row[0] for row in got]
                assert offsets == sorted(set(offsets))
                assert all(row[3] == b"v%d" % row[0] for row in got)
    finally:
        stop.set()
        thread.join()
    assert not errors and cleanings > 0
    clean(log, now_ms=0)
    assert log.log_end_offset == 600
    assert latest(rows(log)) == {
        b"k%d" % (o % 7): (o, o, b"k%d" % (o % 7), b"v%d" % o) for o in range(593, 600)
    }


def test_a_swap_failing_past_its_commit_completes_on_the_next_open(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(**COMPACT)
    fill(log, 40)
    log.roll()
    expected = sorted(latest(rows(log)).values())
    log.config = dataclasses.replace(log.config, segment_bytes=100_000)
    real_replace = os.replace

    def failing_replace(src: object, dst: object) -> None:
        if str(src).endswith(".log.swap"):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(StorageIOError, match="swapping in cleaned segment 0"):
        clean(log, now_ms=2_000)
    monkeypatch.undo()
    assert (log.directory / f"{0:020d}.log.swap").exists()
    assert log.closed
    log = open_log(**COMPACT)
    assert rows(log) == expected
    assert log.log_end_offset == 40


def test_a_swap_failing_before_its_commit_leaves_the_log_as_it_was(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(**COMPACT)
    fill(log, 40)
    log.roll()
    before = rows(log)
    real_rename = os.rename

    def failing_rename(src: object, dst: object) -> None:
        if str(src).endswith(".log.cleaned"):
            raise OSError(5, "Input/output error")
        real_rename(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(StorageIOError, match="before its commit"):
        clean(log, now_ms=2_000)
    monkeypatch.undo()
    assert rows(log) == before and not log.closed
    assert not [p for p in log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    assert clean(log, now_ms=2_000).records_kept == 4
    log.close()
    assert rows(open_log(**COMPACT)) == sorted(latest(before).values())


# -- a crash at every step --------------------------------------------------------------------


def _unique_offsets(got: list[Row]) -> None:
    offsets = [row[0] for row in got]
    assert offsets == sorted(set(offsets)), "offsets must increase strictly"


def test_a_crash_at_any_step_of_cleaning_loses_and_duplicates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copy the directory before every rename, replace and unlink of a cleaning, as a kill -9
    just then would leave it (files are synced before they are renamed), and open each copy."""
    directory = tmp_path / "t-0"
    small = LogConfig.from_topic_configs(
        {"cleanup.policy": "compact", "segment.bytes": "300", "delete.retention.ms": "0"}
    )
    log = PartitionLog.open(directory, "t", 0, small, 0)
    for i in range(30):
        key = b"k%d" % (i % 5)
        put(log, [(key, None if i % 11 == 10 else b"v%d" % i)], 1_000 + i)
    put(log, [(b"k9", b"in the active segment")], 2_000)
    log.flush()
    before = rows(log)
    end = log.log_end_offset
    # Larger segments from now on, so groups of several segments are merged into one.
    log.config = dataclasses.replace(small, segment_bytes=1200)

    crashes: list[Path] = []

    def crash_here() -> None:
        # Links will do: until the cleaning ends, no file changes once it is renamed or deleted.
        target = tmp_path / f"crash-{len(crashes):03d}"
        shutil.copytree(directory, target, copy_function=os.link)
        crashes.append(target)

    for name in ("rename", "replace", "unlink"):
        real = getattr(os, name)

        def hooked(*args: object, _real=real, **kwargs: object) -> object:  # type: ignore[no-untyped-def]
            crash_here()
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, hooked)
    clean(log, now_ms=DAY)
    monkeypatch.undo()
    # The copies are the disks here; syncing adds nothing but time.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    after = rows(log)
    log.close()
    assert len(after) < len(before) and len(crashes) > 10
    assert any(p.name.endswith(".log.swap") for c in crashes for p in c.iterdir())

    # A crash while the cleaned copy was still being written leaves it torn.
    torn = tmp_path / "crash-torn"
    shutil.copytree(crashes[0], torn)
    cleaned = next(torn.glob("*.log.cleaned"))
    with open(cleaned, "r+b") as f:
        f.truncate(cleaned.stat().st_size // 2)
    crashes.append(torn)

    for crash in crashes:
        for full_recovery in (False, True):
            crashed = tmp_path / f"{crash.name}-{full_recovery}"
            shutil.copytree(crash, crashed)
            if full_recovery:
                (crashed / "recovery-point").unlink()
            reopened = PartitionLog.open(crashed, "t", 0, small, 0)
            try:
                got = rows(reopened)
                _unique_offsets(got)
                assert set(after) <= set(got) <= set(before), crashed.name
                assert reopened.log_end_offset == end
                assert not [p for p in crashed.iterdir() if p.suffix in (".cleaned", ".swap")]
                put(reopened, [(b"k0", b"after the crash")], 3_000)
            finally:
                reopened.close()


# -- random histories -------------------------------------------------------------------------

KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]
RETENTION = 50
_value = st.one_of(st.none(), st.binary(min_size=1, max_size=30))
_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.lists(st.tuples(st.sampled_from(KEYS), _value), min_size=1, max_size=4),
            st.sampled_from([0, 1, 3]),
        ),
        st.tuples(st.just("tick"), st.integers(1, 40)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("clean")),
        st.tuples(st.just("reopen"), st.booleans()),
    ),
    max_size=30,
)


class _Model:
    """What was appended, and what the cleaner may have taken away."""

    def __init__(self) -> None:
        self.appended: dict[int, Row] = {}
        self.latest: dict[bytes, int] = {}
        self.last_clean_ms = -1
        self.cleaned_end = 0

    def check(self, log: PartitionLog) -> None:
        got = rows(log, 0)
        _unique_offsets(got)
        assert log.log_end_offset == len(self.appended)
        for row in got:
            assert row == self.appended[row[0]], "a record changed"
        present = {row[0] for row in got}
        for offset, (_, timestamp, key, value) in self.appended.items():
            if offset in present:
                continue
            assert key is not None
            superseded = self.latest[key] > offset
            expired = value is None and timestamp + RETENTION < self.last_clean_ms
            assert superseded or expired, f"offset {offset} was lost"
        cleaned = [row[2] for row in got if row[0] < self.cleaned_end]
        assert len(cleaned) == len(set(cleaned)), "a key twice in the cleaned section"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops)
def test_random_histories_keep_the_latest_record_of_every_key(ops: list[tuple]) -> None:
    config = LogConfig.from_topic_configs(
        {
            "cleanup.policy": "compact",
            "segment.bytes": "250",
            "index.interval.bytes": "60",
            "delete.retention.ms": str(RETENTION),
        }
    )
    model = _Model()
    now = 1_000
    # Durability is not the question here; syncing would only take time.
    with tempfile.TemporaryDirectory() as tmp, mock.patch("os.fsync"):
        directory = Path(tmp) / "t-0"
        log = PartitionLog.open(directory, "t", 0, config, now)
        try:
            for op in ops:
                if op[0] == "put":
                    pairs, codec = op[1], op[2]
                    first, _ = put(log, pairs, now, compression=codec)
                    for i, (key, value) in enumerate(pairs):
                        model.appended[first + i] = (first + i, now, key, value)
                        model.latest[key] = first + i
                elif op[0] == "tick":
                    now += op[1]
                elif op[0] == "roll":
                    log.roll()
                elif op[0] == "clean":
                    stats = clean(log, now)
                    model.last_clean_ms = now
                    model.cleaned_end = max(model.cleaned_end, stats.end_offset)
                    model.check(log)
                else:
                    log.close()
                    if op[1]:
                        (directory / "recovery-point").unlink(missing_ok=True)
                    log = PartitionLog.open(directory, "t", 0, config, now)
                    model.check(log)
            log.roll()
            for when in (now, now + RETENTION + 1):
                stats = clean(log, when)
                model.last_clean_ms = when
                model.cleaned_end = stats.end_offset
                model.check(log)
            # All is below the active segment and every tombstone's time has come: what is
            # left is one record per key, its latest, unless that was a tombstone.
            got = rows(log, 0)
            assert {row[2]: row for row in got} == {
                key: model.appended[offset]
                for key, offset in model.latest.items()
                if model.appended[offset][3] is not None
            }
            assert len(got) == len({row[2] for row in got})
        finally:
            log.close()
