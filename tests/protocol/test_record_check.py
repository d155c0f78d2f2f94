"""The bulk check of a produced batch's records (records.check_records) accepts and refuses
exactly what the record-by-record walk does, with the same error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import InvalidBatch, check_records
from tests.protocol.record_walk import walk_check_records


def varint(value: int, width: int | None = None) -> bytes:
    """The zigzag varint of `value`, padded with continuation bytes to `width` when given
    (a reader takes a non-canonical width as the same value)."""
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded > 0x7F or (width is not None and len(out) < width - 1):
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def record(delta: int, timestamp_delta: int, body: bytes, delta_width: int | None) -> bytes:
    inner = b"\x00" + varint(timestamp_delta) + varint(delta, delta_width) + body
    return varint(len(inner)) + inner


def verdict(payload: bytes, count: int) -> tuple[str, ErrorCode] | None:
    """What each check says of the payload; they must say the same."""
    said = []
    for check in (walk_check_records, check_records):
        try:
            check(memoryview(payload), count)
            said.append(None)
        except InvalidBatch as exc:
            said.append((str(exc), exc.error))
    assert said[0] == said[1]
    return said[0]


# Few shapes, so that batches hold long runs of one layout and the places where one ends.
bodies = st.sampled_from([b"\x01\x00\x00", b"\x01" + varint(100) + b"v" * 100 + b"\x00"])
bodies |= st.binary(min_size=0, max_size=12)
timestamp_deltas = st.sampled_from([0, 0, 1, 63, 64, 9000, -1, 1 << 40])
widths = st.sampled_from([None, None, None, None, 2, 3])
# Runs of records of one shape, repeated up to 80 times, then the next shape.
shapes = st.lists(
    st.tuples(st.integers(1, 80), timestamp_deltas, bodies, widths), min_size=1, max_size=8
)


@settings(max_examples=300, deadline=None)
@given(shapes, st.data())
def test_the_bulk_check_says_what_the_walk_says(
    runs: list[tuple[int, int, bytes, int | None]], data: st.DataObject
) -> None:
    specs = [(ts, body, width) for repeat, ts, body, width in runs for _ in range(repeat)]
    payload = bytearray(
        b"".join(record(i, ts, body, width) for i, (ts, body, width) in enumerate(specs))
    )
    for _ in range(data.draw(st.integers(0, 3))):
        if payload:
            at = data.draw(st.integers(0, len(payload) - 1))
            payload[at] ^= data.draw(st.integers(1, 255))
    cut = data.draw(st.sampled_from([0, 0, 0, 1, 2]))
    count = len(specs) + data.draw(st.sampled_from([0, 0, 0, -1, 1]))
    verdict(bytes(payload[: len(payload) - cut]), max(count, 0))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(timestamp_deltas, bodies), min_size=1, max_size=300))
def test_well_formed_records_pass(specs: list[tuple[int, bytes]]) -> None:
    payload = b"".join(record(i, ts, body, None) for i, (ts, body) in enumerate(specs))
    assert verdict(payload, len(specs)) is None


def test_offset_deltas_past_each_varint_width() -> None:
    # Deltas take one varint byte below 64, two below 8192, three from there.
    payload = bytearray(b"".join(record(i, 5, b"\x01\x00\x00", None) for i in range(9000)))
    assert verdict(bytes(payload), 9000) is None
    # A wrong delta deep in a run, in a two-byte and in a three-byte one.
    for bad in (5000, 8500):
        deltas = [i if i != bad else i + 1 for i in range(9000)]
        damaged = b"".join(record(delta, 5, b"\x01\x00\x00", None) for delta in deltas)
        error = verdict(damaged, 9000)
        assert error == ("record offset deltas are not consecutive", ErrorCode.INVALID_RECORD)


@pytest.mark.parametrize("damage_at", [1, 63, 64, 65, 500, 998])
def test_one_bad_record_in_a_long_run(damage_at: int) -> None:
    records_ = [record(i, 0, b"\x01\x00\x00" + b"x" * 1000, None) for i in range(999)]
    # A record whose length claims one byte more than it holds runs into the next one.
    body = records_[damage_at][2:]
    records_[damage_at] = varint(len(body) + 1) + body
    assert verdict(b"".join(records_), 999) is not None
