"""A log cut short or damaged at any byte opens, keeping exactly the batches before the damage."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herdless.protocol.records import PARTITION_LEADER_EPOCH, iter_batches
from herdless.storage import LogConfig, LogManager, PartitionLog
from herdless.storage import segment as segment_module
from herdless.storage.checkpoint import write_offset
from herdless.storage.manager import CLEAN_SHUTDOWN_FILE
from tests.storage.batches import GZIP, build, offsets_of, split

CONFIG = LogConfig.from_topic_configs({"segment.bytes": "3000", "index.interval.bytes": "200"})
BATCHES = 40


@dataclass(frozen=True)
class Pristine:
    directory: Path
    last_segment: str
    # (position, size, first offset, last offset) of each batch of the last segment
    batches: list[tuple[int, int, int, int]]
    base_offset: int
    all_offsets: list[int]


def _open(directory: Path) -> PartitionLog:
    return PartitionLog.open(directory, "t", 0, CONFIG, now_ms=0)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    directory = tmp_path_factory.mktemp("pristine") / "t-0"
    log = _open(directory)
    for i in range(BATCHES):
        count = 1 + i % 4
        values = [bytes([i]) * (20 + 7 * j) for j in range(count)]
        timestamps = [10 * i + j for j in range(count)]
        raw = build(values, timestamps=timestamps, compression=GZIP if i % 3 == 0 else 0)
        log.append(split(raw), now_ms=0)
    all_offsets = offsets_of(log.read(0, 1 << 30))
    base = log.segment_base_offsets[-1]
    log.close()
    # As a crash leaves it when the last segment was never synced: that segment gets checked.
    write_offset(directory / "recovery-point", base)
    name = f"{base:020d}.log"
    data = (directory / name).read_bytes()
    batches = [(p, h.size, h.base_offset, h.last_offset) for p, h in iter_batches(data)]
    assert len(batches) >= 3 and base > 0
    return Pristine(directory, name, batches, base, all_offsets)


@pytest.fixture
def copy(pristine: Pristine) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "t-0"
        shutil.copytree(pristine.directory, target)
        yield target


def _check_holds(directory: Path, pristine: Pristine, kept_batches: int) -> None:
    """The log holds the first `kept_batches` batches of its last segment, and works."""
    log = _open(directory)
    try:
        if kept_batches:
            expected_end = pristine.batches[kept_batches - 1][3] + 1
        else:
            expected_end = pristine.base_offset
        assert log.log_end_offset == expected_end
        assert offsets_of(log.read(0, 1 << 30)) == pristine.all_offsets[:expected_end]
        for offset in range(max(expected_end - 5, 0), expected_end):
            assert offset in offsets_of(log.read(offset, 1))
        assert log.append(split(build([b"new"])), now_ms=0).first_offset == expected_end
    finally:
        log.close()
    again = _open(directory)
    try:
        assert again.log_end_offset == expected_end + 1
        assert offsets_of(again.read(expected_end, 1 << 20)) == [expected_end]
    finally:
        again.close()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_truncated_last_segment_keeps_the_whole_batches(
    pristine: Pristine, data: st.DataObject
) -> None:
    last = pristine.batches[-1]
    cut = data.draw(st.integers(0, last[0] + last[1]), label="cut")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        shutil.copytree(pristine.directory, directory)
        with open(directory / pristine.last_segment, "r+b") as f:
            f.truncate(cut)
        kept = sum(1 for position, size, _, _ in pristine.batches if position + size <= cut)
        _check_holds(directory, pristine, kept)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_corrupt_byte_cuts_the_log_before_its_batch(
    pristine: Pristine, data: st.DataObject
) -> None:
    last = pristine.batches[-1]
    where = data.draw(st.integers(0, last[0] + last[1] - 1), label="where")
    flip = data.draw(st.integers(1, 255), label="flip")
    damaged = next(i for i, b in enumerate(pristine.batches) if b[0] <= where < b[0] + b[1])
    relative = where - pristine.batches[damaged][0]
    # The partition leader epoch lies outside the CRC: neither Kafka nor we can see damage there.
    if PARTITION_LEADER_EPOCH <= relative < PARTITION_LEADER_EPOCH + 4:
        return
    # So does the base offset. Lowered, offsets go backwards and the batch is cut; raised
    # within the indexes' reach, it reads as a gap compaction could have left, as in Kafka.
    if relative < 8:
        _, _, first, last = pristine.batches[damaged]
        raw = bytearray(first.to_bytes(8, "big", signed=True))
        raw[relative] ^= flip
        changed = int.from_bytes(raw, "big", signed=True)
        if changed > first and changed + last - first - pristine.base_offset <= 2**31 - 1:
            return
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "t-0"
        shutil.copytree(pristine.directory, directory)
        with open(directory / pristine.last_segment, "r+b") as f:
            f.seek(where)
            byte = f.read(1)[0]
            f.seek(where)
            f.write(bytes([byte ^ flip]))
        _check_holds(directory, pristine, damaged)


def test_garbage_after_the_last_batch_is_cut(copy: Path, pristine: Pristine) -> None:
    with open(copy / pristine.last_segment, "ab") as f:
        f.write(b"\x00" * 100 + b"\xff" * 7)
    _check_holds(copy, pristine, len(pristine.batches))


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("damage", ["missing", "torn", "garbage", "empty"])
def test_damaged_indexes_are_rebuilt(
    copy: Path, pristine: Pristine, suffix: str, damage: str
) -> None:
    timestamps = range(0, 10 * BATCHES + 5, 7)
    good = _open(copy)
    expected_times = [good.offset_for_timestamp(t) for t in timestamps]
    expected_reads = [offsets_of(good.read(o, 1)) for o in range(good.log_end_offset)]
    good.close()
    for path in copy.glob("*" + suffix):
        if damage == "missing":
            path.unlink()
        elif damage == "torn":
            path.write_bytes(path.read_bytes() + b"\x01\x02\x03")
        elif damage == "garbage":
            path.write_bytes(b"\x7f\xff\xff\xff" * 6)
        else:
            path.write_bytes(b"")
    log = _open(copy)
    try:
        assert [log.offset_for_timestamp(t) for t in timestamps] == expected_times
        assert [offsets_of(log.read(o, 1)) for o in range(log.log_end_offset)] == expected_reads
    finally:
        log.close()
    for path in copy.glob("*.log"):
        for index_suffix in (".index", ".timeindex"):
            assert path.with_suffix(index_suffix).exists()
    if damage == "empty" and suffix == ".index":
        # A sparse index may legitimately be empty: nothing says it needs a rebuild.
        return
    assert {p.name: p.read_bytes() for p in copy.glob("*index")} == {
        p.name: p.read_bytes() for p in pristine.directory.glob("*index")
    }


def test_stray_files_are_removed(copy: Path, pristine: Pristine) -> None:
    strays = [
        copy / "00000000000000000000.log.cleaned",
        copy / "00000000000000000000.log.swap",
        copy / "00000000000000000000.log.deleted",
        copy / "00000000000000099999.index",
        copy / "log-start-offset.tmp",
    ]
    for path in strays:
        path.write_bytes(b"junk")
    # An empty segment between two others, as a crash during a roll could leave.
    (copy / f"{pristine.base_offset - 1:020d}.log").write_bytes(b"")
    log = _open(copy)
    try:
        assert log.log_end_offset == len(pristine.all_offsets)
        assert pristine.base_offset - 1 not in log.segment_base_offsets
    finally:
        log.close()
    assert not any(path.exists() for path in strays)


def test_an_unsynced_middle_segment_is_checked_and_what_follows_dropped(copy: Path) -> None:
    log = _open(copy)
    bases = log.segment_base_offsets
    log.close()
    # As after a crash before any flush: no recovery point, so every segment is checked.
    (copy / "recovery-point").unlink()
    middle = copy / f"{bases[1]:020d}.log"
    data = bytearray(middle.read_bytes())
    data[100] ^= 0xFF
    middle.write_bytes(bytes(data))
    first_bad = next(p for p, h in iter_batches(bytes(data)) if p + h.size > 100)
    survivors = [h for p, h in iter_batches(bytes(data)) if p < first_bad]
    log = _open(copy)
    try:
        expected_end = survivors[-1].last_offset + 1 if survivors else bases[1]
        assert log.segment_base_offsets == bases[:2]
        assert log.log_end_offset == expected_end
        assert log.append(split(build([b"x"])), 0).first_offset == expected_end
    finally:
        log.close()


def test_a_log_end_below_the_checkpointed_start_starts_empty_there(
    copy: Path, pristine: Pristine
) -> None:
    log = _open(copy)
    end = log.log_end_offset
    assert log.delete_records(end) == end
    log.close()
    with open(copy / pristine.last_segment, "r+b") as f:
        f.truncate(pristine.batches[1][0])
    log = _open(copy)
    try:
        assert (log.log_start_offset, log.log_end_offset) == (end, end)
        assert log.append(split(build([b"x"])), 0).first_offset == end
    finally:
        log.close()


class _CrcCount:
    """Counts the batches whose CRC opening a log checks: the cost recovery scales with."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.checked = 0
        real = segment_module.crc_matches

        def counting(buf: bytes | memoryview, header: object) -> bool:
            self.checked += 1
            return real(buf, header)  # type: ignore[arg-type]

        monkeypatch.setattr(segment_module, "crc_matches", counting)


