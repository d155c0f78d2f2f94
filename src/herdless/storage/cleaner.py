"""The log cleaner: compaction of logs whose cleanup.policy has "compact", after Kafka's LogCleaner.

One cleaning of a partition log:

1. The dirty section runs from the first dirty offset (the end of the last
   cleaning, kept in `cleaner-offset-checkpoint`) to the first uncleanable
   offset: the active segment's base (or that of the first segment reaching
   past the high watermark, when the log's owner sets it: uncommitted records
   are never cleaned), or earlier the base of the first segment holding
   records younger than min.compaction.lag.ms. The active segment is never
   cleaned, so the log end offset never changes.
2. The offset map takes every key of the dirty section to its latest offset.
3. Every segment below the first uncleanable offset (the clean section too:
   its keys may have newer records in the dirty one) is copied, in groups of
   consecutive segments whose sizes add up to at most segment.bytes, keeping a
   record only if no later offset of its key is in the map. Tombstones (null
   values) go too once delete.retention.ms has passed since the largest
   timestamp of the segment they are in: a simpler rule than Kafka's, which
   counts from the cleaning that first passed them, and like it a consumer
   that reads the whole log within delete.retention.ms of a deletion sees it.
   Records without a key, which compacted topics refuse (PartitionLog.append)
   but a topic switched to compaction may hold, are dropped, as Kafka does.
4. Each group's copy replaces the group (swap.py, safe against a crash), and
   the first uncleanable offset becomes the first dirty one.

Transactions (cleaned_transactions.py, as Kafka's cleaner): the dirty section
ends at the last stable offset, as whether an open transaction's records count
is not known yet; records of aborted transactions go whole and never enter the
offset map, so a key's committed record outlives a later aborted one; a marker
goes once nothing of its transaction is left and delete.retention.ms has passed
(the tombstones' rule), unless it is a known producer's last word. The copy's
transaction index keeps the aborts whose markers it keeps.

Batches are copied whole when nothing in them goes. Otherwise they are
re-encoded as Kafka's cleaner does: same base offset, lastOffsetDelta, base
timestamp and producer fields, surviving records copied verbatim with their
original offset deltas, the same compression codec, a new CRC. A batch left
with no records is dropped, unless the producer state still remembers it
(each idempotent producer's last five batches): then its header stays as an
empty batch, so that the state rebuilt from the log after a restart still
recognises a retry of it. Kafka keeps only each producer's last batch so.
Offsets keep their gaps: readers and recovery accept offsets that increase
with holes.

Threads: clean() runs in a worker thread. It opens the sealed segments itself
(never through the log's descriptors, which a close could free for reuse),
reads them and writes the copy without the log's lock, and takes the lock only
to swap a copy in; appends, reads and flushes carry on meanwhile.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from herdless.protocol.control_records import (
    EndTransactionMarker,
    InvalidControlRecord,
    marker_of,
)
from herdless.protocol.records import (
    BatchHeader,
    crc_matches,
    iter_record_slices,
    parse_header,
    rebuild_batch,
)
from herdless.storage import checkpoint
from herdless.storage.cleaned_transactions import CleanedTransactions
from herdless.storage.config import INT32_MAX, INT64_MAX, LogConfig
from herdless.storage.damage import Damage, DamageKind
from herdless.storage.errors import LogClosed, StorageIOError
from herdless.storage.log import CLEANER_CHECKPOINT_FILE, CleaningView, PartitionLog, SealedSegment
from herdless.storage.segment import BatchPlacement, Segment, read_file, scan_file
from herdless.storage.swap import CLEANED_SUFFIX
from herdless.storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)

# Kafka bounds its offset map by log.cleaner.dedupe.buffer.size; a dict entry costs
# more than Kafka's 24 bytes, so this bounds memory to some hundreds of MiB.
DEFAULT_MAX_MAP_KEYS = 2_000_000
# Batches are written to the cleaned segment in chunks of about this size.
_WRITE_CHUNK = 1 << 20


@dataclass(slots=True)
class CleanStats:
    """What one cleaning did; `end_offset` is the next cleaning's first dirty offset."""

    first_dirty_offset: int = 0
    end_offset: int = 0
    segments_read: int = 0
    segments_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    keyless_dropped: int = 0
    empty_batches_kept: int = 0
    tombstones_kept: int = 0
    # Records of aborted transactions removed, and transaction markers with them.
    aborted_records_dropped: int = 0
    markers_dropped: int = 0
    # Markers whose transaction is gone, waiting for delete.retention.ms.
    markers_kept: int = 0
    # When the first tombstone kept may go: the time for another cleaning even if nothing is dirty.
    next_tombstone_expiry_ms: int = INT64_MAX
    # Retention, DeleteRecords or a close got to the segments first; try again later.
    aborted: bool = False


