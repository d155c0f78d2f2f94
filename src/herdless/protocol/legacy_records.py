"""Message sets, the record format before batches: magic v0 (Kafka 0.8) and v1 (0.10).

Produce v0-v2 carry them and Fetch v0-v3 must answer in them; herdless stores
only v2 batches, so, as Kafka 3 does, produced message sets are up-converted to
one v2 batch and fetched batches are down-converted on the way out.

A message set is a run of entries: offset (int64), size (int32), then a message:
CRC32 of the rest, magic, attributes, a timestamp (v1 only), key and value as
int32-length bytes. Compression wraps a whole message set, compressed, as the
value of one keyless wrapper message whose offset is the last inner one's;
inner offsets count from 0 in v1 (relative) and are absolute in v0.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import cramjam

from herdless.protocol import records
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import Compression, InvalidBatch

MAGIC_V0 = 0
MAGIC_V1 = 1
# Offset and size, before every message.
LOG_OVERHEAD = 12
# CRC, magic, attributes, [timestamp], key length, value length.
RECORD_OVERHEAD = {MAGIC_V0: 14, MAGIC_V1: 22}
# The magic byte of a v2 batch and of a message sit at the same position.
MAGIC_POSITION = 16
TIMESTAMP_TYPE_FLAG = 0x08
NO_TIMESTAMP = -1
LEGACY_CODECS = (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4)

_ENTRY = struct.Struct(">qi")
_MESSAGE_V0 = struct.Struct(">IBb")
_MESSAGE_V1 = struct.Struct(">IBbq")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Message:
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def log_append_time(self) -> bool:
        return self.magic > MAGIC_V0 and bool(self.attributes & TIMESTAMP_TYPE_FLAG)


def is_message_set(data: bytes | memoryview) -> bool:
    """True if the records start with a message rather than a v2 batch."""
    return len(data) > MAGIC_POSITION and data[MAGIC_POSITION] < 2


# -- reading ------------------------------------------------------------------------------------


def iter_messages(data: bytes | memoryview) -> Iterator[Message]:
    """The top-level messages of a message set, each checked whole (size, magic, CRC).

    Raises InvalidBatch (CORRUPT_MESSAGE) for a message that is torn, too short, of an
    unknown magic or fails its CRC, as Kafka's broker does.
    """
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if len(view) - pos < LOG_OVERHEAD:
            raise InvalidBatch("message set ends inside an entry header")
        offset, size = _ENTRY.unpack_from(view, pos)
        pos += LOG_OVERHEAD
        if size < RECORD_OVERHEAD[MAGIC_V0]:
            raise InvalidBatch(f"message size {size} is smaller than the smallest message")
        if pos + size > len(view):
            raise InvalidBatch("message runs past the end of the message set")
        yield _parse_message(offset, view[pos : pos + size])
        pos += size


def _parse_message(offset: int, message: memoryview) -> Message:
    magic = message[4]
    if magic == records.CURRENT_MAGIC:
        raise InvalidBatch("a record batch among messages", ErrorCode.INVALID_RECORD)
    if magic > MAGIC_V1:
        raise InvalidBatch(f"invalid magic {magic} in a message set")
    if len(message) < RECORD_OVERHEAD[magic]:
        raise InvalidBatch(f"message of {len(message)} bytes is too short for magic {magic}")
    if magic == MAGIC_V0:
        crc, _, attributes = _MESSAGE_V0.unpack_from(message, 0)
        timestamp = NO_TIMESTAMP
        pos = _MESSAGE_V0.size
    else:
        crc, _, attributes, timestamp = _MESSAGE_V1.unpack_from(message, 0)
        pos = _MESSAGE_V1.size
    if zlib.crc32(message[4:]) != crc:
        raise InvalidBatch(f"message CRC mismatch (stored {crc})")
    key, pos = _sized_bytes(message, pos)
    value, pos = _sized_bytes(message, pos)
    if pos != len(message):
        raise InvalidBatch("message key and value disagree with its size")
    return Message(offset, magic, attributes & 0xFF, timestamp, key, value)


def _sized_bytes(message: memoryview, pos: int) -> tuple[bytes | None, int]:
    if len(message) - pos < 4:
        raise InvalidBatch("message ends inside a length")
    (length,) = _INT32.unpack_from(message, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > len(message):
        raise InvalidBatch("message key or value runs past its size")
    return bytes(message[pos : pos + length]), pos + length


def inner_messages(wrapper: Message) -> list[Message]:
    """The messages a compressed wrapper holds, with absolute offsets and, in v1, the
    wrapper's timestamp where it says LogAppendTime (as Kafka's deep iterator gives them).

    Raises InvalidBatch: CORRUPT_MESSAGE for damaged data, INVALID_RECORD for what Kafka
    refuses as invalid (no value, no inner messages, nested compression, an impossible
    wrapper offset, zstd, which v0 and v1 never had).
    """
    codec = wrapper.compression
    if codec not in LEGACY_CODECS:
        raise InvalidBatch(
            f"compression codec {codec} is not valid in message format v{wrapper.magic}",
            ErrorCode.INVALID_RECORD,
        )
    if wrapper.value is None:
        raise InvalidBatch("compressed message set without a value", ErrorCode.INVALID_RECORD)
    payload = _decompress(codec, wrapper.value, wrapper.magic)
    inner = list(iter_messages(payload))
    if not inner:
        raise InvalidBatch("compressed message set without messages", ErrorCode.INVALID_RECORD)
    for message in inner:
        if message.compression != Compression.NONE:
            raise InvalidBatch("inner messages must not be compressed", ErrorCode.INVALID_RECORD)
    if wrapper.magic == MAGIC_V0:
        return inner
    last_inner = inner[-1].offset
    # Some librdkafka versions leave the wrapper's offset 0 in what they produce.
    if wrapper.offset != 0 and wrapper.offset < last_inner:
        raise InvalidBatch(
            f"wrapper offset {wrapper.offset} is below the last inner offset {last_inner}",
            ErrorCode.INVALID_RECORD,
        )
    base = 0 if wrapper.offset == 0 else wrapper.offset - last_inner
    stamp = wrapper.log_append_time and wrapper.magic == MAGIC_V1
    return [
        Message(
            base + m.offset,
            m.magic,
            m.attributes,
            wrapper.timestamp if stamp and m.magic == MAGIC_V1 else m.timestamp,
            m.key,
            m.value,
        )
        for m in inner
    ]


def _decompress(codec: int, data: bytes, magic: int) -> memoryview:
    if codec == Compression.LZ4 and magic == MAGIC_V0:
        data = _lz4_with_checksum(data, broken=False)
    return records.decompress(codec, memoryview(data))


# -- up-conversion (Produce v0-v2) --------------------------------------------------------------


def upconvert(data: bytes | memoryview, *, log_append_time: bool) -> bytes:
    """A produced message set as one v2 batch (CreateTime, no producer id, base offset 0),
    compressed with the wrapper's codec if it came compressed, as Kafka 3 stores it.

    `log_append_time` says whether the topic stamps records itself: then, as for a
    record without a timestamp, a message that claims LogAppendTime is refused
    (INVALID_TIMESTAMP), as Kafka refuses it. Other checks (keys on compacted topics,
    timestamp bounds) are the log's, on the converted batch.
    """
    top = list(iter_messages(data))
    if not top:
        raise InvalidBatch("empty message set", ErrorCode.INVALID_RECORD)
    magic = top[0].magic
    if any(message.magic != magic for message in top):
        raise InvalidBatch(
            "messages of different magic in one message set", ErrorCode.INVALID_RECORD
        )
    codec = top[0].compression
    if codec != Compression.NONE:
        if len(top) > 1:
            raise InvalidBatch(
                "a compressed message set must be the only entry", ErrorCode.INVALID_RECORD
            )
        messages = inner_messages(top[0])
        claims = [top[0]] * len(messages)
    else:
        messages = top
        claims = top
    for message, claimer in zip(messages, claims, strict=True):
        if message.magic != magic:
            raise InvalidBatch(
                f"inner message magic {message.magic} is not the wrapper's {magic}",
                ErrorCode.INVALID_RECORD,
            )
        if claimer.log_append_time and (log_append_time or message.timestamp == NO_TIMESTAMP):
            raise InvalidBatch(
                "producers must not set the timestamp type to LogAppendTime",
                ErrorCode.INVALID_TIMESTAMP,
            )
    entries = [(m.timestamp, m.key, m.value) for m in messages]
    return records.encode_batch(entries, codec)


# -- down-conversion (Fetch v0-v3) --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DownConverted:
    # Each a whole message (or compressed wrapper), in offset order: a response may
    # take a prefix of them without tearing one.
    messages: list[bytes]
    # Offset after the last batch converted (or skipped): where reading goes on.
    next_offset: int
    # Conversion stopped at a batch whose codec v0 and v1 do not have (zstd).
    unsupported_codec: bool


def downconvert(data: bytes | memoryview, to_magic: int, first_offset: int) -> DownConverted:
    """Whole v2 batches (as a log read returns them) as messages of `to_magic`, as
    Kafka 3 down-converts for old fetchers: control batches are dropped; an
    uncompressed batch becomes one message per record from `first_offset` on; a
    compressed batch becomes one wrapper holding all its records; headers are lost.
    """
    view = memoryview(data)
    out: list[bytes] = []
    next_offset = first_offset
    for position, header in records.iter_batches(view):
        batch = view[position : position + header.size]
        if header.is_control:
            next_offset = header.last_offset + 1
            continue
        if header.compression not in LEGACY_CODECS:
            return DownConverted(out, next_offset, True)
        next_offset = header.last_offset + 1
        kept = [
            r
            for r in records.iter_records(batch, header)
            if header.compression != Compression.NONE or r.offset >= first_offset
        ]
        if not kept:
            continue
        if header.compression == Compression.NONE:
            out.extend(
                _entry(r.offset, _message(to_magic, r.timestamp, r.key, r.value, header))
                for r in kept
            )
        else:
            out.append(_wrapper(to_magic, kept, header))
    return DownConverted(out, next_offset, False)


def _message(
    magic: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    header: records.BatchHeader,
    compression: int = Compression.NONE,
) -> bytes:
    attributes = compression
    if magic == MAGIC_V1 and header.log_append_time:
        attributes |= TIMESTAMP_TYPE_FLAG
    if magic == MAGIC_V0:
        head = struct.pack(">Bb", magic, attributes)
    else:
        head = struct.pack(">Bbq", magic, attributes, timestamp)
    body = head + _sized(key) + _sized(value)
    return struct.pack(">I", zlib.crc32(body)) + body


def _sized(field: bytes | None) -> bytes:
    if field is None:
        return _INT32.pack(-1)
    return _INT32.pack(len(field)) + field


def _entry(offset: int, message: bytes) -> bytes:
    return _ENTRY.pack(offset, len(message)) + message


def _wrapper(magic: int, kept: list[records.Record], header: records.BatchHeader) -> bytes:
    base = kept[0].offset
    inner = b"".join(
        # v1 counts inner offsets from the first record; v0 keeps them absolute.
        _entry(
            r.offset - base if magic == MAGIC_V1 else r.offset, _message(magic, *_fields(r), header)
        )
        for r in kept
    )
    value = _compress(header.compression, inner, magic)
    timestamp = max(r.timestamp for r in kept)
    wrapper = _message(magic, timestamp, None, value, header, header.compression)
    return _entry(kept[-1].offset, wrapper)


def _fields(record: records.Record) -> tuple[int, bytes | None, bytes | None]:
    return record.timestamp, record.key, record.value


def _compress(codec: int, data: bytes, magic: int) -> bytes:
    if codec == Compression.SNAPPY:
        return _xerial_snappy(data)
    compressed = records.compress(codec, data)
    if codec == Compression.LZ4 and magic == MAGIC_V0:
        # Kafka wrote v0 lz4 frames with a header checksum over the wrong bytes, and
        # readers of v0 expect it so.
        return _lz4_with_checksum(compressed, broken=True)
    return compressed


# The Java client's snappy framing, which Kafka writes for v0 and v1 and every reader knows.
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _xerial_snappy(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block)) + block
    return bytes(out)


# -- lz4 frame header checksum ------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def _lz4_with_checksum(frame: bytes, *, broken: bool) -> bytes:
    """The frame with its header checksum set right (xxh32 of the descriptor) or as
    Kafka's v0 writer set it (xxh32 from the frame's magic number on)."""
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        return frame  # not a frame: let decompression say what is wrong
    flags = frame[4]
    checksum_at = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(frame) <= checksum_at:
        return frame
    covered = frame[0 if broken else 4 : checksum_at]
    fixed = bytearray(frame)
    fixed[checksum_at] = (_xxh32(covered) >> 8) & 0xFF
    return bytes(fixed)


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def _xxh32(data: bytes) -> int:
    """xxHash32 with seed 0, for the few bytes of a frame descriptor (up to 18 with the
    magic number in front)."""
    length = len(data)
    pos = 0
    if length >= 16:
        lanes = [(_P1 + _P2) & _M32, _P2, 0, (-_P1) & _M32]
        while pos + 16 <= length:
            for lane in range(4):
                (word,) = struct.unpack_from("<I", data, pos)
                lanes[lane] = (_rotl((lanes[lane] + word * _P2) & _M32, 13) * _P1) & _M32
                pos += 4
        h = _rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)
    else:
        h = _P5
    h = (h + length) & _M32
    while pos + 4 <= length:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < length:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h
