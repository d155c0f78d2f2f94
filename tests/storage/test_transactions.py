"""Transactions in a partition log: open transactions and the last stable offset, markers
that end them, the aborted-transaction index in Kafka's format, and recovery of both."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from herdless.protocol.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    InvalidControlRecord,
    build_marker_batch,
    marker_of,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import InvalidBatch, parse_header, split_batches
from herdless.storage import AppendInfo, InvalidProducerEpoch, PartitionLog
from herdless.storage.cleaner import clean
from herdless.storage.errors import InvalidTxnState, TransactionCoordinatorFenced
from herdless.storage.log.local_log import PRODUCER_SNAPSHOT_FILE
from herdless.storage.transaction_index import AbortedTxn
from tests.storage.batches import batch, build, offsets_of, split
from tests.storage.conftest import OpenLog

COMMIT = EndTransactionMarker(ControlRecordType.COMMIT, 0)
ABORT = EndTransactionMarker(ControlRecordType.ABORT, 0)


class Producer:
    """A transactional producer's writes to one log: sequences follow on by themselves."""

    def __init__(self, log: PartitionLog, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, count: int = 1, *, transactional: bool = True) -> AppendInfo:
        raw = batch(
            count,
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.seq,
            transactional=transactional,
        )
        self.seq += count
        return self.log.append(split(raw), 0)

    def end(self, marker: EndTransactionMarker, *, epoch: int | None = None) -> AppendInfo:
        epoch = self.epoch if epoch is None else epoch
        return self.log.append_end_txn_marker(self.pid, epoch, marker, 0)


def txn_index_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.txnindex"))


# -- control records --------------------------------------------------------------------


def test_markers_are_written_in_kafkas_layout_and_read_back() -> None:
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 5)
    assert marker.key() == b"\x00\x00\x00\x01"  # version 0, COMMIT
    assert marker.value() == b"\x00\x00\x00\x00\x00\x05"  # version 0, coordinator epoch 5
    raw = build_marker_batch(marker, producer_id=7, producer_epoch=2, timestamp_ms=1_000)
    header = parse_header(raw)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, -1)
    assert marker_of(raw, header) == marker
    # kafka-python reads it as a control batch with a valid CRC.
    decoded = DefaultRecordBatch(raw)
    assert decoded.is_control_batch and decoded.is_transactional and decoded.validate_crc()
    assert [(r.key, r.value) for r in decoded] == [(marker.key(), marker.value())]


def test_newer_marker_versions_are_read_and_other_control_records_refused() -> None:
    longer = b"\x00\x01\x00\x00\x00\x09" + b"\x00"  # a later value version with a tagged field
    assert EndTransactionMarker.decode(b"\x00\x00\x00\x00", longer) == EndTransactionMarker(
        ControlRecordType.ABORT, 9
    )
    for key, value in [
        (b"\x00\x00\x00\x05", ABORT.value()),  # an unknown control record type
        (b"\x00", ABORT.value()),
        (ABORT.key(), b"\x00\x00"),
        (None, ABORT.value()),
    ]:
        with pytest.raises(InvalidControlRecord):
            EndTransactionMarker.decode(key, value)


def test_producers_cannot_send_control_batches() -> None:
    raw = build_marker_batch(ABORT, 7, 0, 0)
    with pytest.raises(InvalidBatch) as refused:
        split_batches(raw, 1 << 20)
    assert refused.value.error == ErrorCode.INVALID_RECORD


# -- open transactions and the last stable offset ----------------------------------------