class _Aborted(Exception):
    pass


def cleanable_ratio(partition_log: PartitionLog, now_ms: int) -> float:
    """Dirty bytes over clean plus dirty bytes, as Kafka's LogCleanerManager computes it."""
    clean_bytes, dirty_bytes = _section_bytes(partition_log, now_ms)
    total = clean_bytes + dirty_bytes
    return dirty_bytes / total if total else 0.0


def needs_cleaning(partition_log: PartitionLog, now_ms: int) -> bool:
    """Past min.cleanable.dirty.ratio, past max.compaction.lag.ms, or holding a
    tombstone whose time has come.

    Kafka too cleans a log for its expired tombstones alone (KIP-534). Until a
    cleaning since the log was opened has told when that is, one is due. A
    dirty segment is overdue once its newest record is older than
    max.compaction.lag.ms (Kafka looks at its oldest); as compacted topics roll
    segments at most that long after their first append, no record waits much
    more than twice the lag.
    """
    config = partition_log.config
    if not config.compacts:
        return False
    clean_bytes, dirty = _sections(partition_log, now_ms)
    dirty_bytes = sum(s.size for s in dirty)
    if dirty_bytes and dirty_bytes / (clean_bytes + dirty_bytes) > config.min_cleanable_dirty_ratio:
        return True
    max_lag = config.max_compaction_lag_ms
    if max_lag is not None and any(s.largest_timestamp < now_ms - max_lag for s in dirty):
        return True
    expiry = partition_log.tombstone_expiry_ms
    return clean_bytes > 0 and (expiry is None or expiry <= now_ms)


def _section_bytes(partition_log: PartitionLog, now_ms: int) -> tuple[int, int]:
    clean_bytes, dirty = _sections(partition_log, now_ms)
    return clean_bytes, sum(s.size for s in dirty)


def _sections(partition_log: PartitionLog, now_ms: int) -> tuple[int, list[SealedSegment]]:
    """The clean section's bytes and the dirty section's segments."""
    view = partition_log.view_for_cleaning()
    first_dirty = _first_dirty_offset(partition_log.directory, view)
    end = _first_uncleanable_offset(view, first_dirty, now_ms)
    clean_bytes = sum(s.size for s in view.sealed if s.next_base_offset <= first_dirty)
    return clean_bytes, _dirty_segments(view, first_dirty, end)


def clean(
    partition_log: PartitionLog, now_ms: int, *, max_map_keys: int = DEFAULT_MAX_MAP_KEYS
) -> CleanStats:
    """Compact `partition_log` once, whatever its dirty ratio; see the module docstring.

    Raises LogClosed if the log is closed, StorageIOError if a segment cannot
    be read or fails its CRC (nothing is swapped in for it then).
    """
    with partition_log.cleaner_lock:
        return _clean(partition_log, partition_log.view_for_cleaning(), now_ms, max_map_keys)


def _clean(
    partition_log: PartitionLog, view: CleaningView, now_ms: int, max_map_keys: int
) -> CleanStats:
    stats = CleanStats()
    if not view.config.compacts:
        return stats
    first_dirty = _first_dirty_offset(partition_log.directory, view)
    end = _first_uncleanable_offset(view, first_dirty, now_ms)
    stats.first_dirty_offset = stats.end_offset = first_dirty
    dirty = _dirty_segments(view, first_dirty, end)
    try:
        # With nothing dirty the pass still drops tombstones whose time has come.
        offset_map, end = _build_offset_map(partition_log, dirty, end, max_map_keys)
        stats.end_offset = end
        to_clean = [s for s in view.sealed if s.next_base_offset <= end]
        # One walk through the transactions of every group, in offset order, as Kafka's.
        retention = _Retention(view, offset_map, CleanedTransactions(), stats)
        for group in _group_by_size(to_clean, view.config):
            _clean_group(partition_log, view, group, retention, now_ms)
    except _Aborted:
        stats.aborted = True
        log.info("%s: cleaning stopped: the log changed under it", partition_log.name)
        return stats
    if end != first_dirty or not (partition_log.directory / CLEANER_CHECKPOINT_FILE).exists():
        checkpoint.write_offset(partition_log.directory / CLEANER_CHECKPOINT_FILE, end)
    partition_log.tombstone_expiry_ms = stats.next_tombstone_expiry_ms
    log.info(
        "%s: cleaned offsets up to %d: %d segments of %d bytes to %d of %d bytes,"
        " %d of %d records kept",
        partition_log.name,
        end,
        stats.segments_read,
        stats.bytes_read,
        stats.segments_written,
        stats.bytes_written,
        stats.records_kept,
        stats.records_read,
    )
    return stats


