"""What a read_committed consumer needs of a log: the last stable offset, and the
transactions aborted in a range (Kafka's UnifiedLog.lastStableOffset and
LocalLog.collectAbortedTransactions).

The transactions themselves are kept by the producer state (producer_state.py,
open ones) and each segment's transaction index (transaction_index.py, aborted
ones); append.py writes both.
"""

from __future__ import annotations

from bisect import bisect_right

from herdless.protocol.records import iter_batches
from herdless.protocol.regions import FileRegion
from herdless.storage.log.local_log import LocalLog
from herdless.storage.producer_state import ProducerEntry
from herdless.storage.segment import scan_file
from herdless.storage.transaction_index import AbortedTxn


class LogTransactions(LocalLog):
    """A log's transactions, as readers see them."""

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open here, if one is (never
        below the log start offset: retention may have removed where it began)."""
        first = self._producers.first_unstable_offset()
        return None if first is None else max(first, self._log_start)

    @property
    def last_stable_offset(self) -> int:
        """The end of what a read_committed consumer may read: the first offset of the
        earliest open transaction, else the high watermark (and never past it)."""
        high_watermark = self.high_watermark
        first = self.first_unstable_offset
        return high_watermark if first is None else min(first, high_watermark)

    def collect_aborted_transactions(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions holding offsets in [start_offset, upper_bound), as a
        Fetch at read_committed returns them beside records read from `start_offset` up to
        `upper_bound`. The segments' indexes are read from the one holding `start_offset`
        on, until an entry shows that no later abort can reach below `upper_bound` (its
        last stable offset is past it)."""
        with self._lock:
            self._check_open()
            first = max(bisect_right(self._bases, start_offset) - 1, 0)
            aborted: list[AbortedTxn] = []
            for segment in self._segments[first:]:
                found = segment.txn_index.collect(start_offset, upper_bound)
                aborted.extend(found.aborted)
                if found.complete:
                    break
            return aborted

    def active_producers(self) -> list[ProducerEntry]:
        """Every producer the log keeps state of, as DescribeProducers tells them (Kafka's
        UnifiedLog.activeProducers), in producer id order."""
        with self._lock:
            self._check_open()
            entries = self._producers.snapshot()
        return [entries[producer_id] for producer_id in sorted(entries)]

    def aborted_transactions_read(
        self, offset: int, records: bytes | FileRegion
    ) -> list[AbortedTxn]:
        """The aborted transactions a read_committed Fetch returns beside `records`, read
        from `offset`: those overlapping the records' offsets. Bounded by the end of the
        last batch read, as Kafka bounds its search by the end of the fetched data, so a
        reader of a long backlog is not sent every abort of it at once."""
        end = _end_offset(records)
        return [] if end is None else self.collect_aborted_transactions(offset, end)


def _end_offset(records: bytes | FileRegion) -> int | None:
    """The offset after the last whole batch of `records`, None if they hold none."""
    last = None
    if isinstance(records, FileRegion):
        end = records.position + records.length
        for _, header in scan_file(records.fd, end, records.position):
            last = header
    else:
        for _, header in iter_batches(records):
            last = header
    return None if last is None else last.last_offset + 1
