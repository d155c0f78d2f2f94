"""Compaction of a log holding transactions, by Kafka's rules: aborted records go and
never stand in for a key's committed record; a marker stays while anything of its
transaction is left, and then until delete.retention.ms has passed; the transaction
index keeps the aborts whose markers stay; nothing past the last stable offset is
cleaned. Reads at read_committed get the aborted transactions beside their records."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from herdless.protocol.control_records import ControlRecordType, EndTransactionMarker
from herdless.protocol.records import iter_batches
from herdless.protocol.regions import FileRegion
from herdless.storage import PartitionLog
from herdless.storage.cleaner import clean
from herdless.storage.log.local_log import PRODUCER_SNAPSHOT_FILE
from herdless.storage.transaction_index import AbortedTxn
from tests.storage.batches import build, keyed_records_of, split
from tests.storage.conftest import OpenLog

ABORT = EndTransactionMarker(ControlRecordType.ABORT, 0)
COMMIT = EndTransactionMarker(ControlRecordType.COMMIT, 0)
DAY_MS = 86_400_000
# Later than producer.id.expiration.ms (a day) after every timestamp written: a log
# opened then has forgotten its producers, which keep no batch header alive.
LATER = 10 * DAY_MS


class Writer:
    """Keyed records, plain or in a producer's transaction, stamped 1000 on."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def send(self, *pairs: tuple[bytes, bytes], pid: int = -1) -> int:
        sequence = self.sequences.get(pid, 0)
        raw = build(
            [value for _, value in pairs],
            keys=[key for key, _ in pairs],
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=sequence if pid >= 0 else -1,
            transactional=pid >= 0,
        )
        if pid >= 0:
            self.sequences[pid] = sequence + len(pairs)
        return self.log.append(split(raw), 0).first_offset

    def end(self, pid: int, marker: EndTransactionMarker) -> int:
        return self.log.append_end_txn_marker(pid, 0, marker, 1_000).first_offset


def contents(log: PartitionLog) -> tuple[list[tuple[int, bytes | None]], list[int]]:
    """(offset, value) of every data record, and the offsets of the markers."""
    data = log.read(log.log_start_offset, 1 << 20)
    markers = [h.base_offset for _, h in iter_batches(data) if h.is_control]
    records = [
        (offset, value) for offset, _, _, value in keyed_records_of(data) if offset not in markers
    ]
    return records, markers


def write_transactions(log: PartitionLog) -> None:
    writer = Writer(log)
    writer.send((b"c", b"c-1"))  # 0
    writer.send((b"a", b"a-aborted"), (b"c", b"c-aborted"), pid=7)  # 1-2
    writer.end(7, ABORT)  # 3
    writer.send((b"a", b"a-committed"), pid=8)  # 4
    writer.end(8, COMMIT)  # 5
    writer.send((b"a", b"a-final"))  # 6
    log.roll()
    writer.send((b"z", b"z"))  # 7, the active segment


def test_compaction_removes_aborted_records_then_the_markers(
    open_log: OpenLog, tmp_path: Path
) -> None:
    log = open_log(cleanup_policy="compact")
    write_transactions(log)
    abort = AbortedTxn(7, 1, 3, 4)
    assert log.collect_aborted_transactions(0, 8) == [abort]

    # The aborted records go; c's committed record stays though an aborted one came
    # later. The producers still known keep their batches' headers, and with them the
    # markers; the abort stays indexed.
    stats = clean(log, 1_500)
    assert stats.aborted_records_dropped == 2
    assert contents(log) == ([(0, b"c-1"), (6, b"a-final"), (7, b"z")], [3, 5])
    assert log.collect_aborted_transactions(0, 8) == [abort]
    log.close()

    # Once the producers are forgotten the headers go, and the markers after them, but
    # only once delete.retention.ms has passed since their segment's last record.
    log = open_log(LATER, cleanup_policy="compact", delete_retention_ms=str(100 * DAY_MS))
    for _ in range(3):
        stats = clean(log, LATER)
    assert contents(log) == ([(0, b"c-1"), (6, b"a-final"), (7, b"z")], [3, 5])
    assert stats.markers_kept == 2 and stats.next_tombstone_expiry_ms > LATER
    assert log.collect_aborted_transactions(0, 8) == [abort]

    log.config = dataclasses.replace(log.config, delete_retention_ms=1_000)
    stats = clean(log, LATER)
    assert stats.markers_dropped == 2
    assert contents(log) == ([(0, b"c-1"), (6, b"a-final"), (7, b"z")], [])
    assert log.collect_aborted_transactions(0, 8) == []
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.txnindex")) == []
    log.close()

    reopened = open_log(LATER, cleanup_policy="compact")
    assert contents(reopened) == ([(0, b"c-1"), (6, b"a-final"), (7, b"z")], [])
    assert reopened.collect_aborted_transactions(0, 8) == []
    assert reopened.first_unstable_offset is None