def _first_dirty_offset(directory: Path, view: CleaningView) -> int:
    if not view.sealed:
        return view.log_start_offset
    first = view.sealed[0].base_offset
    last = view.sealed[-1].next_base_offset
    checkpointed = checkpoint.read_offset(directory / CLEANER_CHECKPOINT_FILE)
    if checkpointed is None or not first <= checkpointed <= last:
        # Never cleaned, or the log moved under the checkpoint: Kafka starts over too.
        return first
    return checkpointed


def _first_uncleanable_offset(view: CleaningView, first_dirty: int, now_ms: int) -> int:
    if not view.sealed:
        return first_dirty
    end = view.sealed[-1].next_base_offset  # the active segment's base, or the high watermark's
    lag = view.config.min_compaction_lag_ms
    if lag > 0:
        for sealed in view.sealed:
            if sealed.next_base_offset > first_dirty and sealed.largest_timestamp > now_ms - lag:
                return min(end, max(sealed.base_offset, first_dirty))
    return end


def _dirty_segments(view: CleaningView, first_dirty: int, end: int) -> list[SealedSegment]:
    return [s for s in view.sealed if first_dirty < s.next_base_offset <= end]


def _build_offset_map(
    partition_log: PartitionLog, dirty: list[SealedSegment], end: int, max_map_keys: int
) -> tuple[dict[bytes, int], int]:
    """key -> latest offset over whole dirty segments, and where they end.

    The map takes whole segments while it has room (the first always), as
    Kafka's does; the segments it could not take stay dirty for next time.
    """
    offset_map: dict[bytes, int] = {}
    if not dirty:
        return offset_map, end
    # Aborted records never were: a key they hold keeps its committed record.
    txns = CleanedTransactions()
    for i, sealed in enumerate(dirty):
        if i > 0 and len(offset_map) >= max_map_keys:
            return offset_map, sealed.base_offset
        txns.add_aborted(_aborted_in(partition_log, sealed))
        with _open_sealed(sealed) as fd:
            for _, header, raw in _batches(partition_log, sealed, fd):
                if header.is_control:
                    marker = _marker(raw, header)
                    if marker is not None:
                        txns.on_marker(header, marker)
                    continue
                if txns.on_batch(header):
                    continue
                for record, _ in iter_record_slices(memoryview(raw), header):
                    if record.key is not None:
                        offset_map[record.key] = record.offset
    return offset_map, dirty[-1].next_base_offset


def _group_by_size(segments: list[SealedSegment], config: LogConfig) -> list[list[SealedSegment]]:
    """Consecutive segments whose sizes add up to at most segment.bytes (Kafka's
    groupSegmentsBySize), so that small cleaned segments merge; the copy of a
    group has one base offset, so its offsets must also fit the indexes' int32."""
    groups: list[list[SealedSegment]] = []
    current: list[SealedSegment] = []
    size = 0
    for sealed in segments:
        if current and (
            size + sealed.size > config.segment_bytes
            or sealed.next_base_offset - 1 - current[0].base_offset > INT32_MAX
        ):
            groups.append(current)
            current, size = [], 0
        current.append(sealed)
        size += sealed.size
    if current:
        groups.append(current)
    return groups


