"""Runs of keys and values read the same records as the one-at-a-time walk."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from herdless.protocol.record_columns import iter_key_value_runs
from herdless.protocol.records import InvalidBatch, build_batch, iter_records, parse_header

# Few shapes, so that batches hold long runs of one layout and the places where one ends.
fields = st.sampled_from(
    [None, b"", b"k", b"group-and-topic-1", b"x" * 70, b"y" * 200]
) | st.binary(max_size=20)
headers = st.lists(st.tuples(st.sampled_from(["h", "trace"]), st.binary(max_size=5)), max_size=2)


def both(data: bytes) -> tuple[list[tuple[bytes | None, bytes | None]], str | None]:
    """What each reader yields before it stops, and why it stopped."""
    view = memoryview(data)
    header = parse_header(view)
    out = []
    for reader in ("walk", "runs"):
        got: list[tuple[bytes | None, bytes | None]] = []
        error = None
        try:
            if reader == "walk":
                got.extend((r.key, r.value) for r in iter_records(view, header))
            else:
                for keys, values in iter_key_value_runs(view, header):
                    assert len(keys) == len(values) > 0
                    got.extend(zip(keys, values, strict=True))
        except InvalidBatch as exc:
            error = str(exc)
        out.append((got, error))
    assert out[0] == out[1]
    return out[0]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(fields, fields, headers, st.integers(0, 3)), min_size=1, max_size=300),
    st.integers(0, 2**41),
    st.sampled_from([0, 0, 1, 4]),
    st.booleans(),
    st.booleans(),
)
def test_runs_read_what_the_walk_reads(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]],
    timestamp: int,
    codec: int,
    spread_timestamps: bool,
    sparse_offsets: bool,
) -> None:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 24)
    offset = 0
    for i, (key, value, record_headers, gap) in enumerate(records):
        builder.append(
            offset,
            timestamp=timestamp + (i * 997 if spread_timestamps else 0),
            key=key,
            value=value,
            headers=record_headers,
        )
        # A compacted batch keeps the offsets of the records it kept.
        offset += 1 + (gap * 50 if sparse_offsets else 0)
    got, error = both(bytes(builder.build()))
    assert error is None
    assert got == [(key, value) for key, value, _, _ in records]


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 200),
    st.data(),
)
def test_a_damaged_batch_fails_where_the_walk_fails(count: int, data: st.DataObject) -> None:
    batch = bytearray(build_batch([(b"key-%03d" % (i % 7), b"value") for i in range(count)], 0))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(61, len(batch) - 1))
        batch[at] = data.draw(st.integers(0, 255))
    both(bytes(batch))


def test_a_dense_commit_is_cut_into_few_runs() -> None:
    # One OffsetCommit of 200 partitions: offset deltas take one varint byte up to 63.
    keys = [b"\x00\x01\x00\x05group\x00\x05topic" + p.to_bytes(4, "big") for p in range(200)]
    data = build_batch([(k, b"v" * 26) for k in keys], 0)
    runs = list(iter_key_value_runs(memoryview(data), parse_header(data)))
    assert [len(k) for k, _ in runs] == [64, 136]
    assert [k for run, _ in runs for k in run] == keys