def test_the_abort_marker_stays_while_a_header_of_its_transaction_does(
    open_log: OpenLog,
) -> None:
    """A producer's remembered batch keeps its header; its abort must keep its marker
    and index entry, or a log rebuilt from it would hold a transaction never ended."""
    log = open_log(cleanup_policy="compact", delete_retention_ms="0")
    write_transactions(log)
    for _ in range(3):
        clean(log, LATER)
    assert contents(log)[1] == [3, 5]
    assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(7, 1, 3, 4)]
    directory = log.directory
    log.close()
    # Rebuilt from the log itself, not the snapshot: the header opens the transaction
    # again and the marker ends it.
    (directory / PRODUCER_SNAPSHOT_FILE).unlink()
    reopened = PartitionLog.open(directory, "t", 0, log.config, 0)
    try:
        assert reopened.first_unstable_offset is None
        assert reopened.collect_aborted_transactions(0, 8) == [AbortedTxn(7, 1, 3, 4)]
    finally:
        reopened.close()


def test_nothing_past_the_last_stable_offset_is_cleaned(open_log: OpenLog) -> None:
    log = open_log(cleanup_policy="compact")
    writer = Writer(log)
    writer.send((b"c", b"c-1"))  # 0
    writer.send((b"c", b"c-open"), pid=9)  # 1, whose transaction is open
    writer.send((b"q", b"q"))  # 2
    log.roll()
    writer.send((b"r", b"r"))  # 3
    assert log.last_stable_offset == 1
    clean(log, 1_500)
    assert contents(log)[0] == [(0, b"c-1"), (1, b"c-open"), (2, b"q"), (3, b"r")]
    # Aborted, the open record never was: c keeps its first value.
    writer.end(9, ABORT)  # 4
    log.roll()
    writer.send((b"s", b"s"))  # 5
    clean(log, 1_500)
    assert contents(log) == ([(0, b"c-1"), (2, b"q"), (3, b"r"), (5, b"s")], [4])


def test_a_read_committed_read_is_told_the_aborts_among_its_records(
    open_log: OpenLog,
) -> None:
    """As bytes or as a file region, the aborts overlapping what was read and no more."""
    log = open_log()
    writer = Writer(log)
    writer.send((b"a", b"1"), pid=7)  # 0
    writer.end(7, ABORT)  # 1
    writer.send((b"b", b"2"))  # 2
    writer.send((b"a", b"3"), pid=7)  # 3
    writer.end(7, ABORT)  # 4
    first, second = AbortedTxn(7, 0, 1, 2), AbortedTxn(7, 3, 4, 5)
    whole = log.read_records(0, 1 << 20, min_region_bytes=0)
    assert isinstance(whole, FileRegion)
    assert log.aborted_transactions_read(0, whole) == [first, second]
    whole.close()
    one_batch = log.read(0, 1)
    assert log.aborted_transactions_read(0, one_batch) == [first]
    assert log.aborted_transactions_read(2, log.read(2, 1)) == []
    assert log.aborted_transactions_read(0, b"") == []
