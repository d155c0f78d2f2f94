"""The leader-epoch cache a partition log keeps beside its batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from herdless.storage import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry
from tests.storage.batches import batch, restamped, split
from tests.storage.conftest import OpenLog

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def test_appends_record_where_each_new_epoch_starts(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    for epoch in (2, 2, 3, 5, 5):
        log.append(split(batch(2)), 0, leader_epoch=epoch)
    assert log.leader_epoch_entries == [EpochEntry(2, 0), EpochEntry(3, 4), EpochEntry(5, 6)]
    assert log.latest_epoch == 5
    assert (tmp_path / "t-0" / EPOCH_CHECKPOINT).read_text() == "0\n3\n2 0\n3 4\n5 6\n"
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(4) == (3, 6)
    assert log.end_offset_for_epoch(1) == (1, 0)
    assert log.end_offset_for_epoch(6) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert [log.epoch_for_offset(o) for o in (0, 3, 4, 9)] == [2, 2, 3, 5]


def test_without_a_leader_epoch_the_batches_own_count(open_log: OpenLog) -> None:
    log = open_log()
    log.append(split(restamped(batch(), leader_epoch=-1)), 0)
    assert log.leader_epoch_entries == []
    log.append(split(restamped(batch(), leader_epoch=4)), 0)
    assert log.leader_epoch_entries == [EpochEntry(4, 1)]


def test_a_duplicate_append_records_no_epoch(open_log: OpenLog) -> None:
    log = open_log()
    raw = batch(producer_id=1, producer_epoch=0, base_sequence=0)
    log.append(split(raw), 0, leader_epoch=1)
    assert log.append(split(raw), 0, leader_epoch=2).duplicate
    assert log.leader_epoch_entries == [EpochEntry(1, 0)]


def test_a_new_leader_assigns_its_epoch_before_appending(open_log: OpenLog) -> None:
    log = open_log()
    log.append(split(batch(3)), 0, leader_epoch=1)
    log.assign_leader_epoch(4)
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(4) == (4, 3)
    log.append(split(batch()), 0, leader_epoch=4)
    assert log.leader_epoch_entries == [EpochEntry(1, 0), EpochEntry(4, 3)]


@pytest.mark.parametrize("damage", ["missing", "garbage", "wrong count"])
def test_a_lost_checkpoint_is_rebuilt_from_the_batches(
    open_log: OpenLog, tmp_path: Path, damage: str
) -> None:
    log = open_log(segment_bytes="300")
    epochs = [-1, -1, 0, 0, 2, 2, 2, -1, 3, 3, 3, 3, 3, 3, 7, 7]
    for epoch in epochs:
        log.append(split(restamped(batch(2, size=20), leader_epoch=epoch)), 0)
    assert len(log.segment_base_offsets) > 3
    expected = log.leader_epoch_entries
    assert [e.epoch for e in expected] == [0, 2, 3, 7]
    log.close()
    path = tmp_path / "t-0" / EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff")
    else:
        path.write_text("0\n9\n0 4\n")
    again = open_log(segment_bytes="300")
    assert again.leader_epoch_entries == expected
    assert path.read_text() == "0\n4\n0 4\n2 8\n3 16\n7 28\n"


def test_data_without_epochs_is_read_once(open_log: OpenLog, tmp_path: Path) -> None:
    """A lone broker's own records carry no epoch: nothing to rebuild the next time."""
    log = open_log(segment_bytes="300")
    for _ in range(10):
        log.append(split(restamped(batch(2, size=20), leader_epoch=-1)), 0)
    path = tmp_path / "t-0" / EPOCH_CHECKPOINT
    assert not path.exists()
    log.close()
    assert path.read_text() == "0\n0\n"
    path.unlink()
    assert open_log(segment_bytes="300").leader_epoch_entries == []
    assert path.read_text() == "0\n0\n"


def test_a_checkpoint_ahead_of_the_log_is_cut_back(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    log.append(split(batch(3)), 0, leader_epoch=1)
    log.append(split(batch(3)), 0, leader_epoch=2)
    log.close()
    directory = tmp_path / "t-0"
    # As a crash leaves it: the epoch written, the batch lost before it was synced.
    segment = directory / "00000000000000000000.log"
    segment.write_bytes(segment.read_bytes()[: len(batch(3))])
    (directory / "recovery-point").unlink()
    again = open_log()
    assert again.log_end_offset == 3
    assert again.leader_epoch_entries == [EpochEntry(1, 0)]
    assert (directory / EPOCH_CHECKPOINT).read_text() == "0\n1\n1 0\n"


def test_the_log_start_moving_forgets_older_epochs(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="14", retention_ms="1000")
    for epoch in (1, 1, 2, 3):
        log.append(split(batch(2, first_timestamp=10 * epoch)), 0, leader_epoch=epoch)
    log.delete_records(3)
    assert log.leader_epoch_entries == [EpochEntry(1, 3), EpochEntry(2, 4), EpochEntry(3, 6)]
    log.apply_retention(now_ms=10**9)
    assert log.log_start_offset == 8
    assert log.leader_epoch_entries == [EpochEntry(3, 8)]
    log.close()
    # Reopened, an entry at the log end names no batch and goes, as Kafka's loader drops it.
    assert open_log(segment_bytes="14").leader_epoch_entries == []
