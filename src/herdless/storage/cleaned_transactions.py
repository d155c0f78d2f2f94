"""What compaction does with transactions: the log cleaner's walk through a log's
transactions (Kafka's CleanedTransactionMetadata).

The cleaner reads batches in offset order and tells this walk of each one. The
aborted transactions come from the transaction index ahead of the batches that
belong to them (add_aborted, once per segment): a transactional batch of a
producer whose aborted transaction has begun is aborted data, which compaction
removes whole and which never enters the offset map; any other transactional
batch belongs to a transaction that committed (the cleaner never reads past the
last stable offset, so none is still open).

A marker may go once nothing of its transaction is left to explain: an ABORT
once the cleaner has found none of the transaction's batches (an earlier
cleaning removed them), a COMMIT once none of its batches remain. Even then it
stays until delete.retention.ms has passed (the cleaner's rule for tombstones),
so that a consumer reading the log within that time still sees the transaction
end; and while it is the last word of a producer still known, whose epoch it
carries.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from herdless.protocol.control_records import EndTransactionMarker
from herdless.protocol.records import BatchHeader
from herdless.storage.transaction_index import AbortedTxn


@dataclass(slots=True)
class _OngoingAbort:
    txn: AbortedTxn
    # Whether any batch of it was read in this cleaning: its marker must stay meanwhile.
    observed: bool = False


@dataclass(slots=True)
class CleanedTransactions:
    """One cleaning's walk through the transactions of the batches it reads, in order."""

    # Aborted transactions not yet begun in the walk, by first offset.
    _pending: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)
    _seen: set[AbortedTxn] = field(default_factory=set)
    # Producer id -> its aborted transaction the walk is inside.
    _aborting: dict[int, _OngoingAbort] = field(default_factory=dict)
    # Producers whose committed transaction the walk is inside, a batch of it read.
    _committing: set[int] = field(default_factory=set)

    def add_aborted(self, aborted: list[AbortedTxn]) -> None:
        """Aborted transactions of the segment about to be read (the index entries
        overlapping it; one seen for an earlier segment is not taken twice)."""
        for txn in aborted:
            if txn not in self._seen:
                self._seen.add(txn)
                heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _begin_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._aborting.setdefault(txn.producer_id, _OngoingAbort(txn))

    def on_batch(self, header: BatchHeader) -> bool:
        """Whether a data batch is aborted data, to be removed."""
        self._begin_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborting.get(header.producer_id)
        if ongoing is not None:
            ongoing.observed = True
            return True
        self._committing.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: EndTransactionMarker) -> bool:
        """Whether a marker has nothing of its transaction left to explain (it may still
        have to wait for delete.retention.ms). An ABORT's index entry stays with it."""
        self._begin_up_to(header.last_offset)
        producer_id = header.producer_id
        if marker.aborted:
            ongoing = self._aborting.pop(producer_id, None)
            return ongoing is None or not ongoing.observed
        if producer_id in self._committing:
            self._committing.discard(producer_id)
            return False
        return True
