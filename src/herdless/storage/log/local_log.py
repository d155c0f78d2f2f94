"""The log of one partition: a directory of segments, as Kafka lays it out.

    <topic>-<partition>/
        00000000000000000000.log  .index  .timeindex  .txnindex (once a transaction aborts)
        00000000000000004821.log  .index  .timeindex    <- active segment, takes appends
        log-start-offset       DeleteRecords and retention can leave it inside a segment
        recovery-point         the log end offset at a flush: every batch below it is synced
        producer-snapshot      the producer state at the recovery point, open transactions
                               included (producer_state.py)
        leader-epoch-checkpoint  the offset each leader epoch started at (leader_epochs.py)
        high-watermark         when the owner sets the high watermark: its last flushed value
        damaged-offsets        offsets known missing or corrupt, not served (damage.py)
        offset-gaps            present once a follower stored a compacted leader's gaps

The log serves a leader (append, which assigns offsets) and a follower
(append_as_follower, which stores a leader's batches as they are; truncate_to
and truncate_fully_and_start_at, which cut it back to where it agrees with the
leader). Which it is, and what the high watermark is, is the owner's business:
by default the high watermark follows the log end offset, as on a lone broker.

PartitionLog (partition_log.py) is the face every caller uses. This module holds
what all of its parts share, as Kafka's LocalLog does: the segment list and the
offsets, checkpoints and locks around it, rolling, leader epochs and the damage
known. Each job over that state is a module of its own, as in Kafka's split:
loader.py opens and recovers (LogLoader), append.py appends, reader.py reads,
flush.py syncs, retention.py deletes old segments (UnifiedLog.deleteOldSegments),
truncation.py cuts a follower back, cleaning.py hands segments to the log cleaner.

Threads: the broker calls everything from its event loop except flush() and
the log cleaner (cleaner.clean), which it runs in worker threads. `_lock` guards
the segment list, the descriptors and the counters, and is held only briefly by
flush(), which fsyncs duplicated descriptors outside it, and by the cleaner,
which reads sealed segments through descriptors of its own and writes its copy
outside it, and takes it only to swap the copy in. `_flush_lock` keeps two
flushes (or a flush and a delete or a truncation) from interleaving;
`_clean_lock` does the same for two cleanings, and makes delete() wait for a
cleaning to notice the close and a truncation for it to notice the truncation.
A truncation holds all three, in the order _clean_lock, _flush_lock, _lock:
it is rare, and may keep the loop waiting for a flush's fsync. With a
descriptor budget (descriptors.py), another thread may close a segment's files
to make room, but only holding `_lock` (taken without waiting): a segment's
descriptors are only ever used under it, and reopen on their next use.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from herdless.storage import checkpoint
from herdless.storage.config import LogConfig
from herdless.storage.damage import Damage, DamageMap
from herdless.storage.descriptors import DescriptorBudget
from herdless.storage.errors import IoErrorListener, LogClosed, StorageIOError
from herdless.storage.leader_epochs import EpochEntry, LeaderEpochCache
from herdless.storage.producer_state import ProducerStateManager
from herdless.storage.segment import Segment

log = logging.getLogger(__name__)


P = ParamSpec("P")
R = TypeVar("R")
# Any part of the log: each is a LocalLog with one job's methods added.
L = TypeVar("L", bound="LocalLog")

LOG_START_OFFSET_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
HIGH_WATERMARK_FILE = "high-watermark"
PRODUCER_SNAPSHOT_FILE = "producer-snapshot"
# Where the log cleaner's last cleaning ended (cleaner.py); a truncation below it pulls it back.
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# Present once a follower stored the offset gaps of a compacted leader.
OFFSET_GAPS_FILE = "offset-gaps"


def disk_errors(
    method: Callable[Concatenate[L, P], R],
) -> Callable[Concatenate[L, P], R]:
    """An OSError from any write below (a full disk) becomes StorageIOError naming the log:
    KAFKA_STORAGE_ERROR for the request that asked, never an unexpected exception."""

    @functools.wraps(method)
    def wrapper(self: L, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            action = method.__name__.replace("_", " ")
            raise StorageIOError(f"{action} of {self.name} failed: {exc}") from exc

    return wrapper


def log_io_error(operation: str, name: str, error: StorageIOError) -> None:
    log.warning("%s of %s failed: %s", operation, name, error)


def new_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    budget: DescriptorBudget | None,
    lock: threading.Lock,
) -> Segment:
    segment = Segment.create(directory, base_offset, config.segment_index_bytes)
    if budget is not None:
        segment.manage(budget, lock)
    return segment


class LocalLog:
    """What every part of a partition's log shares (see the module's docstring)."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[Segment],
        log_start_offset: int,
        recovery_point: int,
        producers: ProducerStateManager,
        producer_id_expiration_ms: int,
        epochs: LeaderEpochCache,
        high_watermark: int,
        high_watermark_follows_log_end: bool,
        damage: DamageMap,
        budget: DescriptorBudget | None,
        lock: threading.Lock,
        monotonic_clock: Callable[[], int],
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        # Replaced whole when the topic's configs change; read once per operation.
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start = log_start_offset
        self._recovery_point = recovery_point
        self._producers = producers
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._budget = budget
        self._lock = lock
        self._flush_lock = threading.Lock()
        self._clean_lock = threading.Lock()
        # Set while a truncation waits for a cleaning to stop; the cleaner checks it.
        self._truncating = False
        self._epochs = epochs
        self._damage = damage
        self._follows_log_end = high_watermark_follows_log_end
        # Only read while the owner sets it (not following the log end offset).
        self._high_watermark = high_watermark
        self._checkpointed_high_watermark = high_watermark
        self._closed = False
        self._dir_dirty = True
        self.roll_jitter_ms = self._draw_roll_jitter()
        # Records appended and records known synced; only the loop thread writes the
        # first and only flush() the second, so neither needs the lock.
        self._appended_messages = 0
        self._flushed_messages = 0
        # On the monotonic clock: flush.ms is an interval, which a stepped wall clock
        # would stretch (no flush for an hour) or cut short.
        self._monotonic_clock = monotonic_clock
        self.last_flush_ms = monotonic_clock()
        self._recovery_point_written_ms = self.last_flush_ms
        # When a tombstone the log cleaner kept may be dropped (cleaner.py owns it);
        # None until a cleaning since the log was opened has told.
        self.tombstone_expiry_ms: int | None = None
        # Told of writes that failed where no caller hears of it (checkpoints after a
        # flush that synced the records); the LogManager passes on the broker's.
        self.on_io_error: IoErrorListener = log_io_error

    def set_producer_id_expiration_ms(self, expiration_ms: int) -> None:
        """A new producer.id.expiration.ms (a dynamic broker config): idle producers are
        forgotten by it from the next check on."""
        self._producer_id_expiration_ms = expiration_ms

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, {self._log_start}..{self.log_end_offset})"

    # -- state ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        next_offset = self._segments[-1].next_offset
        assert next_offset is not None
        return next_offset

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed, the end of what consumers may read."""
        if self._follows_log_end:
            # One replica: everything appended is committed.
            return self.log_end_offset
        return self._high_watermark

    @property
    def high_watermark_follows_log_end(self) -> bool:
        return self._follows_log_end

    def set_high_watermark(self, offset: int) -> int:
        """Move the high watermark up to `offset`; returns the high watermark.

        Clamped into [log start offset, log end offset]; a lower value than the
        current one is ignored: only a truncation moves it back. For a log
        opened with high_watermark_follows_log_end off.
        """
        with self._lock:
            self._check_open()
            if self._follows_log_end:
                raise ValueError(f"the high watermark of {self.name} follows its log end offset")
            offset = min(max(offset, self._log_start), self.log_end_offset)
            self._high_watermark = max(self._high_watermark, offset)
            return self._high_watermark

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def unflushed_messages(self) -> int:
        return self._appended_messages - self._flushed_messages

    @property
    def producers(self) -> ProducerStateManager:
        return self._producers

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def damage(self) -> list[Damage]:
        """The offset ranges known to be missing or corrupt, which are not served."""
        return self._damage.ranges

    def record_damage(self, segment: Segment, damage: Damage) -> bool:
        """Record damage found in `segment` (by the scrubber, the cleaner): from now on it
        is not served. Returns False if the segment has left the log meanwhile (retention,
        a cleaning swapped it out), the range lies below the log start, or it was known."""
        with self._lock:
            if (
                self._closed
                or segment not in self._segments
                or damage.end_offset <= self._log_start
            ):
                return False
            if not self._damage.add(damage):
                return False
            log.error("%s: %s; they are not served", self.name, damage.describe(self.name))
            self._save_damage()
            return True

    def _forget_damage_outside(self) -> None:
        if self._damage.keep_within(self._log_start, self.log_end_offset):
            self._save_damage()

    def _save_damage(self) -> None:
        try:
            self._damage.save()
        except OSError as exc:
            # Known in memory; a restart before the scrubber finds it again would serve it.
            self._io_failed("checkpoint", f"cannot record the damage of {self.name}", exc)

    # -- leader epochs ----------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        """The latest leader epoch known to have written (or been assigned) here."""
        return self._epochs.latest_epoch

    @property
    def leader_epoch_entries(self) -> list[EpochEntry]:
        return self._epochs.entries

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: LeaderEpochCache.end_offset_for."""
        with self._lock:
            self._check_open()
            return self._epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The leader epoch that wrote `offset`, if the cache knows it."""
        return self._epochs.epoch_for_offset(offset)

    @disk_errors
    def assign_leader_epoch(self, epoch: int) -> None:
        """Record that `epoch` starts at the log end offset: a leader elected here, before
        it appends, so that OffsetForLeaderEpoch for older epochs ends where it took over."""
        with self._lock:
            self._check_open()
            self._epochs.assign(epoch, self.log_end_offset)

    # -- rolling ----------------------------------------------------------------

    @disk_errors
    def roll(self) -> None:
        """Start a new active segment (if the current one holds anything)."""
        with self._lock:
            self._check_open()
            self._roll()

    def _roll(self, base_offset: int | None = None) -> None:
        """A new active segment at the log end offset, or at `base_offset` if past it.

        An empty active segment stays unless a base offset is given; it is then
        left behind empty (reopening drops it unless it is the first).
        """
        active = self._segments[-1]
        if active.size == 0 and base_offset is None:
            return
        base = self.log_end_offset if base_offset is None else max(base_offset, self.log_end_offset)
        # Created before the active segment is sealed: if it cannot be (a full disk),
        # the active segment takes appends as before.
        segment = new_segment(self.directory, base, self.config, self._budget, self._lock)
        active.seal()
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        self._dir_dirty = True
        self.roll_jitter_ms = self._draw_roll_jitter()

    def _draw_roll_jitter(self) -> int:
        """segment.jitter.ms, drawn per active segment as Kafka does, so that logs
        created together do not all roll at the same moment."""
        bound = min(self.config.segment_jitter_ms, self.config.max_segment_ms)
        return random.randrange(bound) if bound > 0 else 0

    # -- checkpoints and closing -------------------------------------------------

    def _io_failed(self, operation: str, message: str, exc: OSError) -> None:
        error = StorageIOError(f"{message}: {exc}")
        error.__cause__ = exc
        self.on_io_error(operation, self.name, error)

    def _checkpoint_high_watermark(self, high_watermark: int) -> None:
        if high_watermark != self._checkpointed_high_watermark:
            checkpoint.write_offset(self.directory / HIGH_WATERMARK_FILE, high_watermark)
            self._checkpointed_high_watermark = high_watermark

    def _close_segments(self) -> None:
        self._closed = True
        for segment in self._segments:
            segment.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"the log of {self.name} is closed")
