"""Keyed test records, the check that a consumer got exactly them back, and what is on disk."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from herdless.protocol.records import iter_batches
from tests.support.broker import BrokerProcess


@dataclass(frozen=True)
class Sent:
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def make_records(count: int, *, prefix: str = "", with_headers: bool = True) -> list[Sent]:
    records = []
    for i in range(count):
        key = f"{prefix}key-{i % 997}".encode()
        value = f"{prefix}value-{i}-".encode() + bytes([i % 251]) * (i % 64)
        headers = (("seq", str(i).encode()), ("kind", b"test")) if with_headers else ()
        records.append(Sent(key, value, headers))
    return records


def assert_same_records(sent: list[Sent], received: list[Received]) -> None:
    """Every record came back once, intact, and each partition kept the order sent."""
    assert len(received) == len(sent), f"sent {len(sent)}, received {len(received)}"
    index_of = {(s.key, s.value): i for i, s in enumerate(sent)}
    assert len(index_of) == len(sent), "test data must be unique"
    by_partition: dict[int, list[Received]] = defaultdict(list)
    for record in received:
        by_partition[record.partition].append(record)
    seen: set[int] = set()
    partition_of_key: dict[bytes | None, int] = {}
    for partition, records in by_partition.items():
        offsets = [r.offset for r in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), (
            f"partition {partition}: offsets out of order or repeated"
        )
        order = []
        for record in records:
            i = index_of.get((record.key, record.value))
            assert i is not None, f"unexpected record {record}"
            assert record.headers == sent[i].headers, f"headers differ for record {i}"
            assert partition_of_key.setdefault(record.key, partition) == partition, (
                f"key {record.key!r} landed in two partitions"
            )
            order.append(i)
            seen.add(i)
        assert order == sorted(order), f"partition {partition}: records out of produce order"
    assert len(seen) == len(sent)


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(broker: BrokerProcess, topic: str) -> set[str]:
    """The codecs of the batches of `topic` as they lie on the broker's disk."""
    names = {v: k for k, v in CODEC_IDS.items()}
    codecs = set()
    for segment in broker.data_dir.glob(f"{topic}-*/*.log"):
        for _, header in iter_batches(segment.read_bytes()):
            codecs.add(names[header.compression])
    return codecs
