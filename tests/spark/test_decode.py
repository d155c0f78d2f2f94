"""The bulk decoder against per-record decoders, on fetch answers built with kafka-python.

kafka-python's DefaultRecordBatch and herdless's own iter_records read a batch one
record at a time; decode_records must give exactly their rows, in Arrow, for any
answer: every codec, headers, null and empty keys and values, compaction's gaps,
LogAppendTime, control batches and aborted transactions, a torn last batch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.util import encode_varint

from herdless.protocol.records import InvalidBatch, iter_records, parse_header
from herdless.spark.decode import AbortedTransaction, _varints, decode_records, next_offset
from herdless.spark.schema import arrow_schema
from tests.spark.record_batches import (
    ABORT,
    CODECS,
    COMMIT,
    TRANSACTIONAL,
    Record,
    build_batch,
    control_batch,
)


def per_record_rows(batch: bytes) -> list[dict]:
    """A batch's rows as kafka-python reads them, checked against herdless's own reader."""
    decoded = list(DefaultRecordBatch(batch))
    header = parse_header(batch)
    ours = list(iter_records(memoryview(batch), header))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in ours] == [
        (r.offset, r.timestamp, r.key, r.value) for r in decoded
    ]
    return [
        {
            "key": r.key,
            "value": r.value,
            "offset": r.offset,
            "timestamp": r.timestamp * 1000,
            "timestampType": r.timestamp_type,
            "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
        }
        for r in decoded
    ]


def rows_of(batch: pa.RecordBatch | None, topic: str = "t", partition: int = 3) -> list[dict]:
    if batch is None:
        return []
    assert batch.schema == arrow_schema("headers" in batch.schema.names)
    table = batch.to_pydict()
    assert set(table["topic"]) <= {topic} and set(table["partition"]) <= {partition}
    stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
    names = ["key", "value", "offset", "timestampType", "headers"]
    return [
        {**{name: table[name][i] for name in names if name in table}, "timestamp": stamps[i]}
        for i in range(batch.num_rows)
    ]


# -- strategies -----------------------------------------------------------------------------

fields = st.one_of(
    st.none(),
    st.binary(max_size=70),  # lengths across the one-byte varint limit (63)
    st.integers(8180, 8200).map(lambda n: b"x" * n),  # record lengths of two varint bytes and three
    # Lengths 64 apart: two-byte length prefixes whose first bytes are equal.
    st.sampled_from([70, 134, 198]).map(lambda n: b"y" * n),
)
headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3)
records = st.builds(
    Record,
    offset_gap=st.sampled_from([0, 0, 0, 1, 5, 200]),
    timestamp=st.integers(-1, 2**41),
    key=fields,
    value=fields,
    headers=st.one_of(st.just([]), headers),
)


@dataclass
class Answer:
    """A Fetch answer's records with what a reader must return from it."""

    records: bytes
    aborted: list[AbortedTransaction]
    committed_rows: list[dict]  # read_committed
    all_rows: list[dict]  # read_uncommitted
    after_last_batch: int | None  # None: no whole batch


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    """Batches of plain and transactional producers, interleaved, some transactions aborted."""
    offset = draw(st.integers(0, 2**40))
    parts: list[bytes] = []
    aborted: list[AbortedTransaction] = []
    open_transactions: dict[int, tuple[int, list[list[dict]]]] = {}
    committed: list[list[dict]] = []
    every: list[list[dict]] = []
    after_last_batch = None
    for _ in range(draw(st.integers(0, 10))):
        action = draw(st.sampled_from(["plain", "transaction", "transaction", "end", "end"]))
        producer = draw(st.integers(1, 2))
        if action == "end":
            if producer not in open_transactions:
                continue
            first, batches = open_transactions.pop(producer)
            kind = draw(st.sampled_from([ABORT, COMMIT]))
            if kind == ABORT:
                aborted.append(AbortedTransaction(producer, first))
            else:
                committed.extend(batches)
            parts.append(control_batch(offset, producer, kind))
            offset = after_last_batch = offset + 1
            continue
        # Runs of records alike, as fixed-format producers write them.
        runs = draw(st.lists(st.tuples(records, st.sampled_from([1, 1, 2, 50])), max_size=5))
        batch_records = [record for record, repeat in runs for _ in range(repeat)]
        # The cleaner may empty a batch and keep it: its offsets stay taken.
        tail_gap = draw(st.sampled_from([0, 0, 3])) or (0 if batch_records else 1)
        batch = build_batch(
            offset,
            batch_records,
            draw(st.sampled_from(CODECS)),
            TRANSACTIONAL if action == "transaction" else 0,
            producer if action == "transaction" else -1,
            tail_gap,
            draw(st.none() | st.integers(0, 2**41)),
        )
        parts.append(batch)
        rows = per_record_rows(batch)
        every.append(rows)
        if action == "transaction":
            open_transactions.setdefault(producer, (offset, []))[1].append(rows)
        else:
            committed.append(rows)
        after_last_batch = parse_header(batch).last_offset + 1
        # A whole batch the cleaner removed, sometimes.
        offset = after_last_batch + draw(st.sampled_from([0, 0, 7]))
    for _, batches in open_transactions.values():
        # Still open at the end of what was fetched: its decision lies past the answer.
        committed.extend(batches)
    # A batch the answer's byte limit cut short: left for the next fetch.
    torn = build_batch(offset, [Record(0, 0, b"k", b"v" * 50, [])])
    parts.append(torn[: draw(st.integers(0, len(torn) - 1))])
    in_order = sorted  # rows are compared in offset order
    return Answer(
        b"".join(parts),
        aborted,
        in_order((r for rows in committed for r in rows), key=lambda r: r["offset"]),
        in_order((r for rows in every for r in rows), key=lambda r: r["offset"]),
        after_last_batch,
    )


