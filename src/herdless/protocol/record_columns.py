"""The keys and values of a stored batch, cut out a run of records at a time.

Loading `__consumer_offsets` reads every record of the log, and walking
records one varint at a time in Python cost more than everything else the
load does (a million records: 3 s of a 7 s load). The records of one batch
mostly share one layout: the same field widths, key length and value length,
differing only in their bytes (a commit of many partitions of one topic, a
group's tombstones). So the first record of a run is parsed the ordinary way,
its layout becomes one `struct` format, and `iter_unpack` cuts the following
records of that layout out in C. Every record so cut is checked to parse the
same way the ordinary walk would parse it (equal length prefixes, varints of
the template's width), and the run ends before the first one that is not.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from herdless.protocol.records import HEADER_SIZE, BatchHeader, InvalidBatch, _varint, decompress

# Offset deltas of a dense batch fit one varint byte below 64 and two below 8192: runs
# are cut at those deltas rather than discovered by a failed check.
_VARINT_LIMITS = ((1, 64), (2, 8192))

Column = Sequence[bytes | None]


def iter_key_value_runs(batch: memoryview, header: BatchHeader) -> Iterator[tuple[Column, Column]]:
    """Yield (keys, values) of successive runs of records, in log order: together, the
    same keys and values as records.iter_records, and the same InvalidBatch where a
    record does not parse (after the runs before it)."""
    payload = decompress(header.compression, batch[HEADER_SIZE : header.size])
    end = len(payload)
    pos = 0
    left = header.record_count
    # How many records the next run may try: after a failed check, about twice as
    # many as the last run held, so that a batch of changing layouts stays linear.
    attempt = left
    while left > 0:
        layout, size, room = _template(payload, pos, end)
        n = min(left, attempt, room, (end - pos) // size)
        keys, values, valid = _cut(payload, pos, n, layout)
        attempt = left if valid == n else 2 * valid
        yield keys, values
        pos += valid * size
        left -= valid


class _Layout(NamedTuple):
    """Where a record's fields lie: its varints' widths, its key's and value's lengths."""

    length_width: int
    timestamp_width: int
    delta_width: int
    key_width: int
    key_length: int  # -1: null
    value_width: int
    value_length: int  # -1: null
    headers: int  # bytes after the value, not read


def _template(payload: memoryview, pos: int, end: int) -> tuple[_Layout, int, int]:
    """Parse the record at `pos` as records._walk does; return its layout, its size and
    how many records of a dense batch can follow it with the same offset delta width."""
    start = pos
    length, pos = _varint(payload, pos)
    length_width = pos - start
    record_end = pos + length
    if length < 3 or record_end > end:
        raise InvalidBatch("record length runs past the batch")
    pos += 1  # attributes
    mark = pos
    _, pos = _varint(payload, pos)  # timestamp delta
    timestamp_width = pos - mark
    mark = pos
    offset_delta, pos = _varint(payload, pos)
    delta_width = pos - mark
    if pos > record_end:
        raise InvalidBatch("record header runs past its length")
    mark = pos
    key_length, pos = _varint(payload, pos)
    key_width = pos - mark
    pos += max(key_length, 0)
    mark = pos
    value_length, pos = _varint(payload, pos)
    value_width = pos - mark
    pos += max(value_length, 0)
    if pos > record_end:
        raise InvalidBatch("record header runs past its length")
    layout = _Layout(
        length_width,
        timestamp_width,
        delta_width,
        key_width,
        key_length,
        value_width,
        value_length,
        record_end - pos,
    )
    room = end
    for width, limit in _VARINT_LIMITS:
        if delta_width == width and 0 <= offset_delta < limit:
            room = limit - offset_delta
    return layout, record_end - start, room


def _cut(payload: memoryview, pos: int, n: int, layout: _Layout) -> tuple[Column, Column, int]:
    """The keys and values of up to `n` records of `layout` from `pos`, and how many
    of them parse as the template does (at least the template itself)."""
    _, width, checks, key_at, value_at = _unpacker(layout)
    # One struct for all n records: a flat tuple sliced into columns, where unpacking
    # record by record and transposing cost a third more.
    fields = _run_unpacker(layout, n)(payload, pos)
    columns = [fields[i::width] for i in range(width)]
    valid = n
    if not all(check(columns[i]) for i, check in checks):
        # Each check holds for a pair (template, record) exactly when it holds for the record.
        valid = next(
            r for r in range(1, n) if not all(c((columns[i][0], columns[i][r])) for i, c in checks)
        )
    keys: Column = columns[key_at] if key_at is not None else (None,) * n
    values: Column = columns[value_at] if value_at is not None else (None,) * n
    if valid < n:
        keys, values = keys[:valid], values[:valid]
    return keys, values, valid


@lru_cache(maxsize=1024)
def _run_unpacker(layout: _Layout, n: int) -> Callable[[memoryview, int], tuple[Any, ...]]:
    return struct.Struct(">" + _unpacker(layout)[0] * n).unpack_from


def _all_equal(column: tuple[object, ...]) -> bool:
    return column.count(column[0]) == len(column)


def _all_continued(column: tuple[int, ...]) -> bool:
    return min(column) >= 0x80


def _all_final(column: tuple[int, ...]) -> bool:
    return max(column) < 0x80


_Check = Callable[[tuple[Any, ...]], bool]


@lru_cache(maxsize=1024)
def _unpacker(layout: _Layout) -> tuple[str, int, list[tuple[int, _Check]], int | None, int | None]:
    """The struct format of one record of `layout` (no byte order), how many fields it
    yields, the check of each that needs one, and which are the key and the value
    (None: all null).

    Length prefixes must equal the template's, so each record has its size and its
    key and value their lengths. The timestamp and offset deltas may differ, but
    each must be one varint of the template's width: every byte but the last with
    its continuation bit, the last without (one column per byte).
    """
    codes: list[str] = []
    checks: list[tuple[int, _Check]] = []

    def column(code: str, check: _Check | None = None) -> int:
        if check is not None:
            checks.append((len(codes), check))
        codes.append(code)
        return len(codes) - 1

    column(f"{layout.length_width}s", _all_equal)
    for width in (layout.timestamp_width, layout.delta_width):
        for _ in range(width - 1):
            column("B", _all_continued)
        column("B", _all_final)
    column(f"{layout.key_width}s", _all_equal)
    key_at = column(f"{layout.key_length}s") if layout.key_length >= 0 else None
    column(f"{layout.value_width}s", _all_equal)
    value_at = column(f"{layout.value_length}s") if layout.value_length >= 0 else None
    # The attributes byte (after the length) and the headers are not read.
    fmt = codes[0] + "x" + "".join(codes[1:]) + (f"{layout.headers}x" if layout.headers else "")
    return fmt, len(codes), checks, key_at, value_at
