"""Deleting a log's oldest segments: retention.ms and retention.bytes, and the
log start offset DeleteRecords moves (Kafka's UnifiedLog.deleteOldSegments).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from herdless.storage import checkpoint
from herdless.storage.errors import OffsetOutOfRange, StorageIOError
from herdless.storage.log.local_log import LOG_START_OFFSET_FILE, LocalLog, disk_errors
from herdless.storage.segment import Segment

log = logging.getLogger(__name__)


class LogRetention(LocalLog):
    """A log's deletion of its oldest segments."""

    @disk_errors
    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms or retention.bytes; returns how many.

        Only for cleanup.policy with "delete"; segments wholly below the log
        start offset go under any policy. As in Kafka, an expired active segment
        is rolled first so that it can go too.
        """
        with self._lock:
            if self._closed:
                return 0
            config = self.config
            deleted = 0
            if config.deletes and config.retention_ms >= 0:
                retention_ms = config.retention_ms
                deleted += self._delete_oldest(
                    lambda s, _: now_ms - s.largest_timestamp > retention_ms
                )
            if config.deletes and config.retention_bytes >= 0:
                excess = self.size_bytes - config.retention_bytes

                def over_size(segment: Segment, _: Segment | None) -> bool:
                    nonlocal excess
                    if excess - segment.size < 0:
                        return False
                    excess -= segment.size
                    return True

                deleted += self._delete_oldest(over_size)
            deleted += self._delete_below_log_start()
            return deleted

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget the producers whose last write is producer.id.expiration.ms old or older
        and that have no transaction open (Kafka's removeExpiredProducers, run every
        producer.id.expiration.check.interval.ms); returns how many were forgotten."""
        with self._lock:
            if self._closed:
                return 0
            return self._producers.remove_expired(now_ms, self._producer_id_expiration_ms)

    @disk_errors
    def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset (DeleteRecords); -1 means the high watermark.

        Returns the new log start offset (the low watermark). As in Kafka, it
        cannot pass the high watermark.
        """
        with self._lock:
            self._check_open()
            high_watermark = self.high_watermark
            if before_offset == -1:
                before_offset = high_watermark
            if not 0 <= before_offset <= high_watermark:
                raise OffsetOutOfRange(
                    f"cannot delete records before {before_offset}: the high watermark of"
                    f" {self.name} is {high_watermark}"
                )
            if before_offset > self._log_start:
                self._set_log_start(before_offset)
                self._delete_below_log_start()
            return self._log_start

    def _delete_below_log_start(self) -> int:
        return self._delete_oldest(
            lambda _, nxt: nxt is not None and nxt.base_offset <= self._log_start
        )

    def _delete_oldest(self, doomed: Callable[[Segment, Segment | None], bool]) -> int:
        """Delete segments from the oldest on while `doomed(segment, next)` holds.

        As in Kafka, only segments wholly below the high watermark go: records
        not yet committed are never deleted.
        """
        count = 0
        high_watermark = self.high_watermark
        for i, segment in enumerate(self._segments):
            following = self._segments[i + 1] if i + 1 < len(self._segments) else None
            if following is None and segment.size == 0:
                break
            end = self.log_end_offset if following is None else following.base_offset
            if end > high_watermark or not doomed(segment, following):
                break
            count += 1
        if count == 0:
            return 0
        if count == len(self._segments):
            self._roll()
        victims = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for segment in victims:
            segment.delete()
        self._dir_dirty = True
        if self._segments[0].base_offset > self._log_start:
            self._set_log_start(self._segments[0].base_offset, durable=False)
        log.info("%s: deleted %d segments, log start offset %d", self.name, count, self._log_start)
        return count

    def _set_log_start(self, offset: int, *, durable: bool = True) -> None:
        """Move the log start offset up, checkpointed first: records a DeleteRecords
        removed must stay removed after a restart (StorageIOError, nothing changed, if
        the checkpoint cannot be written). Not `durable`: the segments below are gone,
        which makes the next open start the log there anyway; only reported then."""
        try:
            checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, offset)
        except OSError as exc:
            message = f"cannot checkpoint the log start offset of {self.name}"
            if durable:
                raise StorageIOError(f"{message}: {exc}") from exc
            self._io_failed("checkpoint", message, exc)
        self._log_start = offset
        self._producers.truncate_head(offset)
        self._high_watermark = max(self._high_watermark, offset)
        try:
            self._epochs.truncate_from_start(offset)
        except StorageIOError as exc:
            # Cut in memory; opening cuts the checkpoint to the log start again.
            self.on_io_error("checkpoint", self.name, exc)
        self._forget_damage_outside()
