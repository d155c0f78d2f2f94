"""Records with headers written by herdless and read back, by herdless and by a real
client's codec (kafka-python's), so that dead letters are what consumers read."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch

from herdless.protocol.record_headers import encode_headed_batch, iter_headed_records
from herdless.protocol.records import iter_batches, parse_header, validate_batch


def test_headers_keys_and_values_round_trip() -> None:
    entries = [
        (1_000, b"k", b"v", [("a", b"1"), ("empty", None)]),
        (1_005, None, None, []),
        (999, b"", b"x" * 300, [("__dlq.errors.offset", b"41")] * 70),
    ]
    batch = memoryview(encode_headed_batch(entries))
    header = parse_header(batch)
    validate_batch(batch, header)
    got = list(iter_headed_records(batch, header))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (0, 1_000, b"k", b"v"),
        (1, 1_005, None, None),
        (2, 999, b"", b"x" * 300),
    ]
    assert got[0].headers == (("a", b"1"), ("empty", None))
    assert got[1].headers == ()
    assert len(got[2].headers) == 70


def test_a_client_reads_the_headers() -> None:
    data = encode_headed_batch([(5, b"k", b"v", [("__dlq.errors.group", b"g")])])
    [(pos, header)] = list(iter_batches(data))
    batch = DefaultRecordBatch(data[pos : pos + header.size])
    [record] = list(batch)
    assert (record.key, record.value) == (b"k", b"v")
    assert list(record.headers) == [("__dlq.errors.group", b"g")]
