"""One segment of a partition log: a .log file of record batches and its two sparse indexes.

Files are named by the segment's base offset, zero-padded to 20 digits, as
Kafka names them: 00000000000000012345.log / .index / .timeindex.

A Segment is not thread-safe on its own; PartitionLog serialises access.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from herdless.protocol.records import (
    HEADER_SIZE,
    LENGTH_PREFIX,
    BatchHeader,
    InvalidBatch,
    crc_matches,
    iter_offsets_and_timestamps,
    parse_header,
)
from herdless.protocol.regions import FileRegion
from herdless.storage.damage import Damage, DamageKind
from herdless.storage.descriptors import DescriptorBudget
from herdless.storage.errors import StorageIOError
from herdless.storage.index import INT32_MAX, IndexCorrupt, OffsetIndex, TimeIndex
from herdless.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
OFFSET_DIGITS = 20
# Enough to hold many small batches per read, small enough to waste little on big ones.
_CHUNK = 64 * 1024
# Reads while looking only for where batches end: a few headers of small batches, and
# little besides the header of a large one.
_HEADER_CHUNK = 4 * 1024
_MIN_BATCH_LENGTH = HEADER_SIZE - LENGTH_PREFIX

# (position within the appended bytes, size, last offset, max timestamp) of one batch.
BatchPlacement = tuple[int, int, int, int]


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / f"{base_offset:0{OFFSET_DIGITS}d}{suffix}"


def parse_base_offset(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    stem = name.removesuffix(suffix)
    if stem == name or len(stem) != OFFSET_DIGITS or not stem.isdigit():
        return None
    return int(stem)


class Segment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        size: int,
        max_index_bytes: int,
        file_suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        # ".cleaned" while the log cleaner writes the segment (see swap.py); "" once installed.
        self.file_suffix = file_suffix
        self.size = size
        # Released when unused for a while (descriptors.py), opened again on the next use.
        self._fd: int | None = fd
        self._closed = False
        self._budget: DescriptorBudget | None = None
        self._owner: threading.Lock | None = None
        self._max_index_bytes = max_index_bytes
        self.offset_index, self.time_index = self._empty_indexes()
        # Transactions aborted by markers in this segment; the file exists once one was.
        self.txn_index = TransactionIndex.load(self.path(TXN_INDEX_SUFFIX))
        # Offset after the last batch, when known: always for the active segment.
        self.next_offset: int | None = base_offset if size == 0 else None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        # Wall-clock time of the first append, for segment.ms; estimated after a restart.
        self.first_append_ms: int | None = None
        self.sealed = False
        self.dirty = False
        # Bytes recovery cut off the end of the file.
        self.cut_bytes = 0
        # What opening found unreadable in bytes known to have been synced whole, and
        # the position from which the bytes do not parse: scans stop there.
        self.damage: list[Damage] = []
        self._unreadable_from: int | None = None
        self._bytes_since_index_entry = 0

    # -- lifecycle ----------------------------------------------------------

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, max_index_bytes: int, file_suffix: str = ""
    ) -> Segment:
        """A new empty segment; StorageIOError if its files cannot be created (a full disk,
        no descriptors left), leaving none of them behind."""
        path = segment_file(directory, base_offset, LOG_SUFFIX + file_suffix)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            raise StorageIOError(f"cannot create {path}: {exc.strerror}") from exc
        segment = cls(directory, base_offset, fd, 0, max_index_bytes, file_suffix)
        try:
            segment.offset_index.open_for_append(truncate=True)
            segment.time_index.open_for_append(truncate=True)
            segment.txn_index.reset()  # one a deleted segment of this name left
        except OSError as exc:
            segment.delete()
            raise StorageIOError(f"cannot create the indexes of {path}: {exc.strerror}") from exc
        segment.dirty = True
        return segment

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        max_index_bytes: int,
        *,
        index_interval_bytes: int,
        offset_limit: int | None,
        recover: bool,
        active: bool,
        synced_below: int = 0,
        known_end: int | None = None,
    ) -> Segment:
        """Open an existing segment; the active (last) one is always recovered.

        With `recover`, batches are checked and the indexes rebuilt: the
        segment may hold bytes that never reached the disk whole. Batches
        below `synced_below` (the recovery point) were synced with their
        index entries, so recovery keeps those entries and checks only the
        batches from there on. Without `recover`, the index files are only
        sanity-checked (with the batch headers after the last entry), and
        rebuilt if they fail. `offset_limit` is the next segment's base offset,
        if any; `known_end`, for the active segment, where its offsets were
        known to reach (the recovery point).

        Bytes that do not parse where everything was synced are not a torn
        write but damage: they are kept, and the segment's `damage` says which
        offsets they held; a damaged active segment is sealed.
        """
        fd = os.open(segment_file(directory, base_offset, LOG_SUFFIX), os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
        except OSError:
            os.close(fd)
            raise
        segment = cls(directory, base_offset, fd, size, max_index_bytes)
        try:
            rebuild = recover or active
            indexes_trusted = True
            if not rebuild:
                try:
                    segment._load_indexes(offset_limit)
                except IndexCorrupt as exc:
                    log.warning("%s: %s; rebuilding the indexes", directory, exc)
                    rebuild, indexes_trusted = True, False
            if rebuild:
                # Compaction leaves gaps in sealed segments, and a follower copies a
                # compacted leader's gaps into its active one.
                segment.recover(
                    index_interval_bytes,
                    allow_gaps=True,
                    offset_limit=offset_limit,
                    synced_below=synced_below,
                    known_end=known_end,
                    indexes_trusted=indexes_trusted,
                )
                if not active or segment.damage:
                    segment.seal()
                segment.offset_index.write_file()
                segment.time_index.write_file()
            if active and not segment.damage:
                segment.open_indexes_for_append()
        except BaseException:
            segment.close()
            raise
        return segment

    def _empty_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        # Kafka sizes both indexes by segment.index.bytes.
        return (
            OffsetIndex(self.path(INDEX_SUFFIX), self.base_offset, self._max_index_bytes // 8),
            TimeIndex(self.path(TIME_INDEX_SUFFIX), self.base_offset, self._max_index_bytes // 12),
        )

    def _load_indexes(self, offset_limit: int | None) -> None:
        max_offsets = self._max_index_bytes // 8
        max_times = self._max_index_bytes // 12
        self.offset_index = OffsetIndex.load(
            self.path(INDEX_SUFFIX), self.base_offset, max_offsets, self.size, offset_limit
        )
        self.time_index = TimeIndex.load(
            self.path(TIME_INDEX_SUFFIX), self.base_offset, max_times, offset_limit
        )
        last = self.time_index.last_entry
        if last is not None:
            # Sealing wrote the segment's largest timestamp as the last entry.
            self.max_timestamp, self.offset_of_max_timestamp = last
        if self.size > 0 and last is None:
            # Sealing always leaves the largest timestamp behind; without it retention
            # would have to guess the segment's age.
            raise IndexCorrupt(f"{self.time_index.path.name} is empty")
        self.next_offset = self._check_tail(offset_limit)
        self.sealed = True

    def _check_tail(self, offset_limit: int | None) -> int:
        """Where the segment's offsets end, from the batch headers after the last offset
        index entry: at most index.interval.bytes and a batch to read.

        They must chain from the batch that entry names to the last byte of the file,
        below `offset_limit`, with no timestamp above the time index's last entry
        (sealing wrote the largest there). Anything else means the indexes are not
        this segment's as it stands (truncated, garbage, another segment's): IndexCorrupt.
        """
        position = self.offset_index.last_position or 0
        named = self.offset_index.last_offset
        last_time = self.time_index.last_entry
        end = self.base_offset
        window = FileWindow(self._require_fd(), self.size)
        while position < self.size:
            if self.size - position < HEADER_SIZE:
                raise IndexCorrupt(f"the batch at position {position} is torn")
            header = parse_header(window.get(position, HEADER_SIZE))
            problem = header_problem(header)
            if problem is None and position + header.size > self.size:
                problem = "a batch running past the end of the file"
            if problem is None and named is not None and header.last_offset != named:
                problem = f"offset {named} where the batch there ends at {header.last_offset}"
            if problem is None and header.base_offset < end:
                problem = f"base offset {header.base_offset} after {end - 1}"
            if problem is None and last_time is not None and header.max_timestamp > last_time[0]:
                problem = f"{self.time_index.path.name} lacks timestamp {header.max_timestamp}"
            if problem is not None:
                raise IndexCorrupt(
                    f"{self.offset_index.path.name} at position {position}: {problem}"
                )
            named = None
            end = header.last_offset + 1
            position += header.size
        if offset_limit is not None and end > offset_limit:
            raise IndexCorrupt(
                f"the segment reaches offset {end - 1}, the next one's {offset_limit}"
            )
        return end

    def recover(
        self,
        index_interval_bytes: int,
        *,
        allow_gaps: bool = False,
        offset_limit: int | None = None,
        synced_below: int = 0,
        known_end: int | None = None,
        indexes_trusted: bool = True,
    ) -> int:
        """Check every batch, cut the file at the first bad one, rebuild both indexes in memory.

        Returns how many bytes were cut. A batch is good when its header is
        sane, it lies wholly inside the file, its CRC matches and its base
        offset follows the previous batch. With `allow_gaps` (a segment the
        log cleaner may have rewritten, or a follower's copy of one) offsets
        need only increase, as Kafka allows after compaction, stay within the
        indexes' reach of the base offset, and below `offset_limit`, the next
        segment's base offset. The base offset lies outside the CRC: these
        bounds keep some damage to it from passing, not all of it.

        Batches whose last offset is below `synced_below` reached the disk
        whole before the recovery point was written: their CRCs are not
        checked, and the index entries naming them are kept rather than
        rebuilt, so that opening costs time in proportion to what was not
        synced, not to the segment's size. Not if the index files were found
        damaged (not `indexes_trusted`): they are then rebuilt from nothing.

        A bad batch where the next offset is below `synced_below` is no torn
        write: the records were synced, and something damaged them since. Up
        to `offset_limit` (or, for the active segment, `known_end`) they are
        recorded in `damage` rather than cut, and the file is left as it is.
        """
        fd = self._require_fd()
        file_size = os.fstat(fd).st_size
        self.offset_index.close()
        self.time_index.close()
        self.offset_index, self.time_index = self._empty_indexes()
        # Transactions aborted by markers in this segment; the file exists once one was.
        self.txn_index = TransactionIndex.load(self.path(TXN_INDEX_SUFFIX))
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self._bytes_since_index_entry = 0
        window = FileWindow(fd, file_size)
        position, expected = self._keep_synced_entries(
            window, file_size, synced_below if indexes_trusted else 0
        )
        problem: str | None = None
        while position < file_size:
            if file_size - position < HEADER_SIZE:
                problem = "a torn batch header"
                break
            header = parse_header(window.get(position, HEADER_SIZE))
            problem = header_problem(header) or _placement_problem(
                header, position, file_size, expected, allow_gaps
            )
            if problem is None and offset_limit is not None and header.last_offset >= offset_limit:
                problem = (
                    f"offset {header.last_offset} at or past the next segment's {offset_limit}"
                )
            if problem is None and not self.fits_relative(header.last_offset):
                problem = f"offset {header.last_offset} beyond the reach of the segment's indexes"
            synced = header.last_offset < synced_below
            if (
                problem is None
                and not synced
                and not crc_matches(window.get(position, header.size), header)
            ):
                problem = "a CRC mismatch"
            if problem is not None:
                break
            self._index_batch(
                position,
                header.size,
                header.last_offset,
                header.max_timestamp,
                index_interval_bytes,
            )
            expected = header.last_offset + 1
            position += header.size
        end = offset_limit if offset_limit is not None else known_end
        if position < file_size and expected < synced_below and end is not None and end > expected:
            damage = Damage(expected, end, DamageKind.UNREADABLE)
            log.error(
                "%s: %s (%s at position %d of %s); they are kept as they are and not served",
                self.directory,
                damage.describe(self.directory.name),
                problem,
                position,
                self.path(LOG_SUFFIX).name,
            )
            self.damage.append(damage)
            self._unreadable_from = position
            self.size = file_size
            self.next_offset = end
            self.cut_bytes = 0
            return 0
        if position < file_size:
            log.warning(
                "%s: cutting %d bytes at position %d of segment %d: %s",
                self.directory,
                file_size - position,
                position,
                self.base_offset,
                problem,
            )
            os.ftruncate(fd, position)
            os.fsync(fd)
        self.size = position
        self.next_offset = expected
        self.cut_bytes = file_size - position
        return self.cut_bytes

    def _keep_synced_entries(
        self, window: FileWindow, file_size: int, synced_below: int
    ) -> tuple[int, int]:
        """Load the index entries of synced batches; returns where recovery goes on from.

        That is (position, expected base offset) of the batch at the last kept
        offset index entry, which recovery re-reads to resume the indexing
        state; (0, base offset) when nothing is kept. Entries past the synced
        ones may be torn or stale and are dropped.
        """
        start = (0, self.base_offset)
        if synced_below <= self.base_offset:
            return start
        offsets = _synced_prefix(self.offset_index, synced_below - self.base_offset, file_size)
        times = _synced_prefix(self.time_index, synced_below - self.base_offset, None)
        if not offsets or not times:
            # Every offset entry came with a time entry (or after one): the time index
            # is damaged, and the largest timestamp must be found again from the start.
            return start
        relative, position = offsets[-1]
        if file_size - position < HEADER_SIZE:
            return start
        header = parse_header(window.get(position, HEADER_SIZE))
        if header_problem(header) or header.last_offset != self.base_offset + relative:
            log.warning(
                "%s: index of segment %d disagrees with it", self.directory, self.base_offset
            )
            return start
        for key, value in offsets[:-1]:
            self.offset_index.append(self.base_offset + key, value)
        for timestamp, value in times:
            self.time_index.maybe_append(timestamp, self.base_offset + value)
        if times:
            self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry or (
                -1,
                -1,
            )
        # The batch at the last entry is indexed again as it was the first time: with
        # more than index.interval.bytes behind it since the entry before.
        self._bytes_since_index_entry = INT32_MAX
        return position, header.base_offset

    def open_indexes_for_append(self) -> None:
        self.offset_index.open_for_append()
        self.time_index.open_for_append()
        self.sealed = False

    def set_file_suffix(self, file_suffix: str) -> None:
        """Follow a rename of the files (by swap.py): the descriptors stay valid across it."""
        self.file_suffix = file_suffix
        self.offset_index.path = self.path(INDEX_SUFFIX)
        self.time_index.path = self.path(TIME_INDEX_SUFFIX)
        self.txn_index.path = self.path(TXN_INDEX_SUFFIX)

    def seal(self) -> None:
        """Stop taking appends: record the largest timestamp as the last time index entry.

        Kafka does the same on roll, so retention can read a sealed segment's
        age from its time index without scanning it.
        """
        if self.offset_of_max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            # That entry must reach the disk before the recovery point passes this segment.
            self.dirty = self.dirty or self.time_index.writable
        self.sealed = True

    def manage(self, budget: DescriptorBudget, owner: threading.Lock) -> None:
        """Count this segment's files against `budget`, which may close them when others
        need room; `owner`, the log's lock, is held around every use of them."""
        self._budget, self._owner = budget, owner
        if self._fd is not None:
            budget.used(self)

    @property
    def owner(self) -> threading.Lock:
        assert self._owner is not None
        return self._owner

    def release_files(self) -> None:
        """Close the descriptors until the next use (the budget, under the owner's lock)."""
        self.offset_index.release()
        self.time_index.release()
        self.txn_index.release()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def close(self) -> None:
        self._closed = True
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if self._budget is not None:
            self._budget.forget(self)

    def delete(self) -> None:
        self.close()
        for suffix in SEGMENT_SUFFIXES:
            self.path(suffix).unlink(missing_ok=True)

    # -- writing ----------------------------------------------------------------

    def append(
        self,
        parts: Sequence[bytes | bytearray | memoryview],
        placements: Sequence[BatchPlacement],
        index_interval_bytes: int,
        now_ms: int,
    ) -> None:
        """Write `parts`, one after the other, at the end of the segment, and index the
        batches they hold (`placements`, relative to where the first part starts)."""
        fd = self._require_fd()
        position = self.size
        size = sum(map(len, parts))
        try:
            _pwrite_all(fd, parts, position, size)
        except OSError as exc:
            # Leave no partial batch behind for the next append to follow.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, position)
            raise StorageIOError(f"cannot write to {self.path(LOG_SUFFIX)}: {exc}") from exc
        self.size += size
        for relative, batch_size, last_offset, max_timestamp in placements:
            self._index_batch(
                position + relative, batch_size, last_offset, max_timestamp, index_interval_bytes
            )
        self.next_offset = placements[-1][2] + 1
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self.dirty = True

    def truncate_to(self, offset: int) -> None:
        """Cut off every batch whose last offset is at or after `offset`, and take appends.

        The log file is cut and synced, the indexes cut with it, and the largest
        timestamp found again from the last index entry on, as Kafka's
        LogSegment.truncateTo does. What remains ends at `next_offset`.
        """
        fd = self._require_fd()
        end = self.offset_index.lookup(offset - 1)
        next_offset = self.base_offset
        for position, header in self.scan(end):
            if header.last_offset >= offset:
                break
            end = position + header.size
            next_offset = header.last_offset + 1
        self.offset_index.truncate_to_position(end)
        self.time_index.truncate_to_offset(next_offset)
        try:
            os.ftruncate(fd, end)
            os.fsync(fd)
            self.txn_index.truncate_to(next_offset)
            for index in (self.offset_index, self.time_index):
                index.close()
                index.write_file()
            self.open_indexes_for_append()
        except OSError as exc:
            raise StorageIOError(f"cannot truncate {self.path(LOG_SUFFIX)}: {exc}") from exc
        self.size = end
        self.next_offset = next_offset
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry or (-1, -1)
        indexed = self.offset_index.last_position
        for _, header in self.scan(indexed or 0):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        self._bytes_since_index_entry = end - (indexed or 0)
        if end == 0:
            self.first_append_ms = None
        self.dirty = True

    def _index_batch(
        self, position: int, size: int, last_offset: int, max_timestamp: int, interval: int
    ) -> None:
        # Kafka's rule (LogSegment.append): an entry once more than index.interval.bytes
        # went by since the last one, so the first batch of a segment never gets one.
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index_entry > interval and not self.indexes_full:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def fits_relative(self, offset: int) -> bool:
        return offset - self.base_offset <= INT32_MAX

    def take_sync_handles(self) -> tuple[list[int], OSError | None]:
        """Duplicates of every descriptor with unsynced data, for fsync outside the lock,
        and the error that kept a torn index from being rewritten, if one did.

        fsync works on the file, not the descriptor, and a duplicate stays valid
        even if the segment is closed or deleted meanwhile. An index torn by a
        failed write (a full disk) is replaced whole first, with a handle on the
        directory for the rename; if that fails too, the segment stays dirty and
        the next flush tries again.
        """
        handles = [os.dup(self._require_fd())]
        problem: OSError | None = None
        try:
            for index in (self.offset_index, self.time_index):
                if index.torn:
                    try:
                        index.repair()
                    except OSError as exc:
                        problem = exc
                        continue
                    handles.append(os.open(self.directory, os.O_RDONLY))
                fd = index.sync_handle()
                if fd is not None:
                    handles.append(fd)
                if self.sealed:
                    # Complete and now covered by the duplicate: no need to keep it open.
                    index.close()
            fd = self.txn_index.sync_handle()
            if fd is not None:
                handles.append(fd)
            if self.sealed:
                self.txn_index.release()
        except BaseException:
            for fd in handles:
                os.close(fd)
            raise
        self.dirty = problem is not None
        return handles, problem

    # -- reading ----------------------------------------------------------------

    def path(self, suffix: str) -> Path:
        return segment_file(self.directory, self.base_offset, suffix + self.file_suffix)

    def read(self, position: int, size: int) -> bytes:
        return _pread_exact(self._require_fd(), size, position)

    def region(self, position: int, size: int) -> FileRegion:
        """`size` bytes from `position`, to be sent from the file: the region holds a
        duplicate of the descriptor, so the budget or a deletion may close the segment
        meanwhile. OSError if no descriptor is left for it."""
        return FileRegion(os.dup(self._require_fd()), position, size)

    def whole_batches_end(self, position: int, end: int, limit: int) -> int:
        """Where the whole batches from `position` (a batch start) that end by `end` and
        start below offset `limit` end: the bytes of read(position, end - position) that
        records.iter_batches takes, found from batch headers without reading the rest.
        The offset index skips to the last batch known to qualify."""
        start = max(position, self.offset_index.scan_start(end, limit))
        whole = start
        for batch_position, header in scan_file(self._require_fd(), end, start, _HEADER_CHUNK):
            if header.base_offset >= limit:
                break
            whole = batch_position + header.size
        return whole

    def scan(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `position`, reading only around headers."""
        end = self.size if self._unreadable_from is None else self._unreadable_from
        return scan_file(self._require_fd(), end, position)

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is at or after `offset`."""
        for position, header in self.scan(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return position, header
        return None

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp` and `min_offset`."""
        start = max(self.time_index.lookup(timestamp), min_offset)
        for position, header in self.scan(self.offset_index.lookup(start)):
            if header.last_offset < min_offset or header.max_timestamp < timestamp:
                continue
            batch = memoryview(self.read(position, header.size))
            try:
                for offset, record_timestamp in iter_offsets_and_timestamps(batch, header):
                    if offset >= min_offset and record_timestamp >= timestamp:
                        return offset, record_timestamp
            except InvalidBatch as exc:
                log.warning(
                    "%s: skipping unreadable batch at %d: %s", self.directory, position, exc
                )
        return None

    def record_with_timestamp(self, offset: int, timestamp: int) -> int:
        """Offset of the first record stamped `timestamp` in the batch holding `offset`."""
        found = self.find(offset)
        if found is None:
            return offset
        position, header = found
        try:
            batch = memoryview(self.read(position, header.size))
            for record_offset, record_timestamp in iter_offsets_and_timestamps(batch, header):
                if record_timestamp == timestamp:
                    return record_offset
        except InvalidBatch:
            pass
        return offset

    @property
    def largest_timestamp(self) -> int:
        """Kafka's rule for retention: the largest record timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.path(LOG_SUFFIX)).st_mtime * 1000)

    def _require_fd(self) -> int:
        fd = self._fd
        if fd is None:
            if self._closed:
                raise StorageIOError(f"segment {self.path(LOG_SUFFIX)} is closed")
            path = self.path(LOG_SUFFIX)
            try:
                fd = self._fd = os.open(path, os.O_RDWR)
            except OSError as exc:
                raise StorageIOError(f"cannot open {path} again: {exc.strerror}") from exc
        if self._budget is not None:
            self._budget.used(self)
        return fd


def scan_file(
    fd: int, end: int, position: int = 0, chunk: int = _CHUNK
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch of a .log file up to `end`, reading `chunk`
    bytes at a time around the headers."""
    window = FileWindow(fd, end, chunk)
    while end - position >= HEADER_SIZE:
        header = parse_header(window.get(position, HEADER_SIZE))
        if header.batch_length < _MIN_BATCH_LENGTH or position + header.size > end:
            return
        yield position, header
        position += header.size


def read_file(fd: int, size: int, position: int) -> bytes:
    return _pread_exact(fd, size, position)


def _synced_prefix(
    index: OffsetIndex | TimeIndex, below: int, size: int | None
) -> list[tuple[int, int]]:
    """The entries of an index file that name offsets (relative) below `below`, in order.

    Stops at the first entry that does not increase or points outside `size`:
    only entries appended after the last sync can be damaged, and they come last.
    """
    kept: list[tuple[int, int]] = []
    for key, value in index.file_entries():
        offset = value if isinstance(index, TimeIndex) else key
        previous = kept[-1] if kept else None
        if offset >= below or offset < 0 or (size is not None and not 0 <= value < size):
            break
        if previous is not None and (key <= previous[0] or value < previous[1]):
            break
        kept.append((key, value))
    return kept


def header_problem(header: BatchHeader) -> str | None:
    """What makes a batch header unusable on its own, if anything (offsets aside)."""
    if header.magic != 2:
        return f"magic {header.magic}"
    if header.batch_length < _MIN_BATCH_LENGTH:
        return f"a batch length of {header.batch_length}"
    if header.last_offset_delta < 0:
        return "a negative last offset delta"
    return None


def _placement_problem(
    header: BatchHeader, position: int, file_size: int, expected: int, allow_gaps: bool
) -> str | None:
    if position + header.size > file_size:
        return "a batch running past the end of the file"
    if header.base_offset < expected or (header.base_offset != expected and not allow_gaps):
        return f"base offset {header.base_offset} where {expected} was due"
    return None


class FileWindow:
    """Reads a file through one buffer, refilled in chunks, so header scans are cheap.
    Raises StorageIOError if the file cannot be read."""

    def __init__(self, fd: int, end: int, chunk: int = _CHUNK) -> None:
        self._fd = fd
        self._end = end
        self._chunk = chunk
        self._start = 0
        self._buf = b""

    def get(self, position: int, size: int) -> memoryview:
        offset = position - self._start
        if offset < 0 or offset + size > len(self._buf):
            length = min(max(size, self._chunk), self._end - position)
            self._buf = _pread_exact(self._fd, length, position)
            self._start = position
            offset = 0
        return memoryview(self._buf)[offset : offset + size]


def _pread_exact(fd: int, size: int, position: int) -> bytes:
    try:
        data = os.pread(fd, size, position)
        if len(data) == size:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(fd, size - got, position + got)
            if not more:
                raise StorageIOError(f"short read at {position}: file ends early")
            parts.append(more)
            got += len(more)
        return b"".join(parts)
    except OSError as exc:
        raise StorageIOError(f"read failed at {position}: {exc}") from exc


def _pwrite_all(
    fd: int, parts: Sequence[bytes | bytearray | memoryview], position: int, size: int
) -> None:
    """Write every part (`size` bytes in all), in order, from `position`: one pwrite of
    them joined when small, else one pwritev; more only when the kernel writes less."""
    if size < _JOIN_BELOW:
        # A small batch (the coordinator's): joining costs less than a view per part,
        # and one pwrite that writes it all (as it almost always does) needs no view.
        if not size:
            return
        joined = b"".join(parts)
        written = os.pwrite(fd, joined, position)
        if written == size:
            return
        views = [memoryview(joined)[written:]]
        position += written
    else:
        views = [memoryview(part).cast("B") for part in parts if len(part)]
    while views:
        written = os.pwritev(fd, views[:_IOV_MAX], position)
        position += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            del views[0]
        if written:
            views[0] = views[0][written:]


# The most buffers one pwritev takes (Linux's IOV_MAX).
_IOV_MAX = 1024
# Parts that add up to less than this are joined and written with one pwrite.
_JOIN_BELOW = 4096
