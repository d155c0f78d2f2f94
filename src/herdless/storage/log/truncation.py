"""A follower's truncation, to where its log agrees with its leader's.

Truncation and crashes: segments above the cut are deleted newest first and
the directory synced before the cut segment is cut and synced, so a crash at
any point leaves a prefix of the old log, never a hole; only then does the
leader-epoch cache follow (reopening cuts a cache that runs past the log).
The owner truncates again after a restart, as a Kafka follower does, before
anything new is appended.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager

from herdless.storage import checkpoint
from herdless.storage.errors import StorageIOError
from herdless.storage.log.loader import estimate_first_append, rebuild_producers
from herdless.storage.log.local_log import (
    CLEANER_CHECKPOINT_FILE,
    LOG_START_OFFSET_FILE,
    PRODUCER_SNAPSHOT_FILE,
    RECOVERY_POINT_FILE,
    LocalLog,
    disk_errors,
    new_segment,
)
from herdless.storage.producer_state import ProducerStateManager

log = logging.getLogger(__name__)


class LogTruncation(LocalLog):
    """A follower's truncation of its log."""

    @property
    def truncation_pending(self) -> bool:
        """A truncation waits for the cleaner to let go: a cleaning should stop."""
        return self._truncating

    @disk_errors
    def truncate_to(self, offset: int, now_ms: int) -> bool:
        """Remove every batch at or after `offset`; returns whether the log was cut.

        A batch holding `offset` goes whole, so the log end offset becomes that
        batch's base offset, below `offset`; where compaction left a gap before
        `offset`, the end of the last batch before it. Segments above the cut
        are deleted, the one holding it cut with its indexes; producer state is
        rebuilt, the leader-epoch cache truncated, the high watermark and the
        log start offset lowered to the new end if above it. Below the first
        segment the log is emptied and restarts at `offset`
        (truncate_fully_and_start_at). An offset at or past the log end only
        drops epochs the cache has for offsets not written (as Kafka does: a
        leader elected here may have assigned its epoch and written nothing).

        Waits for a flush in progress, and for a cleaning to stop.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to offset {offset}")
        with self._cleaning_paused(), self._flush_lock, self._lock:
            self._check_open()
            log_end = self.log_end_offset
            if offset >= log_end:
                self._epochs.truncate_from_end(log_end)
                return False
            if offset < self._segments[0].base_offset:
                self._truncate_fully(offset)
            else:
                self._cut(offset, now_ms)
            return True

    @disk_errors
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log, empty, at `offset`.

        For a follower whose leader's log starts past its end (or a replica
        starting over). Log start, log end and high watermark all become `offset`.
        """
        if offset < 0:
            raise ValueError(f"cannot restart {self.name} at offset {offset}")
        with self._cleaning_paused(), self._flush_lock, self._lock:
            self._check_open()
            self._truncate_fully(offset)

    @contextmanager
    def _cleaning_paused(self) -> Iterator[None]:
        self._truncating = True
        try:
            with self._clean_lock:
                yield
        finally:
            self._truncating = False

    def _cut(self, offset: int, now_ms: int) -> None:
        index = bisect_right(self._bases, offset) - 1
        kept = self._segments[index]
        doomed = self._segments[index + 1 :]
        if self._recovery_point > kept.base_offset:
            # New appends may go into the cut segment and be sealed there: check it after a crash.
            checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, kept.base_offset)
            self._recovery_point = kept.base_offset
        # It may remember batches the cut removes.
        (self.directory / PRODUCER_SNAPSHOT_FILE).unlink(missing_ok=True)
        del self._segments[index + 1 :]
        del self._bases[index + 1 :]
        try:
            # Newest first: a crash in between leaves a shorter log, never one with a hole.
            for segment in reversed(doomed):
                segment.delete()
            if doomed:
                checkpoint.fsync_dir(self.directory)
            kept.truncate_to(offset)
        except (OSError, StorageIOError) as exc:
            log.error("%s: truncation to %d failed; closing the log: %s", self.name, offset, exc)
            for segment in doomed:
                segment.close()
            self._close_segments()
            raise StorageIOError(
                f"truncating {self.name} to {offset} failed; the log is closed until reopened:"
                f" {exc}"
            ) from exc
        self._dir_dirty = True  # the cut segment's indexes were replaced
        if kept.size > 0 and kept.first_append_ms is None:
            kept.first_append_ms = estimate_first_append(kept, now_ms)
        log_end = self.log_end_offset
        self._epochs.truncate_from_end(log_end)
        if self._log_start > log_end:
            self._log_start = log_end
            checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, log_end)
        self._after_truncation(log_end)
        self._producers = rebuild_producers(
            self._segments, self._log_start, now_ms, self._producer_id_expiration_ms
        )
        log.info(
            "%s: truncated to %d (%d segments deleted); log end offset %d",
            self.name,
            offset,
            len(doomed),
            log_end,
        )

    def _truncate_fully(self, offset: int) -> None:
        if offset > self.log_end_offset:
            # From here on a crash reopens the log empty at `offset`: open() starts a log
            # that ends below its start offset afresh.
            checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, offset)
        first_base = self._segments[0].base_offset
        if self._recovery_point > first_base:
            # A crash while the segments go must not look like synced records lost.
            checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, first_base)
            self._recovery_point = first_base
        doomed, self._segments, self._bases = self._segments, [], []
        try:
            for segment in reversed(doomed):
                segment.delete()
            checkpoint.fsync_dir(self.directory)
            fresh = new_segment(self.directory, offset, self.config, self._budget, self._lock)
        except (OSError, StorageIOError) as exc:
            log.error("%s: restarting at %d failed; closing the log: %s", self.name, offset, exc)
            for segment in doomed:
                segment.close()
            self._closed = True
            raise StorageIOError(
                f"restarting {self.name} at {offset} failed; the log is closed until reopened:"
                f" {exc}"
            ) from exc
        self._segments, self._bases = [fresh], [offset]
        self._dir_dirty = True
        self._log_start = offset
        checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, offset)
        self._recovery_point = offset
        checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, offset)
        (self.directory / PRODUCER_SNAPSHOT_FILE).unlink(missing_ok=True)
        self._epochs.clear()
        self._producers = ProducerStateManager()
        self._high_watermark = offset
        self._after_truncation(offset)
        log.info("%s: emptied, restarting at offset %d", self.name, offset)

    def _after_truncation(self, log_end: int) -> None:
        self._forget_damage_outside()
        cleaned_to = checkpoint.read_offset(self.directory / CLEANER_CHECKPOINT_FILE)
        if cleaned_to is not None and cleaned_to > log_end:
            checkpoint.write_offset(self.directory / CLEANER_CHECKPOINT_FILE, log_end)
        self._high_watermark = min(max(self._high_watermark, self._log_start), log_end)
        if not self._follows_log_end:
            # Not left for the next flush: new records must not pass as committed after a crash.
            self._checkpoint_high_watermark(self._high_watermark)
