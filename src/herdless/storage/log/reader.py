"""Reads of a log: whole batches from an offset, as copies or file regions for
sendfile(), and the offset lookups of ListOffsets.
"""

from __future__ import annotations

import contextlib
from bisect import bisect_right

from herdless.protocol import records
from herdless.protocol.records import BatchHeader
from herdless.protocol.regions import FileRegion
from herdless.storage.errors import CorruptRecord, OffsetOutOfRange
from herdless.storage.log.local_log import LocalLog
from herdless.storage.segment import Segment

# The special timestamps of ListOffsets.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class LogReads(LocalLog):
    """A log's reads and offset lookups."""

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
        below_log_end = limit < self.log_end_offset
        for segment in self._segments[number:]:
            if segment.base_offset >= limit:
                break
            budget = max_bytes - total
            end = segment.size
            if below_log_end:
                # A read stopping well before the log end (a share fetch reads what it can
                # acquire) reads up to the batch holding `limit`, not the rest of the
                # segment: megabytes copied to keep a few kilobytes.
                found = segment.find(limit)
                if found is not None:
                    at, header = found
                    end = at + header.size if header.base_offset < limit else at
            chunk = segment.read(position, min(budget, end - position))
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


def _whole_batches_length(chunk: bytes, limit: int) -> int:
    """How many bytes of `chunk` are whole batches whose base offset is below `limit`."""
    end = 0
    for position, header in records.iter_batches(chunk):
        if header.base_offset >= limit:
            break
        end = position + header.size
    return end