def _clean_group(
    partition_log: PartitionLog,
    view: CleaningView,
    group: list[SealedSegment],
    retention: _Retention,
    now_ms: int,
) -> None:
    config = view.config
    stats = retention.stats
    copy = _Copy(partition_log.directory, group[0].base_offset, config, now_ms)
    waiting = stats.tombstones_kept + stats.markers_kept
    aborted: list[AbortedTxn] = []
    try:
        if len(group) > 1:
            copy.start()  # merging is a change in itself
        for sealed in group:
            expired = sealed.largest_timestamp + config.delete_retention_ms < now_ms
            retention.txns.add_aborted(_aborted_in(partition_log, sealed))
            kept_markers: set[int] = set()
            with _open_sealed(sealed) as fd:
                for position, header, raw in _batches(partition_log, sealed, fd):
                    kept = retention.filter(raw, header, expired)
                    if kept is not None and header.is_control:
                        kept_markers.add(header.last_offset)
                    if not copy.started:
                        if kept is raw:
                            continue
                        # A lone segment is copied only once something in it goes.
                        copy.start()
                        copy.add_unchanged(fd, position)
                    if kept is not None:
                        copy.add(kept, header.last_offset)
            copy.write()
            # An abort stays indexed while its marker stays (as a rebuild would index it).
            aborted.extend(
                e for e in sealed.segment.txn_index.entries if e.last_offset in kept_markers
            )
            stats.segments_read += 1
            stats.bytes_read += sealed.size
        cleaned = copy.finish()
        if waiting < stats.tombstones_kept + stats.markers_kept:
            largest = cleaned.largest_timestamp if cleaned else group[0].largest_timestamp
            stats.next_tombstone_expiry_ms = min(
                stats.next_tombstone_expiry_ms, largest + config.delete_retention_ms + 1
            )
        if cleaned is None:
            return
        if not partition_log.replace_segments([s.segment for s in group], cleaned, aborted):
            raise _Aborted
    except BaseException:
        copy.discard()
        raise
    stats.segments_written += 1
    stats.bytes_written += cleaned.size


def _aborted_in(partition_log: PartitionLog, sealed: SealedSegment) -> list[AbortedTxn]:
    """The aborted transactions holding offsets of a sealed segment, wherever their markers are."""
    return partition_log.collect_aborted_transactions(sealed.base_offset, sealed.next_base_offset)


