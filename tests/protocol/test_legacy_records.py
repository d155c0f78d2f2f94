"""Message sets (magic v0, v1): up-conversion of what old producers send, down-conversion
of stored batches for old fetchers, each checked against kafka-python's own codec."""

from __future__ import annotations

import contextlib
import struct
import types
import zlib

import cramjam
import kafka.codec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from herdless.protocol import legacy_records
from herdless.protocol.errors import ErrorCode
from herdless.protocol.legacy_records import downconvert, is_message_set, upconvert
from herdless.protocol.records import (
    Compression,
    InvalidBatch,
    encode_batch,
    iter_records,
    rewrite_base_offset,
    split_batches,
)
from tests.support.requests import v2_batch

# Codecs message sets have (zstd came with v2).
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]

Entry = tuple[int, bytes | None, bytes | None]


class _Xxh32:
    """The piece of the xxhash package kafka-python calls for v0 lz4 (which it cannot do
    without it), backed by our xxh32, itself checked against reference values below."""

    def __init__(self, data: bytes) -> None:
        self._digest = legacy_records._xxh32(bytes(data)).to_bytes(4, "big")

    def digest(self) -> bytes:
        return self._digest


@pytest.fixture(autouse=True)
def _kafka_python_xxhash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka.codec, "xxhash", types.SimpleNamespace(xxh32=_Xxh32))


def message_set(magic: int, codec: int, entries: list[Entry], first_offset: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 24)
    for i, (timestamp, key, value) in enumerate(entries):
        builder.append(first_offset + i, timestamp=timestamp, key=key, value=value)
    return bytes(builder.build())


