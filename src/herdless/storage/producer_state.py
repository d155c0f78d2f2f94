"""Idempotent producers: per producer id, the epoch and the last batches written.

Modelled on Kafka's ProducerStateManager. A producer retries a batch it got no
answer for; the broker recognises the retry by its sequence range among the
last five batches of that producer (a producer has at most five in flight) and
answers with the original offsets instead of writing it twice. Sequences must
otherwise follow one another, so a lost batch is noticed instead of skipped.

A transactional producer's first batch of a transaction opens it here (its
first offset is kept, as Kafka's currentTxnFirstOffset), and the coordinator's
COMMIT or ABORT marker (protocol/control_records.py) closes it, giving a
CompletedTxn: the log records an aborted one in its transaction index, and the
earliest first offset among open transactions bounds the last stable offset.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import NamedTuple

from herdless.protocol.control_records import EndTransactionMarker
from herdless.protocol.records import BatchHeader
from herdless.storage import checkpoint
from herdless.storage.errors import (
    InvalidProducerEpoch,
    InvalidTxnState,
    OutOfOrderSequence,
    TransactionCoordinatorFenced,
)
from herdless.storage.transaction_index import AbortedTxn
from herdless.storage.verification_guard import SENTINEL, VerificationGuard, verifies

log = logging.getLogger(__name__)

BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
# Kafka's producer.id.expiration.ms default: state of producers idle this long is dropped.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: tuple[BatchMetadata, ...]
    last_timestamp: int
    # The epoch of the coordinator that wrote this producer's last marker, -1 before one.
    coordinator_epoch: int = -1
    # First offset of the transaction this producer has open, -1 when none is.
    current_txn_first_offset: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if (
                batch.first_sequence == header.base_sequence
                and batch.last_sequence == header.last_sequence
            ):
                return batch
        return None

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset >= 0

    def with_batch(
        self, epoch: int, batch: BatchMetadata, transactional: bool = False
    ) -> ProducerEntry:
        # A new epoch starts a new sequence space: older batches cannot be retried in it.
        kept = self.batches if epoch == self.epoch else ()
        txn_first_offset = self.current_txn_first_offset
        if transactional and txn_first_offset < 0:
            txn_first_offset = batch.first_offset
        return ProducerEntry(
            producer_id=self.producer_id,
            epoch=epoch,
            batches=(*kept, batch)[-BATCHES_TO_RETAIN:],
            last_timestamp=max(self.last_timestamp, batch.timestamp),
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=txn_first_offset,
        )

    def with_marker(self, epoch: int, coordinator_epoch: int, timestamp: int) -> ProducerEntry:
        """The entry once a marker closed its transaction. A marker may carry a newer
        epoch (KIP-890 bumps it per transaction): the old epoch's batches go with it."""
        return ProducerEntry(
            producer_id=self.producer_id,
            epoch=epoch,
            batches=self.batches if epoch == self.epoch else (),
            last_timestamp=max(self.last_timestamp, timestamp),
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=-1,
        )


