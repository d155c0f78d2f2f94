"""Exactly-once streaming writes (transactionalIdPrefix): a query SIGKILLed and restarted
from its checkpoint, and a task retried inside a batch, leave each input row in the
output once, as a read_committed consumer sees it."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer

from herdless.spark import fetch
from herdless.spark.offsets import OffsetRange
from herdless.spark.options import ClientOptions
from herdless.spark.rdkafka_fetch import read_range_rdkafka
from tests.spark.eos_kills import CopyQuery, check_copy
from tests.spark.kafka import create_topic, end_offsets, produce
from tests.support.exactly_once import read_committed

PARTITIONS = 3
ROWS = 3000
# The suite kills the driver 3 times (each restart is a fresh Spark JVM);
# bench/spark_eos_soak.py does it 20 times or more.
KILLS = 3


def _inputs(bootstrap: str, topic: str, rows: int, size: int = 0) -> list[bytes]:
    create_topic(bootstrap, topic, PARTITIONS)
    values = [f"row-{i}".ljust(size).encode() for i in range(rows)]
    produce(bootstrap, topic, ((None, v, i % PARTITIONS) for i, v in enumerate(values)))
    return values


def test_a_query_killed_at_random_writes_each_row_once(broker, tmp_path: Path) -> None:
    inputs = _inputs(broker.bootstrap, "eos-kill-in", ROWS)
    create_topic(broker.bootstrap, "eos-kill-out", PARTITIONS)
    query = CopyQuery(broker.bootstrap, "eos-kill-in", "eos-kill-out", PARTITIONS, tmp_path)
    rng = random.Random(26)
    for _ in range(KILLS):
        query.run_and_kill(rng)
    # The last run only copies the rest: in one batch rather than a dozen of ~1 s each
    # (the batch it replays keeps the offsets the killed run planned).
    query.run_to_end("--max-offsets", str(ROWS))
    report = check_copy(broker.bootstrap, inputs, "eos-kill-out", PARTITIONS, KILLS)
    print(report)
    assert (report.missing, report.duplicated) == (0, 0), str(report)
    assert report.outputs == ROWS


def test_a_retried_task_writes_its_rows_once(broker, tmp_path: Path) -> None:
    # Values of 1 KB: the Python UDF's worker sends its first hundred results on (past
    # its 64 KB output buffer) before it dies, so the sink has produced some of them.
    inputs = _inputs(broker.bootstrap, "eos-retry-in", 6000, size=1000)
    create_topic(broker.bootstrap, "eos-retry-out", PARTITIONS)
    attempts = tmp_path / "attempts.log"
    query = CopyQuery(broker.bootstrap, "eos-retry-in", "eos-retry-out", PARTITIONS, tmp_path)
    query.run_to_end(
        "--max-offsets", "3000", "--kill-worker-in-batch", "1", "--attempts-log", str(attempts)
    )
    tries = Counter(tuple(line.split()[:2]) for line in attempts.read_text().splitlines())
    assert tries[("1", "0")] == 2, f"task 0 of batch 1 should have run twice: {tries}"
    report = check_copy(broker.bootstrap, inputs, "eos-retry-out", PARTITIONS, 0)
    print(report)
    assert (report.missing, report.duplicated) == (0, 0), str(report)
    assert report.uncommitted > 0, "the killed attempt should have left aborted records"


def test_the_source_reads_only_committed_records(spark, broker) -> None:
    topic = "eos-read-committed"
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "eos-read"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{outcome}-{i}".encode())
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    # A transaction left open: read_committed stops before it.
    producer.begin_transaction()
    producer.produce(topic, b"open")
    producer.flush(30)

    def read(**options: str) -> list[str]:
        frame = (
            spark.read.format("herdless")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .options(**options)
            .load()
        )
        return sorted(row.value.decode() for row in frame.select("value").collect())

    committed = sorted(f"commit-{i}" for i in range(5)) * 2
    assert read() == sorted(committed)
    assert read(**{"kafka.isolation.level": "read_committed"}) == sorted(committed)
    # Executors read plaintext with herdless's own Fetch, TLS and SASL through librdkafka:
    # both stop at the last stable offset and drop aborted records.
    connection = ClientOptions(broker.bootstrap, {}, 10.0)
    stable = end_offsets(broker.bootstrap, topic, 1)[0]  # librdkafka's read_committed end
    for read_range in (fetch.read_range, read_range_rdkafka):
        batches = read_range(connection, OffsetRange(topic, 0, 0, stable), 10.0, False)
        rows = sorted(v.decode() for b in batches for v in b.column("value").to_pylist())
        assert rows == sorted(committed), read_range.__name__
    uncommitted = read(**{"kafka.isolation.level": "read_uncommitted"})
    assert len(uncommitted) == 16 and "open" in uncommitted
    producer.abort_transaction(30)
    assert read_committed(broker.bootstrap, topic, 1)[0].count(b"open") == 0