def test_a_clean_shutdown_checks_nothing_and_a_crash_only_the_unsynced_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def manager() -> LogManager:
        logs = LogManager(tmp_path, LogConfig(index_interval_bytes=100))
        logs.open(0)
        return logs

    logs = manager()
    partition_log = logs.create_topic("t", 1).partitions[0]
    for i in range(200):
        partition_log.append(split(build([bytes([i]) * 50])), now_ms=0)
    logs.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    crcs = _CrcCount(monkeypatch)
    logs = manager()
    assert crcs.checked == 0
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    partition_log = logs.partition("t", 0)
    assert partition_log is not None and partition_log.log_end_offset == 200
    # A crash after a flush and seven more batches: only those seven are checked.
    partition_log.flush(checkpoint_now=True)
    for i in range(7):
        partition_log.append(split(build([bytes([i]) * 50])), now_ms=0)
    with partition_log._lock:  # a crash: descriptors go, nothing is flushed or marked
        partition_log._close_segments()
    logs._topics.clear()
    os.close(logs._lock_fd or -1)
    logs._lock_fd = None
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    logs = manager()
    assert crcs.checked == 7
    reopened = logs.partition("t", 0)
    assert reopened is not None and reopened.log_end_offset == 207
    assert offsets_of(reopened.read(0, 1 << 20)) == list(range(207))
    logs.close()