def test_a_log_without_transactions_is_stable_up_to_its_high_watermark(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log()
    log.append(split(batch(3)), 0)
    Producer(log, 7).send(2, transactional=False)
    assert log.first_unstable_offset is None
    assert log.last_stable_offset == log.high_watermark == 5
    assert log.collect_aborted_transactions(0, 5) == []
    log.close()
    assert txn_index_files(tmp_path / "t-0") == []


def test_the_last_stable_offset_waits_for_the_earliest_open_transaction(
    open_log: OpenLog,
) -> None:
    log = open_log()
    log.append(split(batch(2)), 0)
    first, second = Producer(log, 7), Producer(log, 8)
    assert first.send(3).first_offset == 2
    second.send(1)
    first.send(1)
    assert log.first_unstable_offset == 2
    assert log.last_stable_offset == 2
    first.end(COMMIT)
    assert log.last_stable_offset == 5  # the second producer's transaction
    second.end(ABORT)
    assert log.first_unstable_offset is None
    assert log.last_stable_offset == log.log_end_offset == 9
    # A new transaction of the same producer starts at its own first batch.
    assert first.send(1).first_offset == 9
    assert log.last_stable_offset == 9


def test_the_last_stable_offset_never_passes_the_high_watermark(open_log: OpenLog) -> None:
    log = open_log(follows_log_end=False)
    producer = Producer(log, 7)
    log.append(split(batch(4)), 0)
    producer.send(2)
    log.set_high_watermark(3)
    assert log.last_stable_offset == 3
    log.set_high_watermark(6)
    assert log.last_stable_offset == 4


def test_stale_markers_and_writes_outside_the_open_transaction_are_refused(
    open_log: OpenLog,
) -> None:
    log = open_log()
    producer = Producer(log, 7, epoch=3)
    producer.send(1)
    producer.end(EndTransactionMarker(ControlRecordType.COMMIT, 4))
    producer.send(1)
    with pytest.raises(InvalidProducerEpoch):
        producer.end(ABORT, epoch=2)
    with pytest.raises(TransactionCoordinatorFenced):
        producer.end(EndTransactionMarker(ControlRecordType.ABORT, 3))
    with pytest.raises(InvalidTxnState) as refused:
        producer.send(1, transactional=False)
    assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == 3
    assert log.first_unstable_offset == 2
    producer.end(EndTransactionMarker(ControlRecordType.ABORT, 4))
    assert log.first_unstable_offset is None


def test_a_marker_with_a_newer_epoch_ends_the_transaction_and_the_old_sequences(
    open_log: OpenLog,
) -> None:
    log = open_log()
    producer = Producer(log, 7)
    producer.send(2)
    producer.end(COMMIT, epoch=1)  # KIP-890: the coordinator bumps the epoch per transaction
    entry = log.producers.entry(7)
    assert entry is not None and entry.epoch == 1 and entry.batches == ()
    producer.epoch, producer.seq = 1, 0
    producer.send(1)
    assert log.first_unstable_offset == 3


# -- the aborted-transaction index ------------------------------------------------------------


def test_an_abort_is_indexed_in_kafkas_txnindex_format(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    committed, aborted, still_open = Producer(log, 7), Producer(log, 8), Producer(log, 9)
    committed.send(2)  # 0-1
    aborted.send(2)  # 2-3
    still_open.send(1)  # 4
    committed.end(COMMIT)  # 5
    assert txn_index_files(tmp_path / "t-0") == []  # a commit is not indexed
    marker = aborted.end(ABORT)  # 6
    assert marker.first_offset == 6
    entry = AbortedTxn(producer_id=8, first_offset=2, last_offset=6, last_stable_offset=4)
    [index] = txn_index_files(tmp_path / "t-0")
    assert index.name == "00000000000000000000.txnindex"
    assert index.read_bytes() == struct.pack(">hqqqq", 0, 8, 2, 6, 4)
    assert log.collect_aborted_transactions(0, 7) == [entry]
    assert log.collect_aborted_transactions(7, 8) == []  # it ended before the range
    assert log.collect_aborted_transactions(0, 2) == []  # it began after it
    assert log.collect_aborted_transactions(3, 4) == [entry]
    # The markers stay in the log, readable, between the records.
    assert offsets_of(log.read(0, 1 << 20)) == [0, 1, 2, 3, 4, 5, 6]


def test_aborted_transactions_are_found_across_segments(open_log: OpenLog) -> None:
    log = open_log()
    early, late = Producer(log, 7), Producer(log, 8)
    early.send(2)  # 0-1, segment 0
    late.send(1)  # 2
    log.roll()
    late.end(ABORT)  # 3, segment 3: the LSO is still held at 0 by the early one
    log.roll()
    early.end(ABORT)  # 4, segment 4
    log.append(split(batch(2)), 0)  # 5-6
    assert log.segment_base_offsets == [0, 3, 4]
    # Reading the first segment: both transactions overlap it, the markers lie beyond.
    assert log.collect_aborted_transactions(0, 3) == [
        AbortedTxn(8, 2, 3, 0),
        AbortedTxn(7, 0, 4, 5),
    ]
    assert log.collect_aborted_transactions(5, 7) == []


# -- restarts and recovery --------------------------------------------------------------------


def test_open_transactions_survive_a_clean_restart_in_the_snapshot(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log()
    log.append(split(batch(2)), 0)
    producer = Producer(log, 7, epoch=1)
    producer.send(2)
    producer.end(EndTransactionMarker(ControlRecordType.ABORT, 6))
    producer.send(1)  # 5, open
    log.close()
    snapshot = json.loads((tmp_path / "t-0" / PRODUCER_SNAPSHOT_FILE).read_bytes())
    assert snapshot["version"] == 2
    [[pid, epoch, _, _, coordinator_epoch, txn_first_offset]] = snapshot["producers"]
    assert (pid, epoch, coordinator_epoch, txn_first_offset) == (7, 1, 6, 5)
    reopened = open_log()
    assert reopened.last_stable_offset == 5
    assert reopened.collect_aborted_transactions(0, 6) == [AbortedTxn(7, 2, 4, 5)]
    with pytest.raises(TransactionCoordinatorFenced):
        reopened.append_end_txn_marker(7, 1, EndTransactionMarker(ControlRecordType.COMMIT, 5), 0)


def test_a_version_1_snapshot_is_still_read(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    Producer(log, 7).send(2, transactional=False)
    log.close()
    path = tmp_path / "t-0" / PRODUCER_SNAPSHOT_FILE
    snapshot = json.loads(path.read_bytes())
    snapshot["version"] = 1
    snapshot["producers"] = [entry[:4] for entry in snapshot["producers"]]
    path.write_text(json.dumps(snapshot))
    reopened = open_log()
    entry = reopened.producers.entry(7)
    assert entry is not None and entry.last_sequence == 1 and not entry.in_transaction


def crashed_log(open_log: OpenLog, *, flushed: bool) -> PartitionLog:
    """A log with one aborted and one open transaction, its files left as a kill -9
    leaves them: written, not closed; flushed first when `flushed`."""
    log = open_log()
    aborted, still_open = Producer(log, 7), Producer(log, 8)
    aborted.send(2)  # 0-1
    still_open.send(1)  # 2
    aborted.end(ABORT)  # 3
    log.append(split(batch(1)), 0)  # 4
    if flushed:
        log.flush(checkpoint_now=True)
    log.close_handlers()
    return log


EXPECTED_ABORT = AbortedTxn(7, 0, 3, 2)


@pytest.mark.parametrize("flushed", [False, True])
def test_a_kill_keeps_the_index_and_the_open_transactions(open_log: OpenLog, flushed: bool) -> None:
    crashed_log(open_log, flushed=flushed)
    reopened = open_log()
    assert reopened.last_stable_offset == 2
    assert reopened.collect_aborted_transactions(0, 5) == [EXPECTED_ABORT]


@pytest.mark.parametrize("flushed", [False, True])
@pytest.mark.parametrize("cut", [1, 17, 34])
def test_a_torn_or_lost_index_is_rebuilt_from_the_log(
    open_log: OpenLog, tmp_path: Path, flushed: bool, cut: int
) -> None:
    crashed_log(open_log, flushed=flushed)
    [index] = txn_index_files(tmp_path / "t-0")
    data = index.read_bytes()
    index.write_bytes(data[: len(data) - cut])
    if cut == len(data):
        # Lost whole: only a replay finds it, which a lost snapshot forces.
        (tmp_path / "t-0" / PRODUCER_SNAPSHOT_FILE).unlink(missing_ok=True)
    reopened = open_log()
    assert reopened.collect_aborted_transactions(0, 5) == [EXPECTED_ABORT]
    assert reopened.last_stable_offset == 2
    assert index.read_bytes() == data


def test_a_log_cut_before_the_marker_forgets_the_abort_and_reopens_the_transaction(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = crashed_log(open_log, flushed=False)
    directory = tmp_path / "t-0"
    del log
    # Cut the log file inside the marker's batch, as a torn write would.
    segment = directory / "00000000000000000000.log"
    data = segment.read_bytes()
    position = 0
    for _ in range(2):  # the batches before the marker
        position += int.from_bytes(data[position + 8 : position + 12], "big") + 12
    segment.write_bytes(data[: position + 20])
    reopened = open_log()
    assert reopened.log_end_offset == 3
    assert reopened.collect_aborted_transactions(0, 3) == []
    assert reopened.first_unstable_offset == 0
    assert txn_index_files(directory) == []


def test_truncation_cuts_the_index_and_reopens_what_the_cut_marker_closed(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(follows_log_end=False)
    producer = Producer(log, 7)
    producer.send(2)
    producer.end(ABORT)  # 2
    log.append(split(batch(1)), 0)  # 3
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(7, 0, 2, 3)]
    log.truncate_to(2, 0)
    assert log.collect_aborted_transactions(0, 4) == []
    assert log.first_unstable_offset == 0
    assert txn_index_files(tmp_path / "t-0") == []
    # The leader's marker, written again, is indexed again.
    producer.end(ABORT)
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(7, 0, 2, 3)]


def test_the_index_goes_with_its_segment(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    producer = Producer(log, 7)
    producer.send(1)
    producer.end(ABORT)
    log.roll()
    log.append(split(batch(1)), 0)
    assert len(txn_index_files(tmp_path / "t-0")) == 1
    log.delete_records(2)
    assert log.segment_base_offsets == [2]
    assert txn_index_files(tmp_path / "t-0") == []
    assert log.collect_aborted_transactions(2, 3) == []


def test_a_follower_keeps_the_same_transactions_as_its_leader(open_log: OpenLog) -> None:
    leader = open_log()
    aborted, still_open = Producer(leader, 7), Producer(leader, 8)
    aborted.send(2)
    still_open.send(1)
    aborted.end(ABORT)
    follower = open_log(name="t-1", follows_log_end=False)
    follower.append_as_follower(leader.read(0, 1 << 20), 0)
    follower.set_high_watermark(leader.log_end_offset)
    assert follower.collect_aborted_transactions(0, 4) == leader.collect_aborted_transactions(0, 4)
    assert follower.last_stable_offset == leader.last_stable_offset == 2


def test_compaction_keeps_the_aborts_of_the_segments_it_cleans(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(cleanup_policy="compact")
    producer = Producer(log, 7)
    raw = batch(2, key=b"k", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    log.append(split(raw), 0)  # 0-1
    log.roll()
    producer.end(ABORT)  # 2
    log.append(split(batch(1, key=b"k")), 0)  # 3
    log.roll()
    log.append(split(batch(1, key=b"k")), 0)  # 4, the active segment
    entry = AbortedTxn(7, 0, 2, 3)
    assert log.collect_aborted_transactions(0, 5) == [entry]
    clean(log, 0)
    assert log.segment_base_offsets[-1] == 4 and len(log.segment_base_offsets) < 3
    assert log.collect_aborted_transactions(0, 5) == [entry]
    [index] = txn_index_files(tmp_path / "t-0")
    assert index.name == "00000000000000000000.txnindex"
    log.close()
    assert open_log(cleanup_policy="compact").collect_aborted_transactions(0, 5) == [entry]


def test_a_crash_at_any_step_of_a_cleaning_keeps_the_aborts(
    open_log: OpenLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(cleanup_policy="compact")
    directory = log.directory
    expected = []
    for round_ in range(3):
        producer = Producer(log, 10 + round_)
        keys = [b"txn-%d-%d" % (round_, i) for i in range(2)]
        raw = build(
            [b"v"] * 2,
            keys=keys,
            producer_id=producer.pid,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
        first = log.append(split(raw), 0).first_offset
        log.append(split(batch(3, key=b"superseded")), 0)
        log.roll()
        marker = producer.end(ABORT).first_offset
        expected.append(AbortedTxn(producer.pid, first, marker, marker + 1))
        log.append(split(batch(3, key=b"superseded")), 0)
        log.roll()
    log.append(split(batch(1, key=b"superseded")), 0)
    end = log.log_end_offset
    log.flush(checkpoint_now=True)
    assert log.collect_aborted_transactions(0, end) == expected

    crashes: list[Path] = []
    for name in ("rename", "replace", "unlink"):
        real = getattr(os, name)

        def hooked(*args: object, _real=real, **kwargs: object) -> object:  # type: ignore[no-untyped-def]
            target = tmp_path / f"crash-{len(crashes):03d}"
            shutil.copytree(directory, target, copy_function=os.link)
            crashes.append(target)
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, hooked)
    log.config = dataclasses.replace(log.config, segment_bytes=100_000)
    clean(log, 0)
    monkeypatch.undo()
    assert len(log.segment_base_offsets) < 7
    assert log.collect_aborted_transactions(0, end) == expected
    for stage in (".txnindex.swap", ".log.swap"):
        assert any(p.name.endswith(stage) for c in crashes for p in c.iterdir())
    for crash in crashes:
        reopened = PartitionLog.open(crash, "t", 0, log.config, 0)
        try:
            assert reopened.collect_aborted_transactions(0, end) == expected, crash.name
            assert reopened.first_unstable_offset is None
        finally:
            reopened.close()


def test_a_transaction_version_2_marker_must_be_bumped_past_the_open_transaction(
    open_log: OpenLog,
) -> None:
    """WriteTxnMarkers v2 (KIP-1228): a version 2 coordinator bumps the epoch before it
    writes markers, so one at the epoch of the open transaction is late, from the
    transaction before; the same marker written again once it closed is a resend."""
    log = open_log()
    producer = Producer(log, pid=7, epoch=3)
    producer.send()
    with pytest.raises(InvalidProducerEpoch, match="epoch of its open transaction"):
        log.append_end_txn_marker(7, 3, COMMIT, 0, transaction_version=2)
    assert log.first_unstable_offset == 0
    # A version 1 coordinator writes markers at the transaction's own epoch.
    assert log.append_end_txn_marker(7, 3, COMMIT, 0).first_offset == 1
    producer.send()
    log.append_end_txn_marker(7, 4, COMMIT, 0, transaction_version=2)
    assert log.first_unstable_offset is None
    # Resent after a failover: at the bumped epoch, with no transaction open.
    assert log.append_end_txn_marker(7, 4, COMMIT, 0, transaction_version=2).first_offset == 4
    with pytest.raises(InvalidProducerEpoch):
        log.append_end_txn_marker(7, 3, COMMIT, 0, transaction_version=2)
