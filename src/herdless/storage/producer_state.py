"""Idempotent producers: per producer id, the epoch and the last batches written.

Modelled on Kafka's ProducerStateManager. A producer retries a batch it got no
answer for; the broker recognises the retry by its sequence range among the
last five batches of that producer (a producer has at most five in flight) and
answers with the original offsets instead of writing it twice. Sequences must
otherwise follow one another, so a lost batch is noticed instead of skipped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import NamedTuple

from herdless.protocol.records import BatchHeader
from herdless.storage import checkpoint
from herdless.storage.errors import InvalidProducerEpoch, OutOfOrderSequence

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

    def with_batch(self, epoch: int, batch: BatchMetadata) -> ProducerEntry:
        # A new epoch starts a new sequence space: older batches cannot be retried in it.
        kept = self.batches if epoch == self.epoch else ()
        return ProducerEntry(
            producer_id=self.producer_id,
            epoch=epoch,
            batches=(*kept, batch)[-BATCHES_TO_RETAIN:],
            last_timestamp=max(self.last_timestamp, batch.timestamp),
        )


class PendingBatch(NamedTuple):
    """A batch about to be appended, with the offsets and timestamp it will get (a named
    tuple: one is made for every batch appended)."""

    header: BatchHeader
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """Either the original of a retried batch, or the producer entries to commit once written."""

    duplicate: BatchMetadata | None
    updates: dict[int, ProducerEntry]


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    # Sequences are int32 and wrap to 0 after Integer.MAX_VALUE.
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def plan(self, batches: Sequence[PendingBatch]) -> AppendPlan:
        """Check every batch of an append before any is written.

        Raises InvalidProducerEpoch or OutOfOrderSequence; nothing changes until commit().
        """
        updates: dict[int, ProducerEntry] = {}
        for pending in batches:
            header = pending.header
            if header.producer_id < 0:
                continue
            committed = self._producers.get(header.producer_id)
            # Like Kafka, a retry is recognised against what is already written.
            duplicate = committed.find_duplicate(header) if committed is not None else None
            if duplicate is not None:
                return AppendPlan(duplicate=duplicate, updates={})
            current = updates.get(header.producer_id, committed)
            _check(current, header)
            batch = BatchMetadata(
                first_sequence=header.base_sequence,
                last_sequence=header.last_sequence,
                first_offset=pending.first_offset,
                last_offset=pending.last_offset,
                timestamp=pending.timestamp,
            )
            if current is None:
                current = ProducerEntry(header.producer_id, header.producer_epoch, (), -1)
            updates[header.producer_id] = current.with_batch(header.producer_epoch, batch)
        return AppendPlan(duplicate=None, updates=updates)

    def commit(self, plan: AppendPlan) -> None:
        self._producers.update(plan.updates)

    def replay(self, header: BatchHeader, timestamp: int) -> None:
        """Apply a batch read back from the log, unchecked: it was checked when written."""
        if header.producer_id < 0 or header.is_control:
            return
        current = self._producers.get(header.producer_id)
        if current is not None and header.producer_epoch < current.epoch:
            return
        if current is None:
            current = ProducerEntry(header.producer_id, header.producer_epoch, (), -1)
        batch = BatchMetadata(
            first_sequence=header.base_sequence,
            last_sequence=header.last_sequence,
            first_offset=header.base_offset,
            last_offset=header.last_offset,
            timestamp=timestamp,
        )
        self._producers[header.producer_id] = current.with_batch(header.producer_epoch, batch)

    def snapshot(self) -> dict[int, ProducerEntry]:
        """A copy of the state (entries are immutable), for write_producer_snapshot."""
        return dict(self._producers)

    @classmethod
    def from_entries(cls, entries: Sequence[ProducerEntry]) -> ProducerStateManager:
        manager = cls()
        manager._producers = {entry.producer_id: entry for entry in entries}
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
                del self._producers[producer_id]
            elif entry.batches[0].last_offset < log_start_offset:
                kept = tuple(b for b in entry.batches if b.last_offset >= log_start_offset)
                self._producers[producer_id] = replace(entry, batches=kept)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        for producer_id, entry in list(self._producers.items()):
            if now_ms - entry.last_timestamp >= expiration_ms:
                del self._producers[producer_id]


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


_SNAPSHOT_VERSION = 1


def write_producer_snapshot(
    path: Path, offset: int, producers: Mapping[int, ProducerEntry]
) -> None:
    """The producer state as of `offset` (the batches below it), replaced atomically.

    Kafka keeps such snapshots so that opening a log replays only the batches
    after one, not the whole log.
    """
    entries = [
        [e.producer_id, e.epoch, e.last_timestamp, [astuple(b) for b in e.batches]]
        for e in producers.values()
    ]
    document = {"version": _SNAPSHOT_VERSION, "offset": offset, "producers": entries}
    checkpoint.atomic_write(path, json.dumps(document, separators=(",", ":")).encode())


def read_producer_snapshot(path: Path) -> tuple[int, ProducerStateManager] | None:
    """(offset, state) from a snapshot; None if absent or unreadable (the log is replayed)."""
    try:
        document = json.loads(path.read_bytes())
        if document["version"] != _SNAPSHOT_VERSION:
            raise ValueError(f"version {document['version']}")
        entries = [
            ProducerEntry(producer_id, epoch, tuple(BatchMetadata(*b) for b in batches), last)
            for producer_id, epoch, last, batches in document["producers"]
        ]
        return int(document["offset"]), ProducerStateManager.from_entries(entries)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring producer snapshot %s: %s", path, exc)
        return None
