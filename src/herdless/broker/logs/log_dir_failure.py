"""A data directory that fails takes its replicas offline, and brings them back once it
writes again: Kafka's LogDirFailureChannel and LogDirFailureHandler, for a broker in a
cluster.

What fails the directory: a write to it (an append, a flush, a roll, a checkpoint, an
index, retention, a cleaning, a partition created) that the system refused with an
error of the disk's: ENOSPC or EDQUOT (full), EIO (failing), EROFS, or any other errno.
Not: running out of descriptors or memory (EMFILE, ENFILE, ENOMEM), which is the
process's limit and not the directory's, nor an error the scrubber met reading old
segments (it records damage, the directory takes writes). A disk that is full for a
moment counts: the write is lost all the same, and a leader that cannot write holds up
every acks=all producer of its partitions, while in-sync replicas on other disks could
take over within a second.

Offline, as in Kafka: every log is closed without writing (Kafka's closeHandlers), the
broker leads and follows nothing and answers KAFKA_STORAGE_ERROR for its replicas, and
the controller, told through ZooKeeper, elects other leaders from the ISRs (the group
coordinator's shards go with the `__consumer_offsets` leaderships). Unlike Kafka, which
halts a broker whose every directory failed and brings a failed one back only with a
restart, the directory is probed on a timer: once a probe's write and fsync succeed,
every log is opened again as after a crash, and the replicas follow their leaders,
truncate to agree with them, catch up and rejoin the ISRs. A directory that fails again
soon after coming back is probed less and less often, so that a disk filling up over and
over does not move replicas in and out every second.

One log line for each change of state, whatever the number of failed writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from herdless.storage import LogManager, StorageError, StorageIOError

log = logging.getLogger(__name__)

# Between two probes of a failed directory, at first; doubled each time the directory
# fails again within FLAPPING_S of coming back, up to MAX_PROBE_INTERVAL_S.
PROBE_INTERVAL_S = 1.0
MAX_PROBE_INTERVAL_S = 60.0
FLAPPING_S = 60.0
# What a probe writes and syncs: room for one follower fetch of a partition
# (replica.fetch.max.bytes), so that a directory with a few free blocks is not taken
# for one that writes again.
PROBE_BYTES = 1024 * 1024
# Errors that are the process's limits, not the directory's.
_NOT_THE_DIRECTORY = frozenset({"EMFILE", "ENFILE", "ENOMEM", "unknown"})
# Operations that only read, and record what they find as damage.
_READS = frozenset({"scrubbing"})


def fails_directory(operation: str, error: StorageIOError) -> bool:
    """Whether `operation` failing with `error` means the data directory failed."""
    return operation not in _READS and error.errno_name not in _NOT_THE_DIRECTORY


class LogDirFailureHandler:
    def __init__(
        self,
        logs: LogManager,
        clock: Callable[[], int],
        on_offline: Callable[[], None],
        announce_online: Callable[[], Awaitable[None]],
        on_online: Callable[[], None],
        set_offline: Callable[[bool], None] = lambda offline: None,
    ) -> None:
        """`on_offline` takes every replica offline and tells the controller. Once the logs
        are open again, `announce_online` tells the controller, then `on_online` takes the
        replicas back. `set_offline` keeps a metric of the directory's state."""
        self._logs = logs
        self._clock = clock
        self._on_offline = on_offline
        self._announce_online = announce_online
        self._on_online = on_online
        self._set_offline = set_offline
        self._lock = threading.Lock()
        # Set by the first failure a thread reports; cleared once the replicas are back.
        self._failed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._probing: asyncio.Task[None] | None = None
        self._interval_s = PROBE_INTERVAL_S
        # When the directory last came back (time.monotonic()); None before it failed.
        self._online_since: float | None = None

    @property
    def offline(self) -> bool:
        return self._failed

    @property
    def probe_interval_s(self) -> float:
        return self._interval_s

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._set_offline(False)

    async def stop(self) -> None:
        # A write failing while the broker closes its logs takes nothing offline: there is
        # no controller to tell and no probe to run any more.
        self._loop = None
        if self._probing is not None:
            self._probing.cancel()
            await asyncio.gather(self._probing, return_exceptions=True)

    def report(self, operation: str, subject: str, error: StorageIOError) -> None:
        """`operation` of `subject` failed with `error`. From any thread: a flush fails in a
        worker thread. The first failure of the directory takes it offline; later ones,
        until it is back, change nothing."""
        loop = self._loop
        if loop is None or not fails_directory(operation, error):
            return
        with self._lock:
            if self._failed:
                return
            self._failed = True
        reason = f"{operation} of {subject} failed with {error.errno_name}: {error}"
        with contextlib.suppress(RuntimeError):  # the loop closed: the broker has stopped
            loop.call_soon_threadsafe(self._take_offline, reason)

    def _take_offline(self, reason: str) -> None:
        if self._loop is None:
            return  # reported before stop(), handled after it
        now = time.monotonic()
        if self._online_since is not None and now - self._online_since < FLAPPING_S:
            self._interval_s = min(self._interval_s * 2, MAX_PROBE_INTERVAL_S)
        else:
            self._interval_s = PROBE_INTERVAL_S
        replicas = sum(1 for _ in self._logs.logs())
        log.error(
            "the data directory %s failed (%s): its %d replicas are offline, leading and"
            " following nothing, and the controller elects other leaders; probing it every"
            " %gs until it writes again",
            self._logs.data_dir,
            reason,
            replicas,
            self._interval_s,
        )
        self._on_offline()
        self._logs.close_handlers()
        self._set_offline(True)
        assert self._loop is not None
        self._probing = self._loop.create_task(self._probe_until_back(now))

    async def _probe_until_back(self, failed_at: float) -> None:
        told = False
        last_reopen_error: str | None = None
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await asyncio.to_thread(self._logs.probe, PROBE_BYTES)
            except (StorageError, OSError) as exc:
                log.debug("the data directory %s still fails: %s", self._logs.data_dir, exc)
                continue
            try:
                reopened = await asyncio.to_thread(self._logs.reopen, self._clock())
            except (StorageError, OSError) as exc:
                # It takes writes but its logs will not open: that may not clear by itself,
                # so an operator hears of each new reason once.
                if str(exc) != last_reopen_error:
                    last_reopen_error = str(exc)
                    log.warning(
                        "the data directory %s writes again, but its logs cannot be opened: %s",
                        self._logs.data_dir,
                        exc,
                    )
                continue
            except Exception:
                # Probing goes on: a broker that stopped probing would stay offline for good.
                if not told:
                    log.exception("probing the data directory %s failed", self._logs.data_dir)
                    told = True
                continue
            break
        log.info(
            "the data directory %s writes again after %.1fs: its %d replicas are reopened,"
            " recovered as after a crash, and follow their leaders to rejoin the ISRs",
            self._logs.data_dir,
            time.monotonic() - failed_at,
            len(reopened),
        )
        try:
            await self._announce_online()
        except Exception:
            # The directory writes: its replicas come back whatever the controller heard.
            log.exception("telling the controller that %s writes again failed", self._logs.data_dir)
        # From here to the replicas' return nothing else runs on the loop: a failure of
        # theirs takes the directory offline again after it.
        with self._lock:
            self._failed = False
        self._online_since = time.monotonic()
        self._set_offline(False)
        self._on_online()