# -- the property ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(answers(), st.data())
def test_bulk_decoding_equals_per_record_decoding(answer: Answer, data: st.DataObject) -> None:
    offsets = [r["offset"] for r in answer.all_rows]
    low = min(offsets, default=0)
    start = data.draw(st.integers(max(low - 2, 0), (max(offsets, default=0) + 2)))
    until = data.draw(st.integers(start, start + 40) | st.just(2**62))
    read_committed = data.draw(st.booleans())
    with_headers = data.draw(st.booleans())

    decoded = decode_records(
        answer.records,
        "t",
        3,
        start,
        until,
        with_headers,
        answer.aborted if read_committed else None,
    )

    expected = answer.committed_rows if read_committed else answer.all_rows
    expected = [r for r in expected if start <= r["offset"] < until]
    if not with_headers:
        expected = [{k: v for k, v in r.items() if k != "headers"} for r in expected]
    assert rows_of(decoded) == expected
    if answer.after_last_batch is None:
        assert next_offset(answer.records, start) == start
    else:
        assert next_offset(answer.records, start) == max(start, answer.after_last_batch)


# -- examples -------------------------------------------------------------------------------


def plain(offset: int, count: int, **options) -> bytes:
    return build_batch(
        offset,
        [Record(0, 1_700_000_000_000 + i, b"k%d" % i, b"v", []) for i in range(count)],
        **options,
    )


def test_an_empty_answer_has_no_rows_and_stays_put() -> None:
    assert decode_records(b"", "t", 3, 17, 100, True, []) is None
    assert next_offset(b"", 17) == 17


def test_an_answer_of_markers_only_moves_on_without_rows() -> None:
    marker = control_batch(40, 1, COMMIT)
    assert decode_records(marker, "t", 3, 40, 100, True, []) is None
    assert next_offset(marker, 40) == 41


def test_an_aborted_transaction_is_skipped_until_its_marker_and_no_further() -> None:
    records = (
        build_batch(0, [Record(0, 1, b"a", b"1", [])], attributes=TRANSACTIONAL, producer_id=7)
        + plain(1, 1)
        + control_batch(2, 7, ABORT)
        + build_batch(3, [Record(0, 1, b"b", b"2", [])], attributes=TRANSACTIONAL, producer_id=7)
        + control_batch(4, 7, COMMIT)
    )
    committed = decode_records(records, "t", 3, 0, 10, False, [AbortedTransaction(7, 0)])
    assert committed.column("offset").to_pylist() == [1, 3]
    assert next_offset(records, 0) == 5
    uncommitted = decode_records(records, "t", 3, 0, 10, False, None)
    assert uncommitted.column("offset").to_pylist() == [0, 1, 3]


def test_null_and_empty_stay_apart() -> None:
    records = build_batch(
        0, [Record(0, 5, None, b"", []), Record(0, 5, b"", None, [("h", None), ("", b"")])]
    )
    rows = decode_records(records, "t", 3, 0, 10, True, None).to_pydict()
    assert rows["key"] == [None, b""]
    assert rows["value"] == [b"", None]
    assert rows["headers"] == [None, [{"key": "h", "value": None}, {"key": "", "value": b""}]]


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:61] + b"\x7f" + b[62:],  # first record's length runs past the batch
        lambda b: b[:57] + struct.pack(">i", 9) + b[61:],  # more records than the batch holds
        lambda b: b[:57] + struct.pack(">i", 2**31 - 1) + b[61:],  # far more
        lambda b: b[:16] + b"\x01" + b[17:],  # an old message format
    ],
)
def test_damaged_batches_raise_invalid_batch(damage) -> None:
    with pytest.raises(InvalidBatch):
        decode_records(damage(plain(0, 8)), "t", 3, 0, 10, True, None)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_damage_is_invalid_batch_or_rows_never_a_crash(data: st.DataObject) -> None:
    batch = bytearray(
        build_batch(
            0,
            [Record(0, 9, b"key", b"value" * i, [("h", b"x")] * (i % 3)) for i in range(6)],
            codec=data.draw(st.sampled_from(CODECS)),
        )
    )
    position = data.draw(st.integers(0, len(batch) - 1))
    batch[position] ^= data.draw(st.integers(1, 255))
    try:
        decoded = decode_records(bytes(batch), "t", 3, 0, 2**62, True, None)
    except InvalidBatch:
        return
    if decoded is not None:
        decoded.validate(full=True)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50))
def test_varints_of_every_width_read_back(values: list[int]) -> None:
    encoded = bytearray()
    positions = []
    for value in values:
        positions.append(len(encoded))
        encode_varint(value, encoded.append)
    data = np.frombuffer(bytes(encoded), np.uint8)
    decoded, sizes = _varints(data, np.array(positions, np.int64))
    assert decoded.tolist() == values
    assert (np.array(positions) + sizes).tolist() == positions[1:] + [len(encoded)]
