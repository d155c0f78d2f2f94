"""The background scrubber: every sealed segment of every log is read now and then and
its batches checked against their CRCs (storage/scrubber.py), at most
`log.scrubber.bytes.per.second`, in a worker thread, one segment at a time.

A pass starts when the broker starts (damage from before the restart is found
first) and then `log.scrubber.backoff.ms` after the previous one ended. What a pass
finds is recorded in the partition's log (never served again, kept across restarts),
logged in one line and shown by the herdless_partition_damaged_offsets metric.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from herdless.storage import LogClosed, LogManager, PartitionLog, StorageIOError
from herdless.storage.damage import Damage
from herdless.storage.log import SealedSegment
from herdless.storage.scrubber import scrub_segment

log = logging.getLogger(__name__)

# Small batches are paced in bursts rather than with a sleep each.
_MIN_SLEEP_S = 0.01


class Scrubber:
    def __init__(
        self,
        logs: LogManager,
        bytes_per_second: int,
        backoff_ms: int,
        on_scrubbed: Callable[[int], None] = lambda count: None,
    ) -> None:
        self._logs = logs
        self._bytes_per_second = bytes_per_second
        self._backoff_s = backoff_ms / 1000
        # Told of each segment's bytes once it has been read.
        self._on_scrubbed = on_scrubbed
        self._stopping = threading.Event()
        self._reading: asyncio.Future[list[Damage]] | None = None
        # When the bytes read so far may have been read at the rate allowed.
        self._due = time.monotonic()

    async def run(self) -> None:
        """Scrub until stop(): a pass, a pause, another pass."""
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                scanned = await self._pass()
            except Exception:
                log.exception("a scrubbing pass failed")
            else:
                log.debug("scrubbed %d segments in %.1fs", scanned, time.monotonic() - started)
            await asyncio.sleep(self._backoff_s)

    async def stop(self) -> None:
        """End a segment's reading at its next batch and wait for the thread to let go."""
        self._stopping.set()
        if self._reading is not None:
            await asyncio.gather(self._reading, return_exceptions=True)

    async def _pass(self) -> int:
        scanned = 0
        self._due = time.monotonic()
        for partition_log in list(self._logs.logs()):
            try:
                segments = partition_log.sealed_segments()
            except LogClosed:
                continue  # deleted or closed since the list was taken
            for sealed in segments:
                if self._stopping.is_set():
                    return scanned
                await self._scrub(partition_log, sealed)
                scanned += 1
        return scanned

    async def _scrub(self, partition_log: PartitionLog, sealed: SealedSegment) -> None:
        # Shielded, and awaited by stop(): a cancelled task leaves no thread reading.
        self._reading = asyncio.ensure_future(asyncio.to_thread(scrub_segment, sealed, self._pace))
        try:
            found = await asyncio.shield(self._reading)
        except StorageIOError as exc:
            partition_log.on_io_error("scrubbing", partition_log.name, exc)
            return
        self._on_scrubbed(sealed.size)
        for damage in found:
            # Logged by the log, once, if it is news and the segment still in the log.
            partition_log.record_damage(sealed.segment, damage)

    def _pace(self, size: int) -> bool:
        """In the worker thread: wait until `size` more bytes keep to the rate; False to stop."""
        now = time.monotonic()
        # Time not spent scrubbing (between segments, in a pause) is not saved up.
        self._due = max(self._due, now - 1.0) + size / self._bytes_per_second
        delay = self._due - now
        if delay < _MIN_SLEEP_S:
            return not self._stopping.is_set()
        return not self._stopping.wait(delay)
