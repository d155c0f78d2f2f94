"""A partition's record batches (magic v2), as a Fetch answer holds them, into Arrow columns.

No Python object is made per record. Python walks the batches (their headers
say what to skip: records before the wanted offset, control batches, aborted
transactions) and, inside a batch, only each record's length prefix, to learn
where the records start. numpy then reads every field of every record at once,
and Arrow copies the keys and values out of the payload with one `take` each.
Reading a million records of 100 bytes this way costs an executor about an
eighth of the CPU it spent on librdkafka's Python messages (docs/benchmarks.md).

What the rows hold follows Kafka's consumers exactly: a null key or value (length
-1) is null and an empty one empty; offsets come from each record's delta, so
compaction's gaps stay; a LogAppendTime batch stamps every record with its max
timestamp; a record without headers has null headers, as librdkafka reports
them.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from herdless.protocol.records import (
    HEADER_SIZE,
    LENGTH_PREFIX,
    Compression,
    InvalidBatch,
    decompress,
)
from herdless.protocol.records import _varint as varint
from herdless.spark.schema import HEADER_ARROW, HEADERS_ARROW, KAFKA_ARROW_SCHEMA, arrow_schema

# protocol.records' batch header layout, unpacked to a plain tuple: no object per batch,
# which matters when producers send a record or two per batch.
_BATCH_HEADER = struct.Struct(">qiiBIhiqqqhii")
_CONTROL = 0x20
_TRANSACTIONAL = 0x10
_LOG_APPEND_TIME = 0x08
_ABORT_MARKER = 0
_CONTROL_KEY = struct.Struct(">hh")
# A length, the attributes byte, two deltas, two null lengths and a header count.
_MIN_RECORD_SIZE = 7
# _record_starts: the first window of records guessed alike, and the most
# records walked one by one between guesses.
_FIRST_WINDOW = 32
_MAX_BY_HAND = 4096
_TIMESTAMP = KAFKA_ARROW_SCHEMA.field("timestamp").type
# Arrow's binary type addresses its data with int32 offsets.
_INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """One entry of a Fetch answer's aborted_transactions."""

    producer_id: int
    first_offset: int


@dataclass(slots=True)
class _Batches:
    """Per kept batch: where its records lie in `buffer`, and what its header says."""

    buffer: bytes
    spans: list[tuple[int, int, int]]  # (payload start, payload end, record count)
    base_offsets: list[int]
    base_timestamps: list[int]
    max_timestamps: list[int]
    log_append_time: list[bool]


def decode_records(
    records: bytes,
    topic: str,
    partition: int,
    start: int,
    until: int,
    headers: bool,
    aborted: Sequence[AbortedTransaction] | None,
) -> pa.RecordBatch | None:
    """The records of `records` with offsets in [start, until), as one Arrow record batch.

    `aborted` is None to read uncommitted, else the Fetch answer's aborted
    transactions (read_committed): their batches are skipped, as Kafka's
    consumers skip them. A batch cut short at the end of the answer is left
    for the next fetch. None if no record is left. Raises InvalidBatch for
    records that do not parse.
    """
    batches = _kept_batches(records, start, aborted)
    if not batches.spans:
        return None
    return _to_arrow(batches, topic, partition, start, until, headers)


def next_offset(records: bytes, start: int) -> int:
    """Where to fetch after an answer read from `start`: past its last whole batch.

    Past the batch's last offset, not its last record's: compaction may have
    removed the records at the end of a batch, and markers are batches too.
    """
    after = start
    for _, _, header in _whole_batches(records):
        after = max(after, header[0] + header[6] + 1)  # base offset + last offset delta
    return after


def _whole_batches(records: bytes) -> Iterator[tuple[int, int, tuple]]:
    """(start, end, header fields) of each whole batch; a batch cut short ends the answer."""
    pos = 0
    end = len(records)
    unpack = _BATCH_HEADER.unpack_from
    while end - pos >= HEADER_SIZE:
        header = unpack(records, pos)
        size = header[1] + LENGTH_PREFIX
        if header[1] < HEADER_SIZE - LENGTH_PREFIX or pos + size > end:
            return
        if header[3] != 2:
            raise InvalidBatch(
                f"message format v{header[3]} at offset {header[0]}: only record batches "
                "(magic 2, Kafka 0.11 and later) are read"
            )
        yield pos, pos + size, header
        pos += size


