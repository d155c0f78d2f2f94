"""Damage to what was synced: found when the log opens (gaps, headers that do not parse, a
log ending below its recovery point) or by scrubbing sealed segments (CRCs), never served
as sound, kept across restarts; and files the log cannot use, named in one error."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from herdless.protocol.records import iter_batches
from herdless.storage import CorruptRecord, LogConfig, LogFileError, PartitionLog
from herdless.storage.checkpoint import write_offset
from herdless.storage.damage import Damage, DamageKind
from herdless.storage.scrubber import scrub_segment
from tests.storage.batches import batch, offsets_of, split
from tests.storage.disk_faults import ending, no_space

CONFIG = LogConfig.from_topic_configs({"segment.bytes": "1000", "index.interval.bytes": "200"})
RECORDS = 40


def open_at(directory: Path, config: LogConfig = CONFIG, *, clean: bool = False) -> PartitionLog:
    return PartitionLog.open(directory, "t", 0, config, 0, clean_shutdown=clean)


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """A closed log of RECORDS one-record batches over several sealed segments, all synced."""
    path = tmp_path / "t-0"
    log = open_at(path)
    for i in range(RECORDS):
        log.append(split(batch(1, size=60, first_timestamp=1000 + i)), 0)
    assert len(log.segment_base_offsets) >= 5
    log.close()
    return path


def segment(directory: Path, n: int, suffix: str = ".log") -> Path:
    return sorted(directory.glob("*.log"))[n].with_suffix(suffix)


def base_of(path: Path) -> int:
    return int(path.name.split(".")[0])


def readable(log: PartitionLog, offset: int) -> list[int]:
    return offsets_of(log.read(offset, 1 << 20))


def batches_in(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch of a segment file."""
    return [(p, h.size, h.base_offset) for p, h in iter_batches(path.read_bytes())]


def flip_byte_in_batch(path: Path, n: int) -> int:
    """Flip a byte inside the record of the n-th one-record batch (not its header): its CRC
    no longer matches. Returns its offset."""
    position, size, base = batches_in(path)[n]
    data = bytearray(path.read_bytes())
    data[position + size - 5] ^= 0xFF
    path.write_bytes(bytes(data))
    return base


# -- gaps ---------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_middle_segment_lost_is_a_gap_never_skipped_over(directory: Path, how: str) -> None:
    middle = segment(directory, 2)
    first, end = base_of(middle), base_of(segment(directory, 3))
    if how == "deleted":
        for suffix in (".log", ".index", ".timeindex"):
            middle.with_suffix(suffix).unlink()
    else:
        middle.write_bytes(b"")
    log = open_at(directory, clean=True)
    try:
        assert log.damage == [Damage(first, end, DamageKind.MISSING)]
        # Up to the gap, then nothing past it; in it, an error; after it, the rest.
        assert readable(log, 0) == list(range(first))
        with pytest.raises(CorruptRecord, match=f"offsets {first}..{end - 1} of t-0 are missing"):
            log.read(first, 1 << 20)
        assert readable(log, end) == list(range(end, RECORDS))
    finally:
        log.close()
    again = open_at(directory, clean=True)
    assert again.damage == [Damage(first, end, DamageKind.MISSING)]
    # Records past the damage go on from the log end; DeleteRecords past it forgets it.
    assert again.append(split(batch(1)), 0).first_offset == RECORDS
    again.delete_records(end)
    assert again.damage == []
    again.close()
    assert open_at(directory, clean=True).damage == []


def test_gaps_a_compaction_left_are_no_damage(directory: Path) -> None:
    middle = segment(directory, 2)
    for suffix in (".log", ".index", ".timeindex"):
        middle.with_suffix(suffix).unlink()
    compacted = LogConfig.from_topic_configs({"cleanup.policy": "compact"})
    log = open_at(directory, compacted, clean=True)
    assert log.damage == []
    log.close()


def test_a_log_ending_below_its_recovery_point_goes_on_after_it(directory: Path) -> None:
    last = segment(directory, -1)
    base = base_of(last)
    last.write_bytes(b"")  # every record of the last segment was synced, and is gone
    log = open_at(directory)
    try:
        assert log.damage == [Damage(base, RECORDS, DamageKind.MISSING)]
        assert log.log_end_offset == RECORDS
        # New records never take the offsets consumers may have read before.
        assert log.append(split(batch(1)), 0).first_offset == RECORDS
        with pytest.raises(CorruptRecord):
            log.read(base, 1 << 20)
        assert readable(log, RECORDS) == [RECORDS]
    finally:
        log.close()


# -- bytes that do not parse ---------------------------------------------------------------


