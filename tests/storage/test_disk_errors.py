"""A full disk at each place the log writes: what fails says so with StorageIOError (the
broker's KAFKA_STORAGE_ERROR), what was acknowledged stays, and the log works again once
there is room. tests/test_disk_full.py does the same with a real full filesystem."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from herdless.storage import LogConfig, LogManager, PartitionLog, StorageIOError
from herdless.storage.checkpoint import read_offset
from herdless.storage.index import OffsetIndex
from tests.storage.batches import batch, offsets_of, split
from tests.storage.conftest import OpenLog
from tests.storage.disk_faults import containing, ending, no_space

Reports = list[tuple[str, str]]


def reporting(partition_log: PartitionLog) -> Reports:
    reports: Reports = []
    partition_log.on_io_error = lambda operation, name, exc: reports.append(
        (operation, exc.errno_name)
    )
    return reports


def test_an_index_that_cannot_be_written_costs_no_record(
    open_log: OpenLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(index_interval_bytes="1")
    reports = reporting(log)
    log.append(split(batch(2)), 0)
    log.flush(checkpoint_now=True)
    with no_space(monkeypatch, ending(".index", ".timeindex", ".tmp")):
        for _ in range(5):
            log.append(split(batch(2)), 0)
        log.flush(checkpoint_now=True)
        # The records are synced, the index is not whole: a crash now must check the
        # segment again, so the recovery point stays where it was.
        assert read_offset(tmp_path / "t-0" / "recovery-point") == 2
        crashed = tmp_path / "crashed"
        shutil.copytree(tmp_path / "t-0", crashed / "t-0")
    assert reports == [("index", "ENOSPC")]
    log.flush(checkpoint_now=True)
    assert read_offset(tmp_path / "t-0" / "recovery-point") == 12
    on_disk = OffsetIndex.load(tmp_path / "t-0" / f"{0:020d}.index", 0, 1000, 1 << 20, None)
    assert len(on_disk) == 5 and on_disk.to_bytes() == log._segments[0].offset_index.to_bytes()
    again = PartitionLog.open(crashed / "t-0", "t", 0, log.config, 0)
    try:
        assert offsets_of(again.read(0, 1 << 20)) == list(range(12))
        assert offsets_of(again.read(9, 1)) == [8, 9]
    finally:
        again.close()


def test_a_segment_that_cannot_be_created_leaves_the_active_one_taking_appends(
    open_log: OpenLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(segment_bytes="300")
    log.append(split(batch(1, size=100)), 0)
    with no_space(monkeypatch, containing(f"{1:020d}.")):
        with pytest.raises(StorageIOError, match="No space left on device"):
            log.append(split(batch(1, size=100)), 0)
        # Still the active segment, unsealed: a batch that fits goes in.
        assert log.append(split(batch(1, size=10)), 0).first_offset == 1
    assert log.segment_base_offsets == [0]
    assert sorted(p.name for p in (tmp_path / "t-0").glob(f"{2:020d}.*")) == []
    assert log.append(split(batch(1, size=100)), 0).first_offset == 2
    assert log.segment_base_offsets == [0, 2]
    assert offsets_of(log.read(0, 1 << 20)) == [0, 1, 2]


def test_a_leader_epoch_that_cannot_be_checkpointed_fails_the_append(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    log.append(split(batch(1)), 0, leader_epoch=1)
    full = no_space(monkeypatch, containing("leader-epoch-checkpoint"))
    with full, pytest.raises(StorageIOError):
        log.append(split(batch(1)), 0, leader_epoch=2)
    # Neither the log nor the epochs ran ahead of what was written.
    assert log.log_end_offset == 1
    assert log.latest_epoch == 1
    assert log.append(split(batch(1)), 0, leader_epoch=2).first_offset == 1
    assert log.latest_epoch == 2


def test_checkpoints_that_cannot_be_written_fail_no_flush(
    open_log: OpenLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    reports = reporting(log)
    log.append(split(batch(3)), 0)
    with no_space(monkeypatch, ending(".tmp")):
        log.flush(checkpoint_now=True)
    assert reports == [("checkpoint", "ENOSPC")]
    assert read_offset(tmp_path / "t-0" / "recovery-point") is None
    log.flush(checkpoint_now=True)
    assert read_offset(tmp_path / "t-0" / "recovery-point") == 3


def test_delete_records_is_refused_when_it_cannot_be_made_durable(
    open_log: OpenLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    log.append(split(batch(5)), 0)
    with no_space(monkeypatch, containing("log-start-offset")), pytest.raises(StorageIOError):
        log.delete_records(3)
    assert log.log_start_offset == 0
    assert log.delete_records(3) == 3
    assert read_offset(tmp_path / "t-0" / "log-start-offset") == 3


def test_retention_goes_on_without_its_checkpoint(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(segment_bytes="100", retention_bytes="100")
    reports = reporting(log)
    for _ in range(3):
        log.append(split(batch(1, size=80)), 0)
    with no_space(monkeypatch, containing("log-start-offset")):
        assert log.apply_retention(0) == 2
    assert log.log_start_offset == 2
    assert ("checkpoint", "ENOSPC") in reports
    assert offsets_of(log.read(2, 1 << 20)) == [2]


def test_a_topic_that_cannot_be_created_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager(tmp_path / "data", LogConfig())
    manager.open(now_ms=0)
    manager.create_topic("kept", 1)
    metadata = (tmp_path / "data" / "topics.json").read_bytes()
    try:
        with no_space(monkeypatch, containing("full-1")), pytest.raises(StorageIOError):
            manager.create_topic("full", 3)
        assert list(manager.topics) == ["kept"]
        assert (tmp_path / "data" / "topics.json").read_bytes() == metadata
        assert sorted(p.name for p in (tmp_path / "data").glob("full-*")) == []
        assert len(manager.create_topic("full", 3).partitions) == 3
    finally:
        manager.close()