class CompletedTxn(NamedTuple):
    """A transaction a marker closed: its first offset, the marker's offset, and how."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class PendingBatch(NamedTuple):
    """A batch about to be appended, with the offsets and timestamp it will get (a named
    tuple: one is made for every batch appended)."""

    header: BatchHeader
    first_offset: int
    last_offset: int
    timestamp: int
    # What a control batch says: a transaction marker (control_records.marker_of).
    marker: EndTransactionMarker | None = None


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """Either the original of a retried batch, or the producer entries to commit once written."""

    duplicate: BatchMetadata | None
    updates: dict[int, ProducerEntry]
    # Transactions the batches' markers close, in offset order.
    completed: tuple[CompletedTxn, ...] = ()
    # Producers with a transactional batch or a marker among the batches: once written,
    # their transaction is open here or ended, and their verification guard goes.
    transactional: frozenset[int] = frozenset()


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    # Sequences are int32 and wrap to 0 after Integer.MAX_VALUE.
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        # Producer id -> first offset of its open transaction; few at a time, read for
        # the last stable offset on every read_committed fetch.
        self._ongoing: dict[int, int] = {}
        # Producer id -> the guard of the verification under way for its transaction's
        # first batch here (verification_guard.py).
        self._verifying: dict[int, VerificationGuard] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer has a transaction open here at this epoch: its batches
        need no verification (Kafka's UnifiedLog.hasOngoingTransaction)."""
        entry = self._producers.get(producer_id)
        return entry is not None and entry.in_transaction and entry.epoch == producer_epoch

    def start_verification(
        self, producer_id: int, producer_epoch: int, now_ms: int
    ) -> VerificationGuard:
        """The guard an append must carry to open the producer's transaction here, made
        as its verification starts (Kafka's maybeStartTransactionVerification); SENTINEL
        when a transaction is open already and nothing needs verifying. A verification
        already under way at this epoch or a later one keeps its guard."""
        if self.has_ongoing_transaction(producer_id, producer_epoch):
            return SENTINEL
        held = self._verifying.get(producer_id)
        if held is None or held.producer_epoch < producer_epoch:
            held = self._verifying[producer_id] = VerificationGuard(producer_epoch, now_ms)
        return held

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        return self._verifying.get(producer_id)

    def plan(
        self,
        batches: Sequence[PendingBatch],
        from_coordinator: bool = False,
        verification: VerificationGuard | None = None,
        transaction_version: int = 0,
    ) -> AppendPlan:
        """Check every batch of an append before any is written.

        `from_coordinator`: the broker's own coordinator wrote the batches (Kafka's
        AppendOrigin.COORDINATOR: a TxnOffsetCommit's transactional batch). Its batches
        carry the producer's id and epoch but no sequence of the producer's, so, as in
        Kafka, only their epoch is checked, and none is taken for a retry.

        `verification`: the guard of the request's verification when the leader verifies
        transactional batches (transaction.partition.verification.enable); None when it
        does not. A transactional batch that would open a transaction passes only with
        the guard still held for its producer: a marker written since verification
        started took it away (verification_guard.py).

        `transaction_version`: the coordinator's, for its markers (WriteTxnMarkers v2):
        from 2 a marker's epoch was bumped past its transaction's (_end_transaction).

        Raises InvalidProducerEpoch, OutOfOrderSequence or InvalidTxnState; nothing
        changes until commit().
        """
        updates: dict[int, ProducerEntry] = {}
        completed: list[CompletedTxn] = []
        transactional: set[int] = set()
        for pending in batches:
            header = pending.header
            if header.producer_id < 0:
                continue
            if header.is_transactional or header.is_control:
                transactional.add(header.producer_id)
            if header.is_control:
                current = updates.get(header.producer_id, self._producers.get(header.producer_id))
                entry, txn = _end_transaction(
                    current, pending, checked=True, transaction_version=transaction_version
                )
                updates[header.producer_id] = entry
                if txn is not None:
                    completed.append(txn)
                continue
            committed = self._producers.get(header.producer_id)
            # Like Kafka, a retry is recognised against what is already written.
            duplicate = (
                committed.find_duplicate(header)
                if committed is not None and not from_coordinator
                else None
            )
            if duplicate is not None:
                return AppendPlan(duplicate=duplicate, updates={})
            current = updates.get(header.producer_id, committed)
            if not from_coordinator:
                _check(current, header)
            elif current is not None and header.producer_epoch < current.epoch:
                raise InvalidProducerEpoch(
                    f"producer {header.producer_id} has epoch {header.producer_epoch},"
                    f" older than the current epoch {current.epoch}"
                )
            if current is not None and current.in_transaction and not header.is_transactional:
                raise InvalidTxnState(
                    f"producer {header.producer_id} wrote outside the transaction it has open"
                    f" since offset {current.current_txn_first_offset}"
                )
            if (
                verification is not None
                and header.is_transactional
                and not from_coordinator
                and not (
                    current is not None
                    and current.in_transaction
                    and current.epoch == header.producer_epoch
                )
                and not verifies(self._verifying.get(header.producer_id), verification)
            ):
                raise InvalidTxnState(
                    f"a transactional batch of producer {header.producer_id} epoch"
                    f" {header.producer_epoch} is not part of an ongoing transaction: its"
                    " transaction ended after the coordinator verified it"
                )
            batch = BatchMetadata(
                first_sequence=header.base_sequence,
                last_sequence=header.last_sequence,
                first_offset=pending.first_offset,
                last_offset=pending.last_offset,
                timestamp=pending.timestamp,
            )
            if current is None:
                current = ProducerEntry(header.producer_id, header.producer_epoch, (), -1)
            updates[header.producer_id] = current.with_batch(
                header.producer_epoch, batch, header.is_transactional
            )
        return AppendPlan(
            duplicate=None,
            updates=updates,
            completed=tuple(completed),
            transactional=frozenset(transactional),
        )

    def commit(self, plan: AppendPlan) -> None:
        for entry in plan.updates.values():
            self._put(entry)
        # Whether a data batch or a marker: the transaction is open here or complete,
        # and the guard has done its work (Kafka's UnifiedLog.updateProducers).
        for producer_id in plan.transactional:
            self._verifying.pop(producer_id, None)

    def _put(self, entry: ProducerEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.in_transaction:
            self._ongoing[entry.producer_id] = entry.current_txn_first_offset
        else:
            self._ongoing.pop(entry.producer_id, None)

    def _drop(self, producer_id: int) -> None:
        del self._producers[producer_id]
        self._ongoing.pop(producer_id, None)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open, if any is."""
        return min(self._ongoing.values(), default=None)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction."""
        return dict(self._ongoing)

    def replay(
        self, header: BatchHeader, timestamp: int, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Apply a batch read back from the log, unchecked: it was checked when written.

        A control batch needs its `marker` (control_records.marker_of); the transaction
        it closes is returned.
        """
        if header.producer_id < 0:
            return None
        if header.is_transactional or header.is_control:
            self._verifying.pop(header.producer_id, None)
        if header.is_control:
            if marker is None:
                return None
            pending = PendingBatch(
                header, header.base_offset, header.last_offset, timestamp, marker
            )
            entry, txn = _end_transaction(
                self._producers.get(header.producer_id), pending, checked=False
            )
            self._put(entry)
            return txn
        current = self._producers.get(header.producer_id)
        if current is not None and header.producer_epoch < current.epoch:
            return None
        if current is None:
            current = ProducerEntry(header.producer_id, header.producer_epoch, (), -1)
        batch = BatchMetadata(
            first_sequence=header.base_sequence,
            last_sequence=header.last_sequence,
            first_offset=header.base_offset,
            last_offset=header.last_offset,
            timestamp=timestamp,
        )
        self._put(current.with_batch(header.producer_epoch, batch, header.is_transactional))
        return None

    def snapshot(self) -> dict[int, ProducerEntry]:
        """A copy of the state (entries are immutable), for write_producer_snapshot."""
        return dict(self._producers)

    @classmethod
    def from_entries(cls, entries: Sequence[ProducerEntry]) -> ProducerStateManager:
        manager = cls()
        for entry in entries:
            manager._put(entry)
        return manager

    def remembered_last_offsets(self) -> set[int]:
        """Last offsets of every batch remembered for duplicate detection.

        The log cleaner keeps these batches' headers, even emptied of records,
        so that rebuilding this state from the log gives it back.
        """
        return {batch.last_offset for entry in self._producers.values() for batch in entry.batches}

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget batches below the log start offset, and producers left with none.

        This keeps the live state equal to what a rebuild from the remaining
        log would give.
        """
        for producer_id, entry in list(self._producers.items()):
            if entry.last_offset < log_start_offset:
                self._drop(producer_id)
            elif entry.batches[0].last_offset < log_start_offset:
                kept = tuple(b for b in entry.batches if b.last_offset >= log_start_offset)
                self._put(replace(entry, batches=kept))

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop the producers whose last write is `expiration_ms` old or older; returns how
        many. As Kafka: a producer with a transaction open is not expired; its coordinator
        ends the transaction (transaction.max.timeout.ms) long before."""
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if now_ms - entry.last_timestamp >= expiration_ms and not entry.in_transaction
        ]
        for producer_id in expired:
            self._drop(producer_id)
        # A verification no append followed (refused, or the producer went away).
        for producer_id, guard in list(self._verifying.items()):
            if now_ms - guard.started_ms >= expiration_ms:
                del self._verifying[producer_id]
        return len(expired)


def aborted_txn(txn: CompletedTxn, producers: ProducerStateManager) -> AbortedTxn:
    """The transaction index entry of an aborted `txn`, once `producers` has it complete:
    its last stable offset is the first offset of the earliest transaction still open,
    else the offset after the marker (Kafka's ProducerStateManager.lastStableOffset)."""
    others = (
        first for pid, first in producers.ongoing_transactions().items() if pid != txn.producer_id
    )
    last_stable_offset = min(others, default=txn.last_offset + 1)
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, last_stable_offset)


def _end_transaction(
    current: ProducerEntry | None,
    pending: PendingBatch,
    *,
    checked: bool,
    transaction_version: int = 0,
) -> tuple[ProducerEntry, CompletedTxn | None]:
    """The producer's entry once a control batch is written, and the transaction its
    marker closes (Kafka's ProducerAppendInfo.appendEndTxnMarker). A marker with no
    transaction open closes an empty one, starting at the marker, as in Kafka.

    From transaction version 2 the coordinator bumps the epoch before it writes markers
    (KIP-890 part 2), so a marker at the epoch of the producer's open transaction is one
    of the transaction before, late: refused, as KIP-1228 has Kafka refuse it. At that
    epoch with no transaction open it is the same marker again (a coordinator resending
    after a failover, or a lost answer), written again as Kafka's KAFKA-19999 allows."""
    header, marker = pending.header, pending.marker
    if marker is None:
        raise InvalidTxnState(
            f"a control batch of producer {header.producer_id} at offset"
            f" {pending.first_offset} is not a transaction marker"
        )
    if checked and current is not None:
        if header.producer_epoch < current.epoch:
            raise InvalidProducerEpoch(
                f"transaction marker for producer {header.producer_id} has epoch"
                f" {header.producer_epoch}, older than the current epoch {current.epoch}"
            )
        if (
            transaction_version >= 2
            and header.producer_epoch == current.epoch
            and current.in_transaction
        ):
            raise InvalidProducerEpoch(
                f"transaction marker for producer {header.producer_id} has epoch"
                f" {header.producer_epoch}, the epoch of its open transaction: with"
                " transaction version 2 a marker's epoch is bumped past it"
            )
        if marker.coordinator_epoch < current.coordinator_epoch:
            raise TransactionCoordinatorFenced(
                f"transaction marker for producer {header.producer_id} from coordinator epoch"
                f" {marker.coordinator_epoch}, older than {current.coordinator_epoch}"
            )
    if current is None:
        current = ProducerEntry(header.producer_id, header.producer_epoch, (), -1)
    first_offset = (
        current.current_txn_first_offset if current.in_transaction else pending.first_offset
    )
    txn = CompletedTxn(header.producer_id, first_offset, pending.last_offset, marker.aborted)
    entry = current.with_marker(header.producer_epoch, marker.coordinator_epoch, pending.timestamp)
    return entry, txn


def _check(current: ProducerEntry | None, header: BatchHeader) -> None:
    if current is None:
        # An unknown producer may start at any sequence. Its state can vanish while it
        # lives (retention, DeleteRecords, expiry of an idle producer), and refusing it
        # then would fence a healthy producer for good; Kafka accepts it the same way.
        return
    if header.producer_epoch < current.epoch:
        raise InvalidProducerEpoch(
            f"producer {header.producer_id} has epoch {header.producer_epoch},"
            f" older than the current epoch {current.epoch}"
        )
    if header.producer_epoch > current.epoch:
        if header.base_sequence != 0:
            raise OutOfOrderSequence(
                f"producer {header.producer_id} started epoch {header.producer_epoch}"
                f" at sequence {header.base_sequence}, not 0"
            )
        return
    if not in_sequence(current.last_sequence, header.base_sequence):
        raise OutOfOrderSequence(
            f"producer {header.producer_id} sent sequence {header.base_sequence}"
            f" after {current.last_sequence} (epoch {header.producer_epoch})"
        )


# Version 2 adds each producer's coordinator epoch and open transaction, as Kafka's
# snapshot keeps them; version 1 snapshots are still read (no transactions then).
_SNAPSHOT_VERSION = 2
_READABLE_VERSIONS = (1, 2)


def write_producer_snapshot(
    path: Path, offset: int, producers: Mapping[int, ProducerEntry]
) -> None:
    """The producer state as of `offset` (the batches below it), replaced atomically.

    Kafka keeps such snapshots so that opening a log replays only the batches
    after one, not the whole log.
    """
    entries = [
        [
            e.producer_id,
            e.epoch,
            e.last_timestamp,
            [astuple(b) for b in e.batches],
            e.coordinator_epoch,
            e.current_txn_first_offset,
        ]
        for e in producers.values()
    ]
    document = {"version": _SNAPSHOT_VERSION, "offset": offset, "producers": entries}
    checkpoint.atomic_write(path, json.dumps(document, separators=(",", ":")).encode())


def read_producer_snapshot(path: Path) -> tuple[int, ProducerStateManager] | None:
    """(offset, state) from a snapshot; None if absent or unreadable (the log is replayed)."""
    try:
        document = json.loads(path.read_bytes())
        if document["version"] not in _READABLE_VERSIONS:
            raise ValueError(f"version {document['version']}")
        entries = [
            ProducerEntry(producer_id, epoch, tuple(BatchMetadata(*b) for b in batches), last, *txn)
            for producer_id, epoch, last, batches, *txn in document["producers"]
        ]
        return int(document["offset"]), ProducerStateManager.from_entries(entries)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring producer snapshot %s: %s", path, exc)
        return None