def test_garbage_in_a_synced_segment_is_kept_and_not_served(directory: Path) -> None:
    middle = segment(directory, 1)
    first, end = base_of(middle), base_of(segment(directory, 2))
    position, _, damaged = batches_in(middle)[2]
    data = bytearray(middle.read_bytes())
    data[position : position + 40] = b"\xee" * 40  # the third batch's header
    middle.write_bytes(bytes(data))
    # The index, no longer matching, is rebuilt: that reads the garbage.
    middle.with_suffix(".index").unlink()
    log = open_at(directory, clean=True)
    try:
        [damage] = log.damage
        assert damage == Damage(damaged, end, DamageKind.UNREADABLE)
        assert first < damaged
        # Kept as it was, the segments after it too: only the damage goes unserved.
        assert middle.read_bytes() == bytes(data)
        assert log.segment_base_offsets == [base_of(p) for p in sorted(directory.glob("*.log"))]
        assert readable(log, 0) == list(range(damage.first_offset))
        with pytest.raises(CorruptRecord, match="do not parse"):
            log.read(damage.first_offset, 1 << 20)
        assert readable(log, end) == list(range(end, RECORDS))
    finally:
        log.close()


# -- the scrubber -------------------------------------------------------------------------


def test_scrubbing_finds_a_batch_that_fails_its_crc(directory: Path) -> None:
    middle = segment(directory, 2)
    base = last = flip_byte_in_batch(middle, 3)
    # Synced and cleanly closed: opening reads none of it.
    log = open_at(directory, clean=True)
    try:
        assert log.damage == []
        paced: list[int] = []
        [sealed] = [s for s in log.sealed_segments() if s.path == middle]
        found = scrub_segment(sealed, lambda size: paced.append(size) or True)
        assert found == [Damage(base, last + 1, DamageKind.CORRUPT)]
        assert sum(paced) == middle.stat().st_size
        assert log.record_damage(sealed.segment, found[0])
        assert not log.record_damage(sealed.segment, found[0])  # known already
        assert readable(log, 0) == list(range(base))
        with pytest.raises(CorruptRecord, match="fails its CRC"):
            log.read(base, 1 << 20)
        assert readable(log, last + 1) == list(range(last + 1, RECORDS))
        # The others are sound.
        assert all(
            scrub_segment(s, lambda size: True) == []
            for s in log.sealed_segments()
            if s.path != middle
        )
    finally:
        log.close()
    assert open_at(directory, clean=True).damage == [Damage(base, last + 1, DamageKind.CORRUPT)]


def test_scrubbing_stops_when_told(directory: Path) -> None:
    log = open_at(directory, clean=True)
    sealed = log.sealed_segments()[0]
    seen: list[int] = []
    assert scrub_segment(sealed, lambda size: seen.append(size) is not None) == []
    assert len(seen) == 1
    log.close()


# -- indexes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-3]), id="torn"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-8]), id="short"),
        pytest.param(lambda p: p.write_bytes(os.urandom(len(p.read_bytes()))), id="garbage"),
        pytest.param(lambda p: p.write_bytes(b"\0" * 64), id="zeros"),
        pytest.param(lambda p: p.unlink(), id="missing"),
    ],
)
@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_a_damaged_index_is_rebuilt(
    directory: Path, spoil: Callable[[Path], object], suffix: str
) -> None:
    middle = segment(directory, 2, suffix)
    good = middle.read_bytes()
    spoil(middle)
    log = open_at(directory, clean=True)
    try:
        assert log.damage == []
        assert readable(log, 0) == list(range(RECORDS))
        for offset in range(RECORDS):
            assert offset in readable(log, offset)
        # Rebuilt, except an offset index that only lacks its last entries: lookups
        # scan a little further, and find every batch all the same.
        if middle.read_bytes() != good:
            assert suffix == ".index" and good.startswith(middle.read_bytes())
    finally:
        log.close()


def test_another_segments_index_is_not_believed(directory: Path) -> None:
    shutil.copy(segment(directory, 1, ".index"), segment(directory, 2, ".index"))
    log = open_at(directory, clean=True)
    try:
        for offset in range(RECORDS):
            assert offset in readable(log, offset)
    finally:
        log.close()


# -- files that cannot be used ------------------------------------------------------------------


def test_files_the_log_cannot_use_are_named(directory: Path, tmp_path: Path) -> None:
    middle = segment(directory, 2)
    middle.unlink()
    middle.mkdir()
    with pytest.raises(LogFileError, match=f"{middle} is a directory, not a file"):
        open_at(directory)
    middle.rmdir()
    middle.symlink_to(tmp_path / "elsewhere.log")
    with pytest.raises(LogFileError, match="is a symbolic link to .*elsewhere.log, which does not"):
        open_at(directory)
    middle.unlink()
    stray = directory / "backup.log"
    stray.write_bytes(b"")
    with pytest.raises(LogFileError, match=f"{stray} is not named as a segment is"):
        open_at(directory)


def test_an_index_that_cannot_be_rebuilt_names_its_segment(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    middle = segment(directory, 2)
    middle.with_suffix(".index").unlink()
    with no_space(monkeypatch, ending(".tmp")), pytest.raises(LogFileError) as raised:
        open_at(directory, clean=True)
    assert str(raised.value) == (
        f"cannot open the log of t-0: {middle.with_suffix('.index.tmp')}: No space left on device"
    )


def test_a_partition_directory_that_is_a_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    path.write_bytes(b"")
    with pytest.raises(LogFileError, match=f"{path} is not a directory"):
        open_at(path)


def test_an_old_recovery_point_is_no_damage(directory: Path) -> None:
    write_offset(directory / "recovery-point", 3)
    log = open_at(directory)
    assert log.damage == [] and log.log_end_offset == RECORDS
    log.close()
