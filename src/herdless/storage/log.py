"""The log of one partition: a directory of segments, as Kafka lays it out.

    <topic>-<partition>/
        00000000000000000000.log  .index  .timeindex
        00000000000000004821.log  .index  .timeindex    <- active segment, takes appends
        log-start-offset       DeleteRecords and retention can leave it inside a segment
        recovery-point         the log end offset at a flush: every batch below it is synced
        producer-snapshot      the producer state at the recovery point (producer_state.py)
        leader-epoch-checkpoint  the offset each leader epoch started at (leader_epochs.py)
        high-watermark         when the owner sets the high watermark: its last flushed value
        damaged-offsets        offsets known missing or corrupt, not served (damage.py)
        offset-gaps            present once a follower stored a compacted leader's gaps

The log serves a leader (append, which assigns offsets) and a follower
(append_as_follower, which stores a leader's batches as they are; truncate_to
and truncate_fully_and_start_at, which cut it back to where it agrees with the
leader). Which it is, and what the high watermark is, is the owner's business:
by default the high watermark follows the log end offset, as on a lone broker.

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

Truncation and crashes: segments above the cut are deleted newest first and
the directory synced before the cut segment is cut and synced, so a crash at
any point leaves a prefix of the old log, never a hole; only then does the
leader-epoch cache follow (reopening cuts a cache that runs past the log).
The owner truncates again after a restart, as a Kafka follower does, before
anything new is appended.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import shutil
import sys
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Concatenate, NamedTuple, ParamSpec, TypeVar

from herdless.protocol import records
from herdless.protocol.records import HEADER_SIZE, BatchHeader
from herdless.protocol.regions import FileRegion
from herdless.storage import checkpoint, swap
from herdless.storage.config import LogConfig
from herdless.storage.damage import DAMAGED_OFFSETS_FILE, Damage, DamageKind, DamageMap
from herdless.storage.descriptors import DescriptorBudget
from herdless.storage.errors import (
    CorruptRecord,
    InvalidRecord,
    InvalidTimestamp,
    IoErrorListener,
    LogClosed,
    LogFileError,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
    RecordError,
    RecordTooLarge,
    StorageIOError,
    UnexpectedAppendOffset,
    file_problem,
)
from herdless.storage.leader_epochs import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCache,
)
from herdless.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    PendingBatch,
    ProducerStateManager,
    read_producer_snapshot,
    write_producer_snapshot,
)
from herdless.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_DIGITS,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    BatchPlacement,
    Segment,
    header_problem,
    parse_base_offset,
    segment_file,
)

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

LOG_START_OFFSET_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
HIGH_WATERMARK_FILE = "high-watermark"
PRODUCER_SNAPSHOT_FILE = "producer-snapshot"
# A flush writes the recovery point (two more fsyncs) at most this often, as Kafka checkpoints
# it on a schedule: an older recovery point only means more to check after a crash.
RECOVERY_POINT_INTERVAL_S = 1.0
# Where the log cleaner's last cleaning ended (cleaner.py); a truncation below it pulls it back.
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# Present once a follower stored the offset gaps of a compacted leader.
OFFSET_GAPS_FILE = "offset-gaps"
# Left behind by an interrupted compaction, deletion or checkpoint once swap.py has
# completed the committed swaps: never complete data.
_STRAY_SUFFIXES = (swap.CLEANED_SUFFIX, swap.SWAP_SUFFIX, ".deleted", checkpoint.TMP_SUFFIX)


# The special timestamps of ListOffsets.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class AppendInfo(NamedTuple):
    """What an append stored. A named tuple, made once per append: a frozen dataclass
    cost several times as much to make."""

    # For a follower's append that stored nothing, first_offset is the log end offset
    # and last_offset the one before: an empty range.
    first_offset: int
    last_offset: int
    # The broker's clock when the topic uses LogAppendTime, else -1 (the produce response field).
    log_append_time_ms: int
    log_start_offset: int
    # A producer retry of batches already written: nothing was appended, offsets are the originals.
    duplicate: bool = False


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


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


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


def _disk_errors(
    method: Callable[Concatenate[PartitionLog, P], R],
) -> Callable[Concatenate[PartitionLog, P], R]:
    """An OSError from any write below (a full disk) becomes StorageIOError naming the log:
    KAFKA_STORAGE_ERROR for the request that asked, never an unexpected exception."""

    @functools.wraps(method)
    def wrapper(self: PartitionLog, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            action = method.__name__.replace("_", " ")
            raise StorageIOError(f"{action} of {self.name} failed: {exc}") from exc

    return wrapper


class PartitionLog:
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
        self.last_flush_ms = _monotonic_ms()
        self._recovery_point_written_s = time.monotonic()
        # When a tombstone the log cleaner kept may be dropped (cleaner.py owns it);
        # None until a cleaning since the log was opened has told.
        self.tombstone_expiry_ms: int | None = None
        # Told of writes that failed where no caller hears of it (checkpoints after a
        # flush that synced the records); the LogManager passes on the broker's.
        self.on_io_error: IoErrorListener = log_io_error

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, {self._log_start}..{self.log_end_offset})"

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
        """
        lock = threading.Lock()
        # Held until the log is built: the budget closes a log's files only under its lock.
        with lock:
            directory.mkdir(parents=True, exist_ok=True)
            swap.complete_interrupted_swaps(directory)
            _remove_strays(directory)
            checkpointed_start = checkpoint.read_offset(directory / LOG_START_OFFSET_FILE)
            # Absent, every segment gets checked: slow but safe.
            recovery_point = checkpoint.read_offset(directory / RECOVERY_POINT_FILE) or 0
            bases = _segment_bases(directory, checkpointed_start or 0)
            synced_below = sys.maxsize if clean_shutdown else recovery_point
            segments = _open_segments(
                directory, config, bases, synced_below, recovery_point, budget, lock
            )
            damage = DamageMap.load(directory / DAMAGED_OFFSETS_FILE)
            try:
                if not segments:
                    start = checkpointed_start or 0
                    segments.append(_new_segment(directory, start, config, budget, lock))
                found = _damage_found(directory, config, segments, recovery_point)
                if segments[-1].sealed:
                    # Damaged, or short of what was synced: new records go after the damage.
                    assert segments[-1].next_offset is not None
                    base = segments[-1].next_offset
                    segments.append(_new_segment(directory, base, config, budget, lock))
                active_segment = segments[-1]
                assert active_segment.next_offset is not None
                log_end = active_segment.next_offset
                log_start = max(checkpointed_start or 0, segments[0].base_offset)
                if log_start > log_end:
                    # The tail below the checkpointed start was lost: start empty at the log
                    # start offset rather than hand out offsets consumers have already seen.
                    log.warning(
                        "%s: log end %d is below log start %d; starting empty",
                        directory,
                        log_end,
                        log_start,
                    )
                    for segment in segments:
                        segment.delete()
                    segments = [_new_segment(directory, log_start, config, budget, lock)]
                    active_segment = segments[0]
                    log_end = log_start
                if any([damage.add(d) for d in found]) | damage.keep_within(log_start, log_end):
                    damage.save()
                if active_segment.size > 0:
                    active_segment.first_append_ms = _estimate_first_append(active_segment, now_ms)
                producers = _load_producers(
                    directory, segments, log_start, now_ms, producer_id_expiration_ms
                )
                epochs = _open_leader_epochs(directory, segments, log_start, log_end)
            except BaseException:
                for segment in segments:
                    segment.close()
                raise
            checkpointed_high_watermark = checkpoint.read_offset(directory / HIGH_WATERMARK_FILE)
            if checkpointed_high_watermark is None:
                high_watermark = log_start
            else:
                high_watermark = min(max(checkpointed_high_watermark, log_start), log_end)
            return cls(
                directory,
                topic,
                partition,
                config,
                segments,
                log_start,
                recovery_point,
                producers,
                producer_id_expiration_ms,
                epochs,
                high_watermark,
                high_watermark_follows_log_end,
                damage,
                budget,
                lock,
            )

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

    def _note_offset_gaps(self) -> None:
        """This log holds gaps a compacted leader left: opening must not take them for
        missing segments, whatever cleanup.policy says by then."""
        path = self.directory / OFFSET_GAPS_FILE
        if not path.exists():
            checkpoint.atomic_write(path, b"")

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

    @_disk_errors
    def assign_leader_epoch(self, epoch: int) -> None:
        """Record that `epoch` starts at the log end offset: a leader elected here, before
        it appends, so that OffsetForLeaderEpoch for older epochs ends where it took over."""
        with self._lock:
            self._check_open()
            self._epochs.assign(epoch, self.log_end_offset)

    # -- appending --------------------------------------------------------------

    @_disk_errors
    def append(
        self,
        batches: list[tuple[BatchHeader, memoryview]],
        now_ms: int,
        *,
        leader_epoch: int | None = None,
        keyed: bool = False,
    ) -> AppendInfo:
        """Append validated batches (records.split_batches) as they are, assigning offsets.

        Only the base offset is rewritten, plus the partition leader epoch when
        given and the timestamp on LogAppendTime topics; a topic whose
        compression.type names a codec gets batches of other codecs recompressed.
        All batches go to one segment, rolled first if they would overflow it.

        `keyed`: the caller built the batches in this process (records.build_batch)
        and every record has a key, so a compacted topic need not walk them to
        find one without; every other check is made as for any batch. One such
        batch without a producer, to a topic that stores batches as given, is
        written by _append_built.
        """
        if not batches:
            raise ValueError("append needs at least one batch")
        config = self.config
        if keyed and len(batches) == 1 and config.stores_batches_as_given:
            header, view = batches[0]
            if header.producer_id < 0 and header.size <= config.max_message_bytes:
                return self._append_built(header, view, now_ms, leader_epoch)
        target = config.target_compression
        if target is not None:
            batches = [self._in_codec(header, view, *target) for header, view in batches]
        appended_messages = 0
        for header, view in batches:
            if header.size > config.max_message_bytes:
                raise RecordTooLarge(
                    f"a batch of {header.size} bytes exceeds max.message.bytes"
                    f" {config.max_message_bytes} of {self.name}"
                )
            self._check_records(header, view, now_ms, keyed)
            appended_messages += header.record_count
        log_append_time = config.log_append_time
        with self._lock:
            self._check_open()
            first_offset = next_offset = self.log_end_offset
            pending = []
            for header, _ in batches:
                last = next_offset + header.last_offset_delta
                timestamp = now_ms if log_append_time else header.max_timestamp
                pending.append(PendingBatch(header, next_offset, last, timestamp))
                next_offset = last + 1
            plan = self._producers.plan(pending)
            if plan.duplicate is not None:
                original = plan.duplicate
                return AppendInfo(
                    first_offset=original.first_offset,
                    last_offset=original.last_offset,
                    log_append_time_ms=original.timestamp if log_append_time else -1,
                    log_start_offset=self._log_start,
                    duplicate=True,
                )
            # What changes of a batch lies in its header: the header is copied and
            # rewritten, and written beside the rest of the batch as it came (a copy
            # of every batch cost a tenth of a broker taking produces). LogAppendTime
            # changes the CRC, which covers the records too: that batch is copied whole.
            parts: list[bytes | bytearray | memoryview] = []
            placements: list[BatchPlacement] = []
            position = 0
            for (header, view), batch in zip(batches, pending, strict=True):
                head = bytearray(view[: header.size if log_append_time else records.HEADER_SIZE])
                records.rewrite_base_offset(head, batch.first_offset)
                if leader_epoch is not None:
                    records.set_partition_leader_epoch(head, leader_epoch)
                parts.append(head)
                if log_append_time:
                    records.set_log_append_time(head, now_ms)
                else:
                    parts.append(view[records.HEADER_SIZE : header.size])
                placements.append((position, header.size, batch.last_offset, batch.timestamp))
                position += header.size
            segment = self._segment_for(position, next_offset - 1, now_ms)
            if leader_epoch is not None:
                epochs = [(leader_epoch, first_offset)]
            else:
                epochs = [
                    (h.partition_leader_epoch, b.first_offset)
                    for (h, _), b in zip(batches, pending, strict=True)
                ]
            self._write(segment, parts, placements, epochs, now_ms)
            self._producers.commit(plan)
            self._appended_messages += appended_messages
            return AppendInfo(
                first_offset=first_offset,
                last_offset=next_offset - 1,
                log_append_time_ms=now_ms if log_append_time else -1,
                log_start_offset=self._log_start,
            )

    def _append_built(
        self, header: BatchHeader, view: memoryview, now_ms: int, leader_epoch: int | None
    ) -> AppendInfo:
        """append() of one keyed batch without a producer, within max.message.bytes, to a
        topic that stores batches as given: what the coordinator writes for every commit.
        Every check of append() would pass it and it has no producer state to keep, so
        only the writing is left. A 4-partition commit's batch, built and appended, took
        12.0 µs by the general path and takes 8.7 by this one (with the single pwrite of
        a small batch): a tenth of the broker's instructions per commit."""
        with self._lock:
            self._check_open()
            first_offset = self.log_end_offset
            last_offset = first_offset + header.last_offset_delta
            head = bytearray(view[: records.HEADER_SIZE])
            records.rewrite_base_offset(head, first_offset)
            if leader_epoch is None:
                leader_epoch = header.partition_leader_epoch
            else:
                records.set_partition_leader_epoch(head, leader_epoch)
            size = header.size
            segment = self._segment_for(size, last_offset, now_ms)
            self._write(
                segment,
                [head, view[records.HEADER_SIZE : size]],
                [(0, size, last_offset, header.max_timestamp)],
                [(leader_epoch, first_offset)],
                now_ms,
            )
            self._appended_messages += header.record_count
            return AppendInfo(first_offset, last_offset, -1, self._log_start)

    @_disk_errors
    def append_as_follower(self, data: bytes | memoryview, now_ms: int) -> AppendInfo:
        """Store batches exactly as a leader's Fetch response returned them.

        Offsets, leader epochs and timestamps are the leader's, and so is the
        checking of records: each batch is only checked whole (header, CRC)
        and stored byte for byte. Batches the log already holds (last offset
        below the log end offset) are skipped; offsets may jump forward (a
        compacted leader) but never back. A trailing partial batch, where the
        fetch size cut the response, is ignored. Producer state and the
        leader-epoch cache follow, and segments roll as append() rolls them.

        Raises CorruptRecord, OffsetsOutOfOrder, or UnexpectedAppendOffset for
        a batch that straddles the log end offset; nothing is stored then.
        """
        view = memoryview(data)
        with self._lock:
            self._check_open()
            log_end = self.log_end_offset
            taken = _replicated_batches(view, log_end, self.name)
            if not taken:
                return AppendInfo(log_end, log_end - 1, -1, self._log_start)
            expected = [log_end] + [h.last_offset + 1 for _, h in taken[:-1]]
            if any(h.base_offset != e for (_, h), e in zip(taken, expected, strict=True)):
                self._note_offset_gaps()
            config = self.config
            first = 0
            while first < len(taken):
                position, header = taken[first]
                segment = self._segment_for(
                    header.size, header.last_offset, now_ms, header.base_offset
                )
                last = first + 1
                size = header.size
                while last < len(taken):
                    _, following = taken[last]
                    if segment.size + size + following.size > config.segment_bytes or (
                        not segment.fits_relative(following.last_offset)
                    ):
                        break
                    size += following.size
                    last += 1
                group = taken[first:last]
                placements = [
                    (p - position, h.size, h.last_offset, h.max_timestamp) for p, h in group
                ]
                epochs = [(h.partition_leader_epoch, h.base_offset) for _, h in group]
                self._write(segment, [view[position : position + size]], placements, epochs, now_ms)
                for _, h in group:
                    self._producers.replay(h, h.max_timestamp)
                self._appended_messages += sum(h.record_count for _, h in group)
                first = last
            return AppendInfo(
                first_offset=taken[0][1].base_offset,
                last_offset=taken[-1][1].last_offset,
                log_append_time_ms=-1,
                log_start_offset=self._log_start,
            )

    def _write(
        self,
        segment: Segment,
        parts: list[bytes | bytearray | memoryview],
        placements: list[BatchPlacement],
        epochs: list[tuple[int, int]],
        now_ms: int,
    ) -> None:
        """Append `parts` to `segment`, recording new leader epochs first, as Kafka does: after a
        crash the cache may run past the log, which opening corrects, but never lag it."""
        try:
            for epoch, start_offset in epochs:
                if epoch >= 0:
                    self._epochs.assign(epoch, start_offset)
            segment.append(parts, placements, self.config.index_interval_bytes, now_ms)
        except StorageIOError:
            # In memory at least: reopening cuts a checkpoint that runs past the log.
            with contextlib.suppress(StorageIOError):
                self._epochs.truncate_from_end(self.log_end_offset)
            raise

    @staticmethod
    def _in_codec(
        header: BatchHeader, batch: memoryview, compression: int, level: int | None
    ) -> tuple[BatchHeader, memoryview]:
        """The batch under the topic's compression.type, recompressed if it differs."""
        if header.is_control or header.compression == compression:
            return header, batch
        rebuilt = memoryview(records.recompress_batch(batch, header, compression, level))
        return records.parse_header(rebuilt), rebuilt

    def _check_records(
        self, header: BatchHeader, batch: memoryview, now_ms: int, keyed: bool = False
    ) -> None:
        """Kafka's checks of each record (LogValidator): a compacted topic refuses records
        without a key (compaction keeps the latest record per key: a record without one
        has no place in it), a CreateTime topic timestamps outside its bounds around the
        broker's clock. The batch is refused whole, naming every record that failed
        (KIP-467), so that a producer can tell them from the rest."""
        config = self.config
        before, after = config.timestamp_bounds
        compacts = config.compacts and not keyed
        if header.is_control or not (compacts or before is not None or after is not None):
            return
        low = None if before is None else now_ms - before
        high = None if after is None else now_ms + after
        errors: list[RecordError] = []
        late_or_early = False
        checks = records.iter_keys_and_timestamps(batch, header)
        for index, (has_key, timestamp) in enumerate(checks):
            if compacts and not has_key:
                errors.append(
                    RecordError(
                        index,
                        f"compacted topic cannot accept a record without a key: {self.name}"
                        f" has cleanup.policy={config.cleanup_policy}",
                    )
                )
            elif timestamp != records.NO_TIMESTAMP and (
                (low is not None and timestamp < low) or (high is not None and timestamp > high)
            ):
                late_or_early = True
                errors.append(
                    RecordError(
                        index,
                        f"timestamp {timestamp} of record {index} is out of range for"
                        f" {self.name}: it should be within [{'-inf' if low is None else low},"
                        f" {'inf' if high is None else high}] (message.timestamp.before.max.ms"
                        " / after.max.ms of the broker's clock)",
                    )
                )
        if not errors:
            return
        shown = "; ".join(f"record {e.batch_index}: {e.message}" for e in errors[:3])
        if late_or_early:
            raise InvalidTimestamp(
                f"one or more records have been rejected due to invalid timestamp: {shown}",
                tuple(errors),
            )
        raise InvalidRecord(
            f"{len(errors)} record{'s' if len(errors) != 1 else ''} of a batch rejected"
            f" (the first three at most): {shown}",
            tuple(errors),
        )

    def _segment_for(
        self, size: int, last_offset: int, now_ms: int, first_offset: int | None = None
    ) -> Segment:
        """The active segment, rolled first if these bytes should start a new one.

        A follower passes `first_offset`, where its batches start: past a gap a
        compacted leader left, the new segment is named by it, as in Kafka, so
        that its offsets stay within the indexes' reach.
        """
        active = self._segments[-1]
        if active.size == 0:
            if not active.fits_relative(last_offset):
                self._roll(first_offset)
            return self._segments[-1]
        config = self.config
        started = active.first_append_ms
        max_age = config.max_segment_ms - self.roll_jitter_ms
        if (
            active.size + size > config.segment_bytes
            or (started is not None and now_ms - started > max_age)
            or active.indexes_full
            or not active.fits_relative(last_offset)
        ):
            self._roll(first_offset)
        return self._segments[-1]

    @_disk_errors
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
        segment = _new_segment(self.directory, base, self.config, self._budget, self._lock)
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

    # -- reading ----------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding `offset`, up to `max_bytes`.

        The first batch comes whole even if larger than `max_bytes`, so a
        consumer is never stuck behind a big batch. It may start before
        `offset`; consumers skip records below the offset they asked for.
        With `max_offset`, only batches whose base offset is below it come:
        consumers read up to the high watermark, followers to the log end.
        An offset from `max_offset` up to the log end offset reads nothing,
        as in Kafka; only one outside the log is out of range. A read stops
        before damaged offsets (damage.py), and one that starts in them
        raises CorruptRecord.
        """
        with self._lock:
            start = self._read_start(offset, max_offset)
            if start is None:
                return b""
            return self._read_copy(offset, max_bytes, *start)

    def read_records(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_region_bytes: int = 0,
    ) -> bytes | FileRegion:
        """The batches read() returns, as a FileRegion of the segment file they lie in when
        they lie whole in one and come to `min_region_bytes` or more: sent from the file
        with sendfile(), they never pass through the broker's memory, as in Kafka. Batches
        that continue into the next segment come as bytes, as read() returns them.

        The region holds a descriptor of its own until closed, so retention or the
        descriptor budget may close the segment meanwhile; a follower's truncation cuts
        the file under it, and sending it then fails short, as in Kafka.
        """
        with self._lock:
            start = self._read_start(offset, max_offset)
            if start is None:
                return b""
            index, limit = start
            first = self._first_batch(offset, index, limit)
            if first is None:
                return b""
            number, position, header = first
            segment = self._segments[number]
            size = header.size
            if size < max_bytes:
                end = position + min(max_bytes, segment.size - position)
                size = segment.whole_batches_end(position, end, limit) - position
                following = self._segments[number + 1 : number + 2]
                if (
                    position + size == segment.size
                    and size < max_bytes
                    and following
                    and following[0].base_offset < limit
                ):
                    # A copy reads on into the next segment.
                    return self._read_copy(offset, max_bytes, index, limit)
            if size >= min_region_bytes:
                with contextlib.suppress(OSError):  # no descriptor left: copy instead
                    return segment.region(position, size)
            return segment.read(position, size)

    def _read_start(self, offset: int, max_offset: int | None) -> tuple[int, int] | None:
        """Where a read of `offset` begins (the index of the first segment that may hold
        it) and the offset it stops before; None if it reads nothing."""
        self._check_open()
        log_end = self.log_end_offset
        if not self._log_start <= offset <= log_end:
            raise OffsetOutOfRange(
                f"offset {offset} is outside {self._log_start}..{log_end} of {self.name}"
            )
        limit = log_end if max_offset is None else max_offset
        if self._damage and offset < limit:
            damaged = self._damage.at(offset)
            if damaged is not None:
                raise CorruptRecord(damaged.describe(self.name))
            # Whatever lies past damage is read by a fetch at an offset past it.
            limit = min(limit, self._damage.next_start(offset) or limit)
        if offset >= limit:
            return None
        return max(bisect_right(self._bases, offset) - 1, 0), limit

    def _first_batch(
        self, offset: int, index: int, limit: int
    ) -> tuple[int, int, BatchHeader] | None:
        """(segment number, position, header) of the batch a read of `offset` starts with,
        looking from segment `index` on; None if there is none below offset `limit`."""
        for number in range(index, len(self._segments)):
            segment = self._segments[number]
            if segment.base_offset >= limit:
                return None
            found = segment.find(offset)
            if found is None:
                continue
            position, header = found
            return None if header.base_offset >= limit else (number, position, header)
        return None

    def _read_copy(self, offset: int, max_bytes: int, index: int, limit: int) -> bytes:
        first = self._first_batch(offset, index, limit)
        if first is None:
            return b""
        number, position, header = first
        if header.size >= max_bytes:
            return self._segments[number].read(position, header.size)
        parts: list[bytes] = []
        total = 0
        for segment in self._segments[number:]:
            if segment.base_offset >= limit:
                break
            budget = max_bytes - total
            chunk = segment.read(position, min(budget, segment.size - position))
            whole = _whole_batches_length(chunk, limit)
            if whole:
                parts.append(chunk[:whole] if whole < len(chunk) else chunk)
                total += whole
            if whole < len(chunk) or total >= max_bytes:
                break
            position = 0
        return b"".join(parts)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped at or after `timestamp_ms`.

        As in Kafka, "first" is by offset within the first segment whose largest
        timestamp reaches `timestamp_ms`; with CreateTime, timestamps need not grow.
        """
        with self._lock:
            self._check_open()
            for segment in self._segments:
                if segment.offset_of_max_timestamp < 0 or segment.max_timestamp < timestamp_ms:
                    continue
                found = segment.find_timestamp(timestamp_ms, self._log_start)
                if found is not None:
                    return found
            return None

    def legacy_offsets_before(self, timestamp_ms: int, max_count: int, now_ms: int) -> list[int]:
        """ListOffsets v0's answer, as Kafka computes it (legacyFetchOffsetsBefore).

        Each segment stands for its base offset (at least the log start offset) at the
        time its file was last modified, and the log end offset for `now_ms` when the
        active segment holds records. The answer is the offsets of those last modified
        at or before `timestamp_ms` (all of them for -1, latest; the first for -2,
        earliest), newest first, at most `max_count` of them.
        """
        with self._lock:
            self._check_open()
            points = [
                (max(segment.base_offset, self._log_start), segment.last_modified_ms)
                for segment in self._segments
            ]
            if self._segments[-1].size > 0:
                points.append((self.log_end_offset, now_ms))
        if timestamp_ms == LATEST_TIMESTAMP:
            start = len(points) - 1
        elif timestamp_ms == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(points) - 1
            while start >= 0 and points[start][1] > timestamp_ms:
                start -= 1
        count = min(max_count, start + 1)
        return sorted((points[start - j][0] for j in range(count)), reverse=True)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3)."""
        with self._lock:
            self._check_open()
            best: Segment | None = None
            for segment in self._segments:
                if segment.offset_of_max_timestamp < 0:
                    continue
                if best is None or segment.max_timestamp > best.max_timestamp:
                    best = segment
            if best is None:
                return None
            offset = best.record_with_timestamp(best.offset_of_max_timestamp, best.max_timestamp)
            return max(offset, self._log_start), best.max_timestamp

    # -- durability -------------------------------------------------------------

    @_disk_errors
    def flush(self, monotonic_ms: int | None = None, *, checkpoint_now: bool = False) -> None:
        """fsync everything appended so far. Safe to run in a thread beside appends.

        The recovery point (and the producer state at it) follows at most once
        every RECOVERY_POINT_INTERVAL_S, or now with `checkpoint_now`.

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
                    or time.monotonic() - self._recovery_point_written_s
                    >= RECOVERY_POINT_INTERVAL_S
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
            self.last_flush_ms = _monotonic_ms() if monotonic_ms is None else monotonic_ms
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
                    self._recovery_point_written_s = time.monotonic()
            if high_watermark is not None:
                # After the data it covers is synced; following the log end, it is not kept.
                try:
                    self._checkpoint_high_watermark(high_watermark)
                except OSError as exc:
                    message = f"cannot checkpoint the high watermark of {self.name}"
                    self._io_failed("checkpoint", message, exc)

    def _io_failed(self, operation: str, message: str, exc: OSError) -> None:
        error = StorageIOError(f"{message}: {exc}")
        error.__cause__ = exc
        self.on_io_error(operation, self.name, error)

    def _checkpoint_high_watermark(self, high_watermark: int) -> None:
        if high_watermark != self._checkpointed_high_watermark:
            checkpoint.write_offset(self.directory / HIGH_WATERMARK_FILE, high_watermark)
            self._checkpointed_high_watermark = high_watermark

    # -- retention --------------------------------------------------------------

    @_disk_errors
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
            self._producers.remove_expired(now_ms, self._producer_id_expiration_ms)
            return deleted

    @_disk_errors
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

    # -- truncation (a follower's, to where it agrees with its leader) ----------------

    @property
    def truncation_pending(self) -> bool:
        """A truncation waits for the cleaner to let go: a cleaning should stop."""
        return self._truncating

    @_disk_errors
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

    @_disk_errors
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
            kept.first_append_ms = _estimate_first_append(kept, now_ms)
        log_end = self.log_end_offset
        self._epochs.truncate_from_end(log_end)
        if self._log_start > log_end:
            self._log_start = log_end
            checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, log_end)
        self._after_truncation(log_end)
        self._producers = _rebuild_producers(
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
            fresh = _new_segment(self.directory, offset, self.config, self._budget, self._lock)
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

    # -- compaction (cleaner.py drives it) ----------------------------------------

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
        the older one.
        """
        with self._lock:
            self._check_open()
            limit = self.high_watermark
            damaged = self._damage.next_start(0)
            if damaged is not None:
                # Damaged segments are kept as they are: a copy would drop what is unreadable.
                limit = min(limit, damaged)
            return CleaningView(
                self.config,
                self._log_start,
                self._sealed(limit),
                frozenset(self._producers.remembered_last_offsets()),
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

    def replace_segments(self, old: list[Segment], cleaned: Segment) -> bool:
        """Swap the cleaned copy of the consecutive segments `old` in for them (swap.py).

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

    def _close_segments(self) -> None:
        self._closed = True
        for segment in self._segments:
            segment.close()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed(f"the log of {self.name} is closed")


def _whole_batches_length(chunk: bytes, limit: int) -> int:
    """How many bytes of `chunk` are whole batches whose base offset is below `limit`."""
    end = 0
    for position, header in records.iter_batches(chunk):
        if header.base_offset >= limit:
            break
        end = position + header.size
    return end


def _replicated_batches(view: memoryview, log_end: int, name: str) -> list[tuple[int, BatchHeader]]:
    """(position, header) of the whole batches of a leader's records to store after `log_end`.

    Raises for a damaged batch, offsets that go backwards, or a batch that
    straddles `log_end`; a trailing partial batch ends the records.
    """
    taken: list[tuple[int, BatchHeader]] = []
    previous_last: int | None = None
    position = 0
    while len(view) - position >= HEADER_SIZE:
        header = records.parse_header(view, position)
        problem = header_problem(header)
        if problem is None and position + header.size > len(view):
            break  # cut short by the fetch size
        if problem is None and not records.crc_matches(view, header, position):
            problem = "a CRC mismatch"
        if problem is not None:
            raise CorruptRecord(f"replicated batch at byte {position} for {name} has {problem}")
        if previous_last is not None and header.base_offset <= previous_last:
            raise OffsetsOutOfOrder(
                f"replicated batch at offset {header.base_offset} for {name} follows one"
                f" ending at {previous_last}"
            )
        previous_last = header.last_offset
        if header.last_offset >= log_end:
            if header.base_offset < log_end:
                raise UnexpectedAppendOffset(
                    f"replicated batch {header.base_offset}..{header.last_offset} for {name}"
                    f" straddles its log end offset {log_end}",
                    header.base_offset,
                    header.last_offset,
                )
            taken.append((position, header))
        position += header.size
    return taken


def log_io_error(operation: str, name: str, error: StorageIOError) -> None:
    log.warning("%s of %s failed: %s", operation, name, error)


def _close_all(handles: list[int]) -> None:
    for fd in handles:
        os.close(fd)


def _remove_strays(directory: Path) -> None:
    logs = {p.name.removesuffix(LOG_SUFFIX) for p in directory.glob("*" + LOG_SUFFIX)}
    for path in directory.iterdir():
        name = path.name
        orphan_index = name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)) and (
            name.rsplit(".", 1)[0] not in logs
        )
        if path.is_file() and (name.endswith(_STRAY_SUFFIXES) or orphan_index):
            log.info("%s: removing stray file %s", directory, name)
            path.unlink()


