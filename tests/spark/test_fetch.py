"""Executors' reads without Spark: the bulk path against librdkafka's, and the fetch loop."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from herdless.protocol.errors import ErrorCode
from herdless.spark import fetch
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.fetch import fetch_range, read_range
from herdless.spark.offsets import OffsetRange
from herdless.spark.options import ClientOptions
from herdless.spark.rdkafka_fetch import read_range_rdkafka
from herdless.spark.wire import READ_COMMITTED, FetchedPartition, WireError
from tests.spark.kafka import create_topic, produce
from tests.spark.record_batches import Record, build_batch
from tests.support.broker import free_port

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
RECORDS = 3000


def _produce(bootstrap: str, topic: str, codec: str, config: dict[str, str]) -> None:
    create_topic(bootstrap, topic, 1, config)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20}
    )
    for i in range(RECORDS):
        key = None if i % 7 == 0 else b"" if i % 7 == 1 else b"key-%d" % i
        value = None if i % 11 == 0 else b"" if i % 11 == 1 else b"value-%d " % i * (i % 40)
        headers = [("id", b"%d" % i), ("none", None), ("", b"")] if i % 3 == 0 else None
        producer.produce(topic, value, key, headers=headers, timestamp=1_700_000_000_000 + i)
        if i % 500 == 0:
            producer.flush(30)
    assert producer.flush(30) == 0


def _table(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches)).combine_chunks()


@pytest.mark.parametrize(
    ("codec", "config"),
    [(c, {}) for c in CODECS] + [("lz4", {"message.timestamp.type": "LogAppendTime"})],
)
def test_bulk_reads_give_exactly_what_librdkafka_gives(broker, codec, config) -> None:
    topic = f"same-{codec}-{len(config)}"
    _produce(broker.bootstrap, topic, codec, config)
    connection = ClientOptions(broker.bootstrap, {}, 10.0)
    for start, until, headers in [(0, RECORDS, True), (5, RECORDS - 7, True), (0, 1, False)]:
        offsets = OffsetRange(topic, 0, start, until)
        bulk = _table(read_range(connection, offsets, 30.0, headers))
        reference = _table(read_range_rdkafka(connection, offsets, 30.0, headers))
        assert bulk.num_rows == until - start
        assert bulk.to_pydict() == reference.to_pydict()
        assert bulk.schema == reference.schema


def test_a_dead_bootstrap_server_is_passed_over_and_the_leader_found(broker) -> None:
    topic = "bootstrap-list"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(b"k", b"v%d" % i, 0) for i in range(5)])
    # The broker calls itself 127.0.0.1: asked as localhost, the reader connects to the
    # leader by the name the metadata gives, as it must when the leader is another broker.
    alias = broker.bootstrap.replace("127.0.0.1", "localhost")
    connection = ClientOptions(f"127.0.0.1:{free_port()},{alias}", {}, 5.0)
    rows = _table(read_range(connection, OffsetRange(topic, 0, 1, 4), 10.0, False))
    assert rows.column("value").to_pylist() == [b"v1", b"v2", b"v3"]


def test_tls_and_sasl_connections_read_through_librdkafka(monkeypatch) -> None:
    taken = []
    monkeypatch.setattr(fetch, "read_range_rdkafka", lambda *args: taken.append(args) or iter([]))
    secured = ClientOptions("127.0.0.1:1", {"security.protocol": "SASL_SSL"}, 1.0)
    assert list(read_range(secured, OffsetRange("t", 0, 0, 5), 1.0, True)) == []
    assert len(taken) == 1


def test_an_unknown_isolation_level_is_named() -> None:
    connection = ClientOptions("127.0.0.1:1", {"isolation.level": "read_dirty"}, 1.0)
    with pytest.raises(HerdlessSparkError, match="kafka.isolation.level is 'read_dirty'"):
        list(read_range(connection, OffsetRange("t", 0, 0, 5), 1.0, True))


def test_a_broker_that_is_down_fails_the_read_naming_its_address() -> None:
    address = f"127.0.0.1:{free_port()}"
    connection = ClientOptions(address, {}, 0.5)
    began = time.monotonic()
    with pytest.raises(HerdlessSparkError, match=f"is the broker at {address} up"):
        list(read_range(connection, OffsetRange("t", 0, 0, 5), 1.0, True))
    assert time.monotonic() - began < 10


# -- the loop, against scripted answers -------------------------------------------------------


class ScriptedFetcher:
    """Answers fetches from a script: a FetchedPartition, or an exception to raise."""

    def __init__(self, *answers: FetchedPartition | Exception) -> None:
        self.answers = list(answers)
        self.asked: list[int] = []
        self.in_flight = 0
        self.resets = 0

    def send_fetch(self, offset: int, max_wait_ms: int, max_bytes: int) -> None:
        self.asked.append(offset)
        self.in_flight += 1

    def receive_fetch(self) -> FetchedPartition:
        assert self.in_flight > 0
        self.in_flight -= 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def reset(self) -> None:
        self.in_flight = 0
        self.resets += 1


def _answer(records: bytes = b"", error: int = 0, end: int = 10) -> FetchedPartition:
    return FetchedPartition(error, end, end, None, records)


def _batch(base_offset: int, count: int, last_offset_delta: int | None = None) -> bytes:
    records = [Record(0, 1, b"k", b"v", []) for _ in range(count)]
    gap = 0 if last_offset_delta is None else last_offset_delta - (count - 1)
    return build_batch(base_offset, records, tail_gap=gap)


def _read(fetcher: ScriptedFetcher, start: int, until: int, poll_timeout_s: float = 5.0):
    offsets = OffsetRange("t", 0, start, until)
    batches = fetch_range(fetcher, offsets, poll_timeout_s, False, READ_COMMITTED, "b:9092")
    return [o for b in batches for o in b.column("offset").to_pylist()]


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch) -> None:
    monkeypatch.setattr(fetch, "RETRY_BACKOFF_S", 0.01)


def test_a_range_past_the_end_of_the_log_stops_at_the_end() -> None:
    # Planned against a high watermark the log no longer reaches (a new leader's).
    fetcher = ScriptedFetcher(_answer(_batch(0, 3), end=3), _answer(end=3))
    assert _read(fetcher, 0, 10) == [0, 1, 2]
    assert fetcher.asked == [0, 3]


def test_the_next_fetch_is_on_its_way_while_an_answer_is_decoded() -> None:
    fetcher = ScriptedFetcher(_answer(_batch(0, 3), end=6), _answer(_batch(3, 3), end=6))
    batches = fetch_range(fetcher, OffsetRange("t", 0, 0, 6), 5.0, False, READ_COMMITTED, "b")
    first = next(batches)
    assert first.column("offset").to_pylist() == [0, 1, 2]
    assert fetcher.asked == [0, 3] and fetcher.in_flight == 1
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [3, 4, 5]
    assert fetcher.asked == [0, 3]  # nothing asked past the range


def test_an_emptied_batch_moves_the_position_on() -> None:
    fetcher = ScriptedFetcher(_answer(_batch(0, 1, last_offset_delta=4)), _answer(_batch(5, 2)))
    assert _read(fetcher, 0, 7) == [0, 5, 6]
    assert fetcher.asked == [0, 5]


def test_retriable_errors_and_lost_connections_are_retried_with_a_fresh_leader() -> None:
    fetcher = ScriptedFetcher(
        _answer(error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
        WireError("b:9092: connection reset"),
        _answer(_batch(0, 4)),
    )
    assert _read(fetcher, 0, 4) == [0, 1, 2, 3]
    assert fetcher.resets == 2


def test_offsets_out_of_range_fail_rather_than_skip() -> None:
    fetcher = ScriptedFetcher(_answer(error=ErrorCode.OFFSET_OUT_OF_RANGE))
    with pytest.raises(HerdlessSparkError, match="t-0 offsets 2..8: offset 2 is out of range"):
        _read(fetcher, 2, 8)


def test_other_errors_fail_naming_the_error() -> None:
    fetcher = ScriptedFetcher(_answer(error=29))
    with pytest.raises(HerdlessSparkError, match="TOPIC_AUTHORIZATION_FAILED"):
        _read(fetcher, 0, 8)


def test_a_corrupt_batch_fails_naming_the_partition_and_offset() -> None:
    fetcher = ScriptedFetcher(_answer(_batch(0, 3)[:61] + b"\x7f" + _batch(0, 3)[62:]))
    with pytest.raises(HerdlessSparkError, match="reading t-0 at offset 0: .* corrupt"):
        _read(fetcher, 0, 3)


def test_no_progress_for_the_poll_timeout_fails() -> None:
    fetcher = ScriptedFetcher(*[WireError("b:9092: refused")] * 500)
    with pytest.raises(HerdlessSparkError, match=r"no record of t-0 arrived .*refused"):
        _read(fetcher, 0, 3, poll_timeout_s=0.1)
