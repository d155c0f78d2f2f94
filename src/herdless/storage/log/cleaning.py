"""The log's side of compaction: the sealed segments it offers the log cleaner
(cleaner.py), which reads them outside the lock, and the swap of a cleaned copy in.
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from herdless.storage import swap
from herdless.storage.config import LogConfig
from herdless.storage.errors import StorageIOError
from herdless.storage.log.local_log import LocalLog
from herdless.storage.segment import LOG_SUFFIX, Segment
from herdless.storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SealedSegment:
    """A segment below the active one as the log cleaner sees it, read outside the lock."""

    segment: Segment
    base_offset: int
    # The next segment's base: this segment's offsets lie below it.
    next_base_offset: int
    size: int
    largest_timestamp: int
    # Only retention or DeleteRecords could delete it meanwhile, and no other segment
    # ever takes its name: whatever opens under this path is this segment's data.
    path: Path


@dataclass(frozen=True, slots=True)
class CleaningView:
    config: LogConfig
    log_start_offset: int
    sealed: list[SealedSegment]
    # Last offsets of the batches the producer state remembers: their headers must stay.
    producer_batches: frozenset[int]
    # Producer id -> (epoch, offset of its last remembered batch, -1 if none), for each
    # producer the state knows: a marker that is a producer's last word keeps its epoch.
    producer_epochs: dict[int, tuple[int, int]]


class LogCleaning(LocalLog):
    """A log's side of compaction."""

    @property
    def cleaner_lock(self) -> threading.Lock:
        """Held for a whole cleaning, so that two never overlap and delete() waits for one."""
        return self._clean_lock

    def view_for_cleaning(self) -> CleaningView:
        """The segments below the active one, which the cleaner reads outside the lock.

        Sealed segments never change until the cleaner itself, retention or a
        truncation replaces them, and the cleaner and a truncation both hold
        cleaner_lock. Only segments wholly below the high watermark are
        offered, as Kafka cleans only committed records: a newer record of a
        key that a truncation could still take away must not have replaced
        the older one. Nor past the last stable offset: whether an open
        transaction's records count is not known until it ends.
        """
        with self._lock:
            self._check_open()
            limit = self.high_watermark
            first_unstable = self._producers.first_unstable_offset()
            if first_unstable is not None:
                limit = min(limit, first_unstable)
            damaged = self._damage.next_start(0)
            if damaged is not None:
                # Damaged segments are kept as they are: a copy would drop what is unreadable.
                limit = min(limit, damaged)
            return CleaningView(
                self.config,
                self._log_start,
                self._sealed(limit),
                frozenset(self._producers.remembered_last_offsets()),
                {
                    entry.producer_id: (entry.epoch, entry.last_offset)
                    for entry in self._producers.snapshot().values()
                },
            )

    def sealed_segments(self) -> list[SealedSegment]:
        """Every segment below the active one, for reading outside the lock (the scrubber)."""
        with self._lock:
            self._check_open()
            return self._sealed(sys.maxsize)

    def _sealed(self, limit: int) -> list[SealedSegment]:
        """The sealed segments wholly below offset `limit`."""
        return [
            SealedSegment(
                segment,
                segment.base_offset,
                following.base_offset,
                segment.size,
                segment.largest_timestamp,
                segment.path(LOG_SUFFIX),
            )
            for segment, following in pairwise(self._segments)
            if following.base_offset <= limit
        ]

    def replace_segments(
        self, old: list[Segment], cleaned: Segment, aborted: list[AbortedTxn]
    ) -> bool:
        """Swap the cleaned copy of the consecutive segments `old` in for them (swap.py),
        its transaction index holding `aborted`: those whose markers the copy kept.

        Returns False, changing nothing, if `old` are no longer all in the log
        (retention or DeleteRecords got there first) or the log was closed; the
        caller then deletes `cleaned`. Reads see either the old segments or the
        new one, never a mix: the swap happens under the lock.
        """
        with self._lock:
            if self._closed or not old or old[0] not in self._segments:
                return False
            first = self._segments.index(old[0])
            last = first + len(old)
            if last >= len(self._segments) or any(
                a is not b for a, b in zip(self._segments[first:last], old, strict=True)
            ):
                return False
            cleaned.txn_index.replace_with(aborted)
            try:
                swap.install(self.directory, cleaned, old)
            except OSError as exc:
                message = f"swapping in cleaned segment {cleaned.base_offset} of {self.name} failed"
                if cleaned.file_suffix == swap.CLEANED_SUFFIX:
                    raise StorageIOError(f"{message} before its commit: {exc}") from exc
                # Some of `old` may be gone already. Serve nothing until the log is opened
                # again, which completes the swap, as Kafka takes a failed log dir offline.
                log.error("%s: %s; closing the log until it is reopened", self.name, exc)
                self._close_segments()
                raise StorageIOError(f"{message}; the log is closed until reopened: {exc}") from exc
            self._segments[first:last] = [cleaned]
            self._bases[first:last] = [cleaned.base_offset]
            if self._budget is not None:
                cleaned.manage(self._budget, self._lock)
            if cleaned.size == 0 and first > 0:
                # Holds nothing and fixes no log start: the segment before covers its range.
                del self._segments[first]
                del self._bases[first]
                cleaned.delete()
            log.info(
                "%s: swapped in cleaned segment %d for %d segments",
                self.name,
                cleaned.base_offset,
                len(old),
            )
            return True