def _kept_batches(
    records: bytes, start: int, aborted: Sequence[AbortedTransaction] | None
) -> _Batches:
    # Per producer, the first offsets of its aborted transactions not yet closed
    # by an abort marker, ascending: a transactional batch of that producer at or
    # past the first is part of the aborted transaction.
    open_aborts: dict[int, list[int]] = {}
    for txn in sorted(aborted or (), key=lambda t: t.first_offset):
        open_aborts.setdefault(txn.producer_id, []).append(txn.first_offset)

    spans: list[tuple[int, int, int]] = []
    compressed: list[tuple[int, int]] = []  # (index in spans, codec)
    kept = _Batches(b"", spans, [], [], [], [])
    for batch_start, batch_end, header in _whole_batches(records):
        (
            base_offset,
            _,
            _,
            _,
            _,
            attributes,
            last_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            _,
            _,
            count,
        ) = header
        if count <= 0:
            continue  # emptied by the cleaner
        if attributes & _CONTROL:
            # Markers count even before `start`: one there may close an aborted
            # transaction the answer lists, as Kafka's Java consumer reads them.
            firsts = open_aborts.get(producer_id)
            if firsts and firsts[0] <= base_offset and _is_abort_marker(records, batch_start):
                firsts.pop(0)
            continue
        if attributes & _TRANSACTIONAL:
            firsts = open_aborts.get(producer_id)
            if firsts and base_offset >= firsts[0]:
                continue
        if base_offset + last_delta < start:
            continue
        codec = attributes & 0x07
        if codec != Compression.NONE:
            compressed.append((len(spans), codec))
        spans.append((batch_start + HEADER_SIZE, batch_end, count))
        kept.base_offsets.append(base_offset)
        kept.base_timestamps.append(base_timestamp)
        kept.max_timestamps.append(max_timestamp)
        kept.log_append_time.append(bool(attributes & _LOG_APPEND_TIME))

    kept.buffer = _decompressed(records, spans, compressed) if compressed else records
    return kept


def _decompressed(
    records: bytes, spans: list[tuple[int, int, int]], compressed: list[tuple[int, int]]
) -> bytes:
    """One buffer of every kept payload, compressed ones inflated; `spans` rewritten to it."""
    codecs = dict(compressed)
    view = memoryview(records)
    pieces = []
    at = 0
    for index, (begin, end, count) in enumerate(spans):
        piece = view[begin:end]
        if index in codecs:
            piece = decompress(codecs[index], piece)
        pieces.append(piece)
        spans[index] = (at, at + len(piece), count)
        at += len(piece)
    return b"".join(pieces)


def _is_abort_marker(records: bytes, batch_start: int) -> bool:
    """Whether a control batch's record is an ABORT marker (its key: version 0, type 0)."""
    view = memoryview(records)
    pos = batch_start + HEADER_SIZE
    _, pos = varint(view, pos)  # record length
    _, pos = varint(view, pos + 1)  # after the attributes byte: timestamp delta
    _, pos = varint(view, pos)  # offset delta
    key_length, pos = varint(view, pos)
    if key_length < _CONTROL_KEY.size:
        return False
    version, kind = _CONTROL_KEY.unpack_from(records, pos)
    return version == 0 and kind == _ABORT_MARKER