def _segment_bases(directory: Path, log_start: int) -> list[int]:
    """Base offsets of the segments worth opening, after dropping the ones that hold nothing.

    An empty segment other than the first and the last adds no offsets, and a
    segment wholly below the log start offset is one that retention was
    deleting at the crash. The first stays even if empty (the cleaner can empty
    it): its base offset is where the log starts.
    """
    bases = []
    for path in directory.glob("*" + LOG_SUFFIX):
        base = parse_base_offset(path.name)
        if base is None:
            # As Kafka: a log file whose offset cannot be told stops the log from opening.
            raise LogFileError(
                f"cannot open the log of {directory.name}: {path} is not named as a segment"
                f" is (its base offset in {OFFSET_DIGITS} digits, then {LOG_SUFFIX})"
            )
        bases.append(base)
    bases.sort()
    kept = []
    for i, base in enumerate(bases):
        last = i == len(bases) - 1
        empty = segment_file(directory, base, LOG_SUFFIX).stat().st_size == 0
        below_start = not last and bases[i + 1] <= log_start
        if not last and ((empty and kept) or below_start):
            _unlink_segment(directory, base)
            continue
        kept.append(base)
    return kept


def _new_segment(
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


def _open_segments(
    directory: Path,
    config: LogConfig,
    bases: list[int],
    synced_below: int,
    recovery_point: int,
    budget: DescriptorBudget | None,
    lock: threading.Lock,
) -> list[Segment]:
    segments: list[Segment] = []
    try:
        for i, base in enumerate(bases):
            active = i == len(bases) - 1
            offset_limit = None if active else bases[i + 1]
            try:
                segment = Segment.open(
                    directory,
                    base,
                    config.segment_index_bytes,
                    index_interval_bytes=config.index_interval_bytes,
                    offset_limit=offset_limit,
                    recover=offset_limit is None or offset_limit > synced_below,
                    active=active,
                    synced_below=synced_below,
                    known_end=recovery_point,
                )
            except (OSError, StorageIOError) as exc:
                path = segment_file(directory, base, LOG_SUFFIX)
                problem = file_problem(path, exc) if isinstance(exc, OSError) else f"{path}: {exc}"
                raise LogFileError(f"cannot open the log of {directory.name}: {problem}") from exc
            if budget is not None:
                segment.manage(budget, lock)
            segments.append(segment)
            if not active and segment.cut_bytes:
                # Kafka's rule: what follows a corrupt batch cannot be trusted either.
                _drop_segments_after(directory, bases[i + 1 :])
                segment.open_indexes_for_append()
                break
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments


def _damage_found(
    directory: Path, config: LogConfig, segments: list[Segment], recovery_point: int
) -> list[Damage]:
    """The damage that opening the segments found, offsets between two segments that
    neither holds (unless compaction may have left the gap), and offsets from the log
    end to the recovery point, which were synced and are gone: new records then go
    after them, and the last segment is sealed for that."""
    found: list[Damage] = []
    # Compaction leaves gaps, which stay if the topic stops compacting later.
    compacted = config.compacts or any(
        (directory / name).exists() for name in (CLEANER_CHECKPOINT_FILE, OFFSET_GAPS_FILE)
    )
    if not compacted:
        for segment, following in pairwise(segments):
            end = segment.next_offset
            if end is not None and end < following.base_offset:
                found.append(Damage(end, following.base_offset, DamageKind.MISSING))
    last = segments[-1]
    assert last.next_offset is not None
    if recovery_point > last.next_offset:
        found.append(Damage(last.next_offset, recovery_point, DamageKind.MISSING))
        last.seal()
        last.next_offset = recovery_point
    for damage in found:
        log.error("%s: %s; they are not served", directory, damage.describe(directory.name))
    return [d for segment in segments for d in segment.damage] + found


def _drop_segments_after(directory: Path, bases: list[int]) -> None:
    for base in bases:
        log.warning("%s: deleting segment %d, which follows a corrupt one", directory, base)
        _unlink_segment(directory, base)


def _unlink_segment(directory: Path, base: int) -> None:
    for suffix in SEGMENT_SUFFIXES:
        segment_file(directory, base, suffix).unlink(missing_ok=True)


def _estimate_first_append(segment: Segment, now_ms: int) -> int:
    # The wall-clock time of the first append is not on disk; the first batch's
    # timestamp is the best estimate, capped at now against producers' clocks
    # running ahead. Kafka itself rolls by record timestamps.
    first = next(segment.scan(), None)
    if first is None or first[1].max_timestamp < 0:
        return now_ms
    return min(now_ms, first[1].max_timestamp)


def _open_leader_epochs(
    directory: Path, segments: list[Segment], log_start: int, log_end: int
) -> LeaderEpochCache:
    """The checkpointed cache cut to the log, or one rebuilt from the batches without it."""
    path = directory / LEADER_EPOCH_CHECKPOINT_FILE
    epochs = LeaderEpochCache.load(path)
    if epochs is None:
        epochs = LeaderEpochCache.from_batches(path, _epoch_changes(segments))
        if log_end > segments[0].base_offset:
            epochs.save()  # not to read the batches again at the next open
    else:
        # Written before the batches it names: a crash can leave it ahead of the log.
        epochs.truncate_from_end(log_end)
    epochs.truncate_from_start(log_start)
    return epochs


def _epoch_changes(segments: list[Segment]) -> Iterator[tuple[int, int]]:
    """(partition leader epoch, base offset) of every batch where the epoch may change.

    Epochs never decrease along a log, so a segment whose first and last
    batches have the same epoch holds no other, and only those two are read.
    Batches without an epoch (-1: the broker's own writes on a lone broker,
    or data from before epochs were stamped) may sit anywhere: a segment that
    starts or ends with one is read whole.
    """
    for segment in segments:
        first = next(segment.scan(), None)
        if first is None:
            continue
        tail = segment.scan(segment.offset_index.last_position or 0)
        last = deque(tail, maxlen=1)[0][1]
        if 0 <= first[1].partition_leader_epoch == last.partition_leader_epoch:
            yield first[1].partition_leader_epoch, first[1].base_offset
        else:
            for _, header in segment.scan():
                yield header.partition_leader_epoch, header.base_offset


def _load_producers(
    directory: Path, segments: list[Segment], log_start: int, now_ms: int, expiration_ms: int
) -> ProducerStateManager:
    """The producer state from its snapshot and the batches after it, else rebuilt whole."""
    snapshot = read_producer_snapshot(directory / PRODUCER_SNAPSHOT_FILE)
    log_end = segments[-1].next_offset
    assert log_end is not None
    if snapshot is None or snapshot[0] > log_end:
        return _rebuild_producers(segments, log_start, now_ms, expiration_ms)
    offset, producers = snapshot
    producers.truncate_head(log_start)
    first = max(bisect_right([s.base_offset for s in segments], offset) - 1, 0)
    for segment in segments[first:]:
        for _, header in segment.scan(segment.offset_index.lookup(offset)):
            if header.last_offset >= max(offset, log_start):
                producers.replay(header, header.max_timestamp)
    producers.remove_expired(now_ms, expiration_ms)
    return producers


def _rebuild_producers(
    segments: list[Segment], log_start: int, now_ms: int, expiration_ms: int
) -> ProducerStateManager:
    """Replay batch headers into producer state, O(batches), skipping what has expired.

    A sealed segment whose newest batch is older than the expiration holds only
    producers that would be expired anyway, so it is not read.
    """
    producers = ProducerStateManager()
    horizon = now_ms - expiration_ms
    for segment in segments:
        if segment.sealed and 0 <= segment.max_timestamp < horizon:
            continue
        for _, header in segment.scan():
            if header.last_offset >= log_start:
                producers.replay(header, header.max_timestamp)
    producers.remove_expired(now_ms, expiration_ms)
    return producers
