"""PartitionLog, the face of a partition's log: what every caller uses.

Its state and the parts of it that every job shares are local_log.py's; each job
is a part of its own (append.py, reader.py, transactions.py, flush.py,
retention.py, truncation.py, cleaning.py) and opening is loader.py's. This module opens a log
and closes it.
"""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec

from herdless.clock import monotonic_ms
from herdless.storage.config import LogConfig
from herdless.storage.descriptors import DescriptorBudget
from herdless.storage.errors import LogFileError, file_problem
from herdless.storage.log import loader
from herdless.storage.log.append import LogAppends
from herdless.storage.log.cleaning import LogCleaning
from herdless.storage.log.flush import LogFlush
from herdless.storage.log.reader import LogReads
from herdless.storage.log.retention import LogRetention
from herdless.storage.log.transactions import LogTransactions
from herdless.storage.log.truncation import LogTruncation
from herdless.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

P = ParamSpec("P")

Opener = Callable[Concatenate[type["PartitionLog"], Path, str, int, P], "PartitionLog"]


def _files_named(opener: Opener[P]) -> Opener[P]:
    """An OSError while a log opens becomes LogFileError naming the file and the partition."""

    @functools.wraps(opener)
    def wrapper(
        cls: type[PartitionLog],
        directory: Path,
        topic: str,
        partition: int,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> PartitionLog:
        try:
            return opener(cls, directory, topic, partition, *args, **kwargs)
        except OSError as exc:
            problem = file_problem(directory, exc)
            raise LogFileError(f"cannot open the log of {topic}-{partition}: {problem}") from exc

    return wrapper


class PartitionLog(
    LogAppends, LogReads, LogTransactions, LogFlush, LogRetention, LogTruncation, LogCleaning
):
    """A partition's log, opened by open(): its parts' methods are its face, one job to each
    part, over the state they share (LocalLog)."""

    # -- opening ------------------------------------------------------------------

    @classmethod
    @_files_named
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        now_ms: int,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        high_watermark_follows_log_end: bool = True,
        clean_shutdown: bool = False,
        budget: DescriptorBudget | None = None,
        monotonic_clock: Callable[[], int] = monotonic_ms,
    ) -> PartitionLog:
        """Open the log in `directory`, creating it if absent, recovering it if it was cut short.

        A log interrupted at any byte opens: the active segment, and any segment
        not known to be synced, is checked batch by batch and cut at the first
        torn or corrupt one. With `high_watermark_follows_log_end` off, the
        high watermark is the owner's to set (set_high_watermark), starting
        from its checkpoint, or the log start offset without one.

        After a crash only what lies past the recovery point is checked; after
        a `clean_shutdown` (the log was closed and flushed, and nothing wrote
        to it since) nothing is. What was synced and is now missing or does
        not parse is damage (damage.py), found by cheap checks: segments whose
        offsets do not follow on from the segment before, batch headers that do
        not chain, a log that ends below its recovery point.

        A file that cannot be used as it stands (a directory, a dangling link,
        an unreadable file, a .log not named by an offset) raises LogFileError
        naming it: the log is not opened without it.

        With a `budget`, the segments' files count against it and are closed
        when unused and others need room (descriptors.py); without one, each
        stays open until the log is closed.

        `monotonic_clock` is the caller's: the log reads it only for what it times
        between calls (flush.ms since the last flush, the recovery point's interval).
        """
        lock = threading.Lock()
        # Held until the log is built: the budget closes a log's files only under its lock.
        with lock:
            loaded = loader.load(
                directory,
                config,
                now_ms,
                producer_id_expiration_ms=producer_id_expiration_ms,
                clean_shutdown=clean_shutdown,
                budget=budget,
                lock=lock,
            )
            return cls(
                directory,
                topic,
                partition,
                config,
                loaded.segments,
                loaded.log_start_offset,
                loaded.recovery_point,
                loaded.producers,
                producer_id_expiration_ms,
                loaded.epochs,
                loaded.high_watermark,
                high_watermark_follows_log_end,
                loaded.damage,
                budget,
                lock,
                monotonic_clock,
            )

    # -- closing ----------------------------------------------------------------

    def close(self) -> None:
        """Flush and close. Later calls on this log raise LogClosed."""
        if self._closed:
            return
        try:
            self.flush(checkpoint_now=True)
            if not self._epochs.path.exists():
                self._epochs.save()  # not to read every batch header at the next open
        finally:
            with self._lock:
                self._close_segments()

    def close_handlers(self) -> None:
        """Close without writing anything, as Kafka's closeHandlers does when the data
        directory failed: later calls raise LogClosed, and a flush or a cleaning in flight
        finds the log closed and stops. The files are read again by open()."""
        with self._lock:
            self._close_segments()

    def wait_idle(self) -> None:
        """Return once no flush, truncation or cleaning of this log is running (one may
        hold a worker thread in an fsync): for a closed log whose files are to be opened
        again. Blocks: call it from a worker thread."""
        with self._clean_lock, self._flush_lock:
            pass

    def delete(self) -> None:
        """Close without flushing and remove the partition directory."""
        with self._flush_lock, self._lock:
            self._close_segments()
        # A cleaning notices the close between batches and stops writing files here.
        with self._clean_lock:
            shutil.rmtree(self.directory, ignore_errors=True)