def _record_starts(buffer: bytes, spans: list[tuple[int, int, int]]) -> np.ndarray:
    """Where each record of each kept batch starts.

    Each record's start follows from the length prefix of the one before, so
    this is a walk. Records of one length in a row are common (fixed-format
    values), so after walking a record the walk guesses that the next ones
    share its length prefix and checks that guess for a window of them at once
    with numpy, widening the window while guesses hold. Where lengths vary it
    walks record by record, reading only the prefix (one or two bytes under 8
    KiB, read inline), and guesses again less and less often while guesses fail.
    """
    data = np.frombuffer(buffer, np.uint8)
    starts = array("q")
    try:
        for begin, end, count in spans:
            if count > (end - begin) // _MIN_RECORD_SIZE:
                raise InvalidBatch("record count larger than the batch has room for")
            pos, left = begin, count
            window, by_hand = _FIRST_WINDOW, 1
            while left:
                walked = min(by_hand, left)
                last, pos = _walk(buffer, pos, walked, starts)
                left -= walked
                step = pos - last
                if not left or step < _MIN_RECORD_SIZE or buffer[last] & buffer[last + 1] & 0x80:
                    continue
                guessed = _guess(data, last, pos, step, min(left, window, (end - pos) // step))
                starts.frombytes(guessed.tobytes())
                pos += step * len(guessed)
                left -= len(guessed)
                if len(guessed) >= _FIRST_WINDOW:
                    window, by_hand = window * 8, 1
                else:
                    window, by_hand = _FIRST_WINDOW, min(by_hand * 2, _MAX_BY_HAND)
            if pos != end:
                raise InvalidBatch("record lengths disagree with the batch length")
    except IndexError:
        raise InvalidBatch("record runs past the end of its batch") from None
    return np.frombuffer(starts, np.int64)


def _walk(buffer: bytes, pos: int, count: int, starts: array) -> tuple[int, int]:
    """Walk `count` records from `pos`: (start of the last, position after it)."""
    append = starts.append
    last = pos
    for _ in range(count):
        append(pos)
        last = pos
        first = buffer[pos]
        if first < 0x80:
            pos += 1 + ((first >> 1) ^ -(first & 1))
            continue
        second = buffer[pos + 1]
        if second < 0x80:
            length = (first & 0x7F) | (second << 7)
            pos += 2 + ((length >> 1) ^ -(length & 1))
            continue
        length, pos = varint(memoryview(buffer), pos)
        pos += length
    return last, pos


def _guess(data: np.ndarray, last: int, pos: int, step: int, window: int) -> np.ndarray:
    """Starts from `pos` on of the records that repeat the length prefix of the one at `last`.

    The prefix is one byte, or two (the first with its continuation bit set);
    equal prefix bytes mean equal lengths, so those records lie `step` apart.
    """
    if window <= 0:
        return np.empty(0, np.int64)
    candidates = pos + step * np.arange(window, dtype=np.int64)
    same = data[candidates] == data[last]
    if data[last] >= 0x80:
        same &= data[candidates + 1] == data[last + 1]
    return candidates if same.all() else candidates[: int(same.argmin())]


def _varints(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray | int]:
    """The zigzag varints starting at each position of `at`: (values, sizes in bytes).

    Deltas and lengths under 8 KiB take one or two bytes: those are read with
    two gathers; longer ones (rare: big records, timestamps far apart) byte by byte.
    """
    first = data[at].astype(np.int64)
    continued = first >= 0x80
    if not continued.any():
        return (first >> 1) ^ -(first & 1), 1
    if at[-1] + 1 >= len(data) and continued[-1]:
        raise InvalidBatch("record runs past the end of its batch")
    second = data.take(at + 1, mode="clip").astype(np.int64)
    value = np.where(continued, (first & 0x7F) | (second << 7), first)
    size = continued.astype(np.int64) + 1
    longer = np.flatnonzero(continued & (second >= 0x80))
    if longer.size:
        value[longer], size[longer] = _long_varints(data, at[longer])
    # Unzigzag with a logical shift: a ten-byte varint fills all 64 bits.
    return (value.view(np.uint64) >> np.uint64(1)).view(np.int64) ^ -(value & 1), size


def _long_varints(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints of three bytes or more, not yet unzigzagged (as int64 bit patterns)."""
    value = np.zeros(at.shape, np.uint64)
    size = np.zeros(at.shape, np.int64)
    more = np.arange(len(at))
    shift = 0
    while more.size:
        if shift > 63:
            raise InvalidBatch("varint longer than 64 bits")
        byte = data[at[more] + size[more]]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    return value.view(np.int64), size


def _check(ok: np.ndarray | bool, what: str) -> None:
    if not np.all(ok):
        raise InvalidBatch(what)


@dataclass(slots=True)
class _Fields:
    """Where each record's fields lie in the buffer (one array element per record)."""

    ends: np.ndarray
    timestamp_delta: np.ndarray
    offset_delta: np.ndarray
    key_start: np.ndarray
    key_length: np.ndarray  # -1: null
    value_start: np.ndarray
    value_length: np.ndarray  # -1: null
    after_value: np.ndarray


def _fields(data: np.ndarray, starts: np.ndarray) -> _Fields:
    length, size = _varints(data, starts)
    _check(length >= _MIN_RECORD_SIZE - 1, "record shorter than its fixed fields")
    ends = starts + size + length
    pos = starts + size + 1  # the attributes byte is unused in record batches
    timestamp_delta, size = _varints(data, pos)
    pos += size
    offset_delta, size = _varints(data, pos)
    pos += size
    key_length, size = _varints(data, pos)
    _check((key_length >= -1) & (key_length <= ends - pos), "record key runs past its record")
    key_start = pos + size
    pos = key_start + np.maximum(key_length, 0)
    value_length, size = _varints(data, pos)
    value_start = pos + size
    _check(
        (value_length >= -1) & (value_length <= ends - value_start),
        "record value runs past its record",
    )
    after_value = value_start + np.maximum(value_length, 0)
    return _Fields(
        ends,
        timestamp_delta,
        offset_delta,
        key_start,
        key_length,
        value_start,
        value_length,
        after_value,
    )


def _to_arrow(
    batches: _Batches, topic: str, partition: int, start: int, until: int, headers: bool
) -> pa.RecordBatch:
    buffer = batches.buffer
    data = np.frombuffer(buffer, np.uint8)
    try:
        starts = _record_starts(buffer, batches.spans)
        fields = _fields(data, starts)
        header_arrays = _headers(data, buffer, fields) if headers else None
    except IndexError:
        raise InvalidBatch("record runs past the end of its batch") from None

    counts = np.fromiter((count for _, _, count in batches.spans), np.int64, len(batches.spans))
    batch_of = np.repeat(np.arange(len(counts)), counts)
    offsets = np.asarray(batches.base_offsets, np.int64)[batch_of] + fields.offset_delta
    _check(offsets[1:] > offsets[:-1], "record offsets do not rise")
    # Offsets rise through the answer, so the wanted rows are one slice of it.
    first, last = np.searchsorted(offsets, [start, until])
    rows = slice(int(first), int(last))
    n = int(last - first)

    log_append = np.asarray(batches.log_append_time, np.bool_)[batch_of[rows]]
    created = np.asarray(batches.base_timestamps, np.int64)[batch_of[rows]]
    created += fields.timestamp_delta[rows]
    stamped = np.asarray(batches.max_timestamps, np.int64)[batch_of[rows]]
    # Kafka stamps milliseconds; Spark wants microseconds.
    timestamps = np.where(log_append, stamped, created) * 1000

    keys, values = _binary_columns(
        buffer,
        [(fields.key_start, fields.key_length), (fields.value_start, fields.value_length)],
        rows,
    )
    columns = [
        keys,
        values,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets[rows], pa.int64()),
        pa.Array.from_buffers(_TIMESTAMP, n, [None, pa.py_buffer(timestamps)]),
        # Spark's (Java's) timestamp type ids: 0 create time, 1 log append time.
        pa.array(log_append.astype(np.int32), pa.int32()),
    ]
    if header_arrays is not None:
        columns.append(header_arrays(rows))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(headers))


def _binary_columns(
    buffer: bytes, pieces: list[tuple[np.ndarray, np.ndarray]], rows: slice
) -> list[pa.Array]:
    """Binary columns of byte ranges of `buffer` ((start, length) arrays, length -1 null).

    The ranges, in buffer order, with the gaps between them, tile the buffer:
    that tiling is a binary array over the buffer as it is, from which `take`
    copies the wanted ranges into a compact column of their own.
    """
    width = len(pieces)
    n_all = len(pieces[0][0])
    bounds = np.empty(2 * width * n_all + 2, np.int64)
    bounds[0] = 0
    bounds[-1] = len(buffer)
    for index, (begin, length) in enumerate(pieces):
        bounds[1 + 2 * index : -1 : 2 * width] = begin
        bounds[2 + 2 * index : -1 : 2 * width] = begin + np.maximum(length, 0)
    if len(buffer) > _INT32_LIMIT:
        tiles_type, bounds_type = pa.large_binary(), np.int64
    else:
        tiles_type, bounds_type = pa.binary(), np.int32
    tiles = pa.Array.from_buffers(
        tiles_type,
        len(bounds) - 1,
        [None, pa.py_buffer(bounds.astype(bounds_type)), pa.py_buffer(buffer)],
    )
    wanted = np.arange(rows.start, rows.stop, dtype=np.int64) * 2 * width
    columns = []
    for index, (_, length) in enumerate(pieces):
        taken = tiles.take(pa.array(wanted + 1 + 2 * index))
        if taken.type != pa.binary():
            taken = taken.cast(pa.binary())
        columns.append(_with_nulls(taken, length[rows] >= 0))
    return columns


def _with_nulls(array: pa.Array, present: np.ndarray) -> pa.Array:
    nulls = len(present) - int(np.count_nonzero(present))
    if nulls == 0:
        return array
    validity = pa.py_buffer(np.packbits(present, bitorder="little"))
    _, *rest = array.buffers()
    return pa.Array.from_buffers(array.type, len(array), [validity, *rest], null_count=nulls)


def _headers(data: np.ndarray, buffer: bytes, fields: _Fields) -> Callable[[slice], pa.Array]:
    """Read every record's headers; return what builds the headers column of some rows.

    Headers are read a round at a time: the first header of every record that
    has one, then the second of every record that has two, and so on.
    """
    count, size = _varints(data, fields.after_value)
    _check(count >= 0, "record with a negative header count")
    ends = fields.ends
    pos = fields.after_value + size
    active = np.flatnonzero(count > 0)
    if not active.size:
        _check(pos == ends, "record length disagrees with its fields")
        return lambda rows: pa.nulls(rows.stop - rows.start, HEADERS_ARROW)

    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    at = pos[active]
    left = count[active]
    while active.size:
        key_length, size = _varints(data, at)
        key_start = at + size
        _check(
            (key_length >= 0) & (key_length <= ends[active] - key_start),
            "header key runs past its record",
        )
        at = key_start + key_length
        value_length, size = _varints(data, at)
        value_start = at + size
        _check(
            (value_length >= -1) & (value_length <= ends[active] - value_start),
            "header value runs past its record",
        )
        at = value_start + np.maximum(value_length, 0)
        parts.append((key_start, key_length, value_start, value_length))
        left = left - 1
        done = left == 0
        pos[active[done]] = at[done]
        active, at, left = active[~done], at[~done], left[~done]
    _check(pos == ends, "record length disagrees with its fields")

    # In buffer order, which is record order and, within a record, header order.
    key_start, key_length, value_start, value_length = (
        np.concatenate([part[i] for part in parts]) for i in range(4)
    )
    order = np.argsort(key_start, kind="stable")
    pieces = [(key_start[order], key_length[order]), (value_start[order], value_length[order])]
    first_header = np.concatenate([[0], np.cumsum(count)])

    def column(rows: slice) -> pa.Array:
        low, high = first_header[rows.start], first_header[rows.stop]
        keys, values = _binary_columns(buffer, pieces, slice(int(low), int(high)))
        try:
            keys = keys.cast(pa.string())
        except pa.ArrowInvalid:
            raise InvalidBatch("header key is not UTF-8") from None
        entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_ARROW))
        offsets = pa.array((first_header[rows.start : rows.stop + 1] - low).astype(np.int32))
        return pa.ListArray.from_arrays(
            offsets, entries, type=HEADERS_ARROW, mask=pa.array(count[rows] == 0)
        )

    return column
