"""When a log's records reach the disk: the flush policy's test (flush_due) and
the flush itself, with the recovery point and producer snapshot it leaves behind.
"""

from __future__ import annotations

import os

from herdless.storage import checkpoint
from herdless.storage.errors import StorageIOError
from herdless.storage.log.local_log import (
    PRODUCER_SNAPSHOT_FILE,
    RECOVERY_POINT_FILE,
    LocalLog,
    disk_errors,
)
from herdless.storage.producer_state import write_producer_snapshot

# A flush writes the recovery point (two more fsyncs) at most this often, as Kafka checkpoints
# it on a schedule: an older recovery point only means more to check after a crash.
RECOVERY_POINT_INTERVAL_MS = 1000


class LogFlush(LocalLog):
    """A log's flushes."""

    def flush_due(self, monotonic_ms: int) -> bool:
        """Whether flush.messages or flush.ms asks for a flush now (`monotonic_ms`); never
        of a closed log, which flush() would leave as it is."""
        unflushed = self.unflushed_messages
        if unflushed == 0 or self._closed:
            return False
        config = self.config
        if config.flush_messages is not None and unflushed >= config.flush_messages:
            return True
        return config.flush_ms is not None and monotonic_ms - self.last_flush_ms >= config.flush_ms

    @disk_errors
    def flush(self, monotonic_ms: int | None = None, *, checkpoint_now: bool = False) -> None:
        """fsync everything appended so far. Safe to run in a thread beside appends.

        The recovery point (and the producer state at it) follows at most once
        every RECOVERY_POINT_INTERVAL_MS, or now with `checkpoint_now`.

        Descriptors are duplicated under the lock and synced outside it, so an
        append or a roll waits only for the bookkeeping, and a segment closed or
        deleted meanwhile is never synced through a stale descriptor.
        """
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                dirty = [s for s in self._segments if s.dirty]
                dir_dirty = self._dir_dirty
                handles: list[int] = []
                # A segment whose index could not be written whole is recovered after a
                # crash, however well its records were synced: the recovery point stays below.
                torn: tuple[int, OSError] | None = None
                try:
                    for segment in dirty:
                        taken, problem = segment.take_sync_handles()
                        handles.extend(taken)
                        if problem is not None and torn is None:
                            torn = segment.base_offset, problem
                    if dir_dirty:
                        handles.append(os.open(self.directory, os.O_RDONLY))
                except OSError as exc:
                    _close_all(handles)
                    raise StorageIOError(f"cannot flush {self.name}: {exc}") from exc
                self._dir_dirty = False
                appended = self._appended_messages
                recovery_point = self.log_end_offset if torn is None else torn[0]
                # At once when a segment was sealed since, so that reopening never checks
                # sealed segments again; else on the interval.
                due = (
                    checkpoint_now
                    or self._segments[-1].base_offset > self._recovery_point
                    or self._monotonic_clock() - self._recovery_point_written_ms
                    >= RECOVERY_POINT_INTERVAL_MS
                )
                producer_snapshot = self._producers.snapshot() if due else None
                high_watermark = None if self._follows_log_end else self._high_watermark
            try:
                for fd in handles:
                    os.fsync(fd)
            except OSError as exc:
                with self._lock:
                    for segment in dirty:
                        segment.dirty = True
                    self._dir_dirty = self._dir_dirty or dir_dirty
                raise StorageIOError(f"fsync failed for {self.name}: {exc}") from exc
            finally:
                _close_all(handles)
            self._flushed_messages = appended
            self.last_flush_ms = self._monotonic_clock() if monotonic_ms is None else monotonic_ms
            if torn is not None:
                self._io_failed("index", f"cannot rewrite an index of {self.name}", torn[1])
            # The records are synced: a checkpoint that cannot be written (a full disk)
            # fails no one; an older one only means more to check after a crash.
            if producer_snapshot is not None and recovery_point > self._recovery_point:
                try:
                    # Everything below the log end is synced: no need to check it after a
                    # crash. The snapshot first: one ahead of the recovery point is usable.
                    write_producer_snapshot(
                        self.directory / PRODUCER_SNAPSHOT_FILE, recovery_point, producer_snapshot
                    )
                    checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, recovery_point)
                except OSError as exc:
                    message = f"cannot checkpoint the recovery point of {self.name}"
                    self._io_failed("checkpoint", message, exc)
                else:
                    self._recovery_point = recovery_point
                    self._recovery_point_written_ms = self._monotonic_clock()
            if high_watermark is not None:
                # After the data it covers is synced; following the log end, it is not kept.
                try:
                    self._checkpoint_high_watermark(high_watermark)
                except OSError as exc:
                    message = f"cannot checkpoint the high watermark of {self.name}"
                    self._io_failed("checkpoint", message, exc)


def _close_all(handles: list[int]) -> None:
    for fd in handles:
        os.close(fd)