class _Copy:
    """The cleaned copy of a group, as `<base>.log.cleaned` and its indexes, made on demand."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> None:
        self._directory = directory
        self._base_offset = base_offset
        self._config = config
        self._now_ms = now_ms
        self._segment: Segment | None = None
        self._chunk = bytearray()
        self._placements: list[BatchPlacement] = []

    @property
    def started(self) -> bool:
        return self._segment is not None

    def start(self) -> None:
        self._segment = Segment.create(
            self._directory, self._base_offset, self._config.segment_index_bytes, CLEANED_SUFFIX
        )

    def add_unchanged(self, fd: int, end: int) -> None:
        """Copy the batches of a segment before position `end`, already read and found whole."""
        for position, header in scan_file(fd, end):
            self.add(read_file(fd, header.size, position), header.last_offset)

    def add(self, batch: bytes, last_offset: int) -> None:
        placement = (len(self._chunk), len(batch), last_offset, _max_timestamp(batch))
        self._placements.append(placement)
        self._chunk += batch
        if len(self._chunk) >= _WRITE_CHUNK:
            self.write()

    def write(self) -> None:
        if self._segment is not None and self._placements:
            interval = self._config.index_interval_bytes
            self._segment.append([self._chunk], self._placements, interval, self._now_ms)
        self._chunk, self._placements = bytearray(), []

    def finish(self) -> Segment | None:
        """The copy sealed and synced (the swap's commit must find it whole), if one was made."""
        segment = self._segment
        if segment is None:
            return None
        self.write()
        segment.seal()
        handles, problem = segment.take_sync_handles()
        try:
            if problem is not None:
                raise StorageIOError(f"cannot write the indexes of the cleaned copy: {problem}")
            for fd in handles:
                os.fsync(fd)
        finally:
            for fd in handles:
                os.close(fd)
        return segment

    def discard(self) -> None:
        segment, self._segment = self._segment, None
        if segment is None:
            return
        if segment.file_suffix == CLEANED_SUFFIX:
            segment.delete()
        else:
            # A swap that failed past its commit: the next open completes it.
            segment.close()


@contextmanager
def _open_sealed(sealed: SealedSegment) -> Iterator[int]:
    try:
        fd = os.open(sealed.path, os.O_RDONLY)
    except FileNotFoundError:
        raise _Aborted from None  # retention got there first
    except OSError as exc:
        raise StorageIOError(f"cannot read {sealed.path}: {exc}") from exc
    try:
        yield fd
    finally:
        os.close(fd)


def _batches(
    partition_log: PartitionLog, sealed: SealedSegment, fd: int
) -> Iterator[tuple[int, BatchHeader, bytes]]:
    """(position, header, bytes) of each batch of a sealed segment, CRC checked.

    A batch failing its CRC stops the cleaning: copying it under a new CRC
    would pass the damage off as good data. It is recorded as damage, which
    the log then serves no more and cleanings leave alone.
    """
    for position, header in scan_file(fd, sealed.size):
        if partition_log.closed:
            raise LogClosed(f"the log of {partition_log.name} was closed while being cleaned")
        if partition_log.truncation_pending:
            raise _Aborted
        raw = read_file(fd, header.size, position)
        if not crc_matches(raw, header):
            damage = Damage(header.base_offset, header.last_offset + 1, DamageKind.CORRUPT)
            partition_log.record_damage(sealed.segment, damage)
            raise StorageIOError(
                f"{partition_log.name}: the batch at position {position} of segment"
                f" {sealed.base_offset} fails its CRC; not cleaning"
            )
        yield position, header, raw


@dataclass(slots=True)
class _Retention:
    """What one cleaning keeps of each batch, read in offset order."""

    view: CleaningView
    offset_map: dict[bytes, int]
    txns: CleanedTransactions
    stats: CleanStats

    def filter(self, raw: bytes, header: BatchHeader, expired: bool) -> bytes | None:
        """The batch as the cleaned log keeps it: `raw` itself if whole, a smaller batch,
        or None. `expired`: delete.retention.ms has passed for its segment, so that
        tombstones and markers whose transaction is gone may go."""
        if header.is_control:
            return self._filter_marker(raw, header, expired)
        stats = self.stats
        if self.txns.on_batch(header):
            stats.records_read += header.record_count
            stats.aborted_records_dropped += header.record_count
            return self._emptied(raw, header)
        kept: list[memoryview] = []
        max_timestamp = -1
        for record, encoding in iter_record_slices(memoryview(raw), header):
            stats.records_read += 1
            if record.key is None:
                stats.keyless_dropped += 1
                continue
            if record.offset < self.offset_map.get(record.key, -1):
                continue
            if record.value is None:
                if expired:
                    stats.tombstones_dropped += 1
                    continue
                stats.tombstones_kept += 1
            kept.append(encoding)
            max_timestamp = max(max_timestamp, record.timestamp)
        stats.records_kept += len(kept)
        if not kept:
            return self._emptied(raw, header)
        if len(kept) == header.record_count:
            return raw
        if header.log_append_time:
            # Every record carries the batch's timestamp.
            max_timestamp = header.max_timestamp
        return rebuild_batch(header, kept, max_timestamp)

    def _emptied(self, raw: bytes, header: BatchHeader) -> bytes | None:
        """A batch left with no records: gone, unless the producer state remembers it."""
        if header.producer_id < 0 or header.last_offset not in self.view.producer_batches:
            return None
        self.stats.empty_batches_kept += 1
        return raw if header.record_count == 0 else rebuild_batch(header, [], header.max_timestamp)

    def _filter_marker(self, raw: bytes, header: BatchHeader, expired: bool) -> bytes | None:
        marker = _marker(raw, header)
        if marker is None:
            return raw  # never drop what cannot be judged
        if not self.txns.on_marker(header, marker):
            return raw
        known = self.view.producer_epochs.get(header.producer_id)
        if (
            known is not None
            and known[0] == header.producer_epoch
            and known[1] < header.base_offset
        ):
            # The producer's last word: rebuilt from the log, its state keeps this epoch.
            return raw
        if not expired:
            self.stats.markers_kept += 1
            return raw
        self.stats.markers_dropped += 1
        return None


def _marker(raw: bytes, header: BatchHeader) -> EndTransactionMarker | None:
    try:
        return marker_of(raw, header)
    except InvalidControlRecord:
        return None


def _max_timestamp(batch: bytes) -> int:
    return parse_header(batch).max_timestamp