def decode(data: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """(magic, offset, timestamp, key, value) of every message, as kafka-python reads them."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        # kafka-python reads v0's absent timestamp as None; Kafka's value is -1.
        out += [
            (batch.magic, r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value)
            for r in batch
        ]
    return out


def stored(entries: list[Entry], codec: int = Compression.NONE, base_offset: int = 0) -> bytes:
    batch = bytearray(encode_batch(entries, codec))
    rewrite_base_offset(batch, base_offset)
    return bytes(batch)


def records_of(batch: bytes) -> list[Entry]:
    [(header, view)] = split_batches(batch, 1 << 24)
    return [(r.timestamp, r.key, r.value) for r in iter_records(view, header)]


ENTRIES: list[Entry] = [(1_700_000_000_000 + i, b"k%d" % i, b"v" * i) for i in range(20)]
ENTRIES[3] = (1_700_000_000_003, None, b"keyless")
ENTRIES[4] = (1_700_000_000_004, b"k4", None)


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_up_conversion_keeps_keys_values_and_v1_timestamps(magic: int, codec: int) -> None:
    data = message_set(magic, codec, ENTRIES)
    assert is_message_set(data)
    batch = upconvert(data, log_append_time=False)
    [(header, _)] = split_batches(batch, 1 << 24)
    assert header.compression == codec
    assert header.record_count == len(ENTRIES)
    expected = ENTRIES if magic == 1 else [(-1, k, v) for _, k, v in ENTRIES]
    assert records_of(batch) == expected


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_down_conversion_reads_back_in_kafka_pythons_codec(magic: int, codec: int) -> None:
    data = stored(ENTRIES, codec, base_offset=500) + stored(ENTRIES[:2], codec, base_offset=520)
    converted = downconvert(data, magic, first_offset=500)
    assert not converted.unsupported_codec
    assert converted.next_offset == 522
    decoded = decode(b"".join(converted.messages))
    expected = [
        (magic, 500 + i, ts if magic == 1 else -1, k, v) for i, (ts, k, v) in enumerate(ENTRIES)
    ] + [
        (magic, 520 + i, ts if magic == 1 else -1, k, v) for i, (ts, k, v) in enumerate(ENTRIES[:2])
    ]
    assert decoded == expected
    # One message per record uncompressed, one wrapper per batch compressed.
    assert len(converted.messages) == (22 if codec == Compression.NONE else 2)


def test_down_conversion_from_the_middle_of_an_uncompressed_batch_drops_the_records_before() -> (
    None
):
    converted = downconvert(stored(ENTRIES, base_offset=100), 1, first_offset=105)
    assert [offset for _, offset, *_ in decode(b"".join(converted.messages))] == list(
        range(105, 120)
    )


def test_down_conversion_of_a_compressed_batch_keeps_every_record() -> None:
    # Readers skip what lies before the offset they asked for, as with v2 batches.
    converted = downconvert(stored(ENTRIES, Compression.GZIP, base_offset=100), 1, first_offset=105)
    assert [offset for _, offset, *_ in decode(b"".join(converted.messages))] == list(
        range(100, 120)
    )


def test_down_conversion_stops_at_zstd() -> None:
    data = stored(ENTRIES[:2], base_offset=0) + stored(ENTRIES, Compression.ZSTD, base_offset=2)
    converted = downconvert(data, 1, first_offset=0)
    assert converted.unsupported_codec
    assert len(converted.messages) == 2
    assert converted.next_offset == 2
    assert downconvert(data[len(stored(ENTRIES[:2])) :], 1, 2).messages == []


def test_log_append_time_batches_down_convert_with_the_broker_time() -> None:
    batch = bytearray(stored(ENTRIES[:3]))
    from herdless.protocol.records import set_log_append_time

    set_log_append_time(batch, 1_234_567)
    for codec_batch in (bytes(batch),):
        [message] = [
            b
            for b in MemoryRecords(
                b"".join(downconvert(codec_batch, 1, 0).messages[:1])
            ).next_batch()
        ]
        assert message.timestamp == 1_234_567
        assert message.timestamp_type == 1


def test_magic_v0_lz4_uses_kafkas_old_header_checksum() -> None:
    # kafka-python reads v0 lz4 the old way only: it must accept what we write...
    converted = downconvert(stored(ENTRIES, Compression.LZ4), 0, 0)
    assert decode(b"".join(converted.messages))[5][3:] == ENTRIES[5][1:]
    # ...and the header checksum is not the standard one.
    frame_start = converted.messages[0].index(b"\x04\x22\x4d\x18")
    frame = converted.messages[0][frame_start:]
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(frame)
    # Up-conversion reads such frames back.
    assert (
        records_of(upconvert(b"".join(converted.messages), log_append_time=False))[5][1:]
        == (ENTRIES[5][1:])
    )


def test_xxh32_matches_reference_values() -> None:
    assert legacy_records._xxh32(b"") == 0x02CC5D05
    assert legacy_records._xxh32(b"a") == 0x550D7456
    assert legacy_records._xxh32(b"abc") == 0x32D153FF
    assert legacy_records._xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def corrupt(message_set_bytes: bytes, position: int) -> bytes:
    spoiled = bytearray(message_set_bytes)
    spoiled[position] ^= 0xFF
    return bytes(spoiled)


def test_a_bad_crc_is_corrupt_message() -> None:
    data = message_set(1, Compression.NONE, ENTRIES[:3])
    with pytest.raises(InvalidBatch) as caught:
        upconvert(corrupt(data, 30), log_append_time=False)
    assert caught.value.error == ErrorCode.CORRUPT_MESSAGE


def test_a_torn_message_set_is_corrupt_message() -> None:
    data = message_set(1, Compression.NONE, ENTRIES[:3])
    with pytest.raises(InvalidBatch) as caught:
        upconvert(data[:-3], log_append_time=False)
    assert caught.value.error == ErrorCode.CORRUPT_MESSAGE


def test_mixed_magic_is_invalid_record() -> None:
    data = message_set(0, Compression.NONE, ENTRIES[:2]) + message_set(
        1, Compression.NONE, ENTRIES[:2]
    )
    with pytest.raises(InvalidBatch) as caught:
        upconvert(data, log_append_time=False)
    assert caught.value.error == ErrorCode.INVALID_RECORD


def test_two_compressed_wrappers_are_invalid_record() -> None:
    one = message_set(1, Compression.GZIP, ENTRIES[:2])
    with pytest.raises(InvalidBatch) as caught:
        upconvert(one + one, log_append_time=False)
    assert caught.value.error == ErrorCode.INVALID_RECORD


def wrapper_around(inner: bytes, magic: int = 1, offset: int = 0, attributes: int = 1) -> bytes:
    value = bytes(cramjam.gzip.compress(inner))
    body = struct.pack(">Bbq", magic, attributes, 5) + struct.pack(">i", -1)
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_a_compressed_inner_message_is_invalid_record() -> None:
    nested = message_set(1, Compression.GZIP, ENTRIES[:2])
    with pytest.raises(InvalidBatch) as caught:
        upconvert(wrapper_around(nested), log_append_time=False)
    assert caught.value.error == ErrorCode.INVALID_RECORD


def test_inner_magic_must_match_the_wrapper() -> None:
    inner = message_set(0, Compression.NONE, ENTRIES[:2])
    with pytest.raises(InvalidBatch) as caught:
        upconvert(wrapper_around(inner, magic=1), log_append_time=False)
    assert caught.value.error == ErrorCode.INVALID_RECORD


def test_wrapper_offset_below_the_last_inner_offset_is_invalid_record() -> None:
    inner = message_set(1, Compression.NONE, ENTRIES[:5])
    with pytest.raises(InvalidBatch) as caught:
        upconvert(wrapper_around(inner, offset=2), log_append_time=False)
    assert caught.value.error == ErrorCode.INVALID_RECORD
    # A wrapper offset of 0, as some librdkafka versions send, is fine.
    assert len(records_of(upconvert(wrapper_around(inner, offset=0), log_append_time=False))) == 5


def test_producers_claiming_log_append_time_are_refused_where_kafka_refuses() -> None:
    inner = message_set(1, Compression.NONE, ENTRIES[:2])
    claims = wrapper_around(inner, attributes=1 | legacy_records.TIMESTAMP_TYPE_FLAG)
    with pytest.raises(InvalidBatch) as caught:
        upconvert(claims, log_append_time=True)
    assert caught.value.error == ErrorCode.INVALID_TIMESTAMP
    # A CreateTime topic takes the (wrapper's) timestamp as the producer's.
    assert {ts for ts, _, _ in records_of(upconvert(claims, log_append_time=False))} == {5}


payloads = st.none() | st.binary(max_size=50)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**41), payloads, payloads), min_size=1, max_size=30),
    st.sampled_from(LEGACY_CODECS),
    st.sampled_from([0, 1]),
)
def test_up_then_down_conversion_round_trips(entries: list[Entry], codec: int, magic: int) -> None:
    batch = upconvert(message_set(magic, codec, entries), log_append_time=False)
    back = downconvert(batch, magic, 0)
    expected = [(magic, i, ts if magic else -1, k, v) for i, (ts, k, v) in enumerate(entries)]
    assert decode(b"".join(back.messages)) == expected


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_message_sets_raise_invalid_batch_only(data: st.DataObject) -> None:
    magic = data.draw(st.sampled_from([0, 1]))
    codec = data.draw(st.sampled_from(LEGACY_CODECS))
    raw = bytearray(message_set(magic, codec, ENTRIES[:4]))
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(InvalidBatch):
        upconvert(bytes(raw[:cut]), log_append_time=False)


def test_kafka_pythons_v2_builder_and_ours_agree() -> None:
    rows = [(k, v, ts) for ts, k, v in ENTRIES]
    assert records_of(v2_batch(rows)) == records_of(encode_batch(ENTRIES))


def test_a_v2_batch_after_messages_is_invalid_record() -> None:
    with pytest.raises(InvalidBatch) as caught:
        upconvert(
            message_set(1, Compression.NONE, ENTRIES[:2]) + encode_batch(ENTRIES[:2]),
            log_append_time=False,
        )
    assert caught.value.error == ErrorCode.INVALID_RECORD
