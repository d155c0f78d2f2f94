"""Jobs written for Spark's Kafka source run with only the format name changed, and each of
its options does here what it does there: assign, timestamp starts, per-trigger limits,
the query's progress, and a client id per query in DescribeGroups."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka.partitioner.default import murmur2
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from tests.spark.kafka import committed, create_topic, end_offsets, group_members, produce
from tests.spark.streams import wait_until

ORDERS = 1000
CUSTOMERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace"]


def spark_kafka_pipeline(spark, source: str, bootstrap: str, out: Path):
    """A job written for Spark's Kafka connector, with its options: only `source` is ours.

    Orders stream into Parquet (a capped backlog per micro-batch, run to the end
    with Trigger.AvailableNow); a batch job then writes each customer's count back
    to Kafka and reads it again.
    """
    orders = (
        spark.readStream.format(source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "250")
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        .option("groupIdPrefix", "orders-etl")
        .option("kafkaConsumer.pollTimeoutMs", "30000")
        .option("fetchOffset.numRetries", "3")
        .option("fetchOffset.retryIntervalMs", "10")
        .option("kafka.session.timeout.ms", "10000")
        .option("kafka.max.poll.records", "500")
        .option("kafka.fetch.max.wait.ms", "100")
        .option("kafka.request.timeout.ms", "30000")
        .option("kafka.default.api.timeout.ms", "60000")
        .load()
    )
    query = (
        orders.select(
            F.col("key").cast("string").alias("customer"),
            F.col("value").cast("string").alias("item"),
            F.expr("headers[0].value").cast("string").alias("channel"),
            "partition",
            "offset",
        )
        .writeStream.format("parquet")
        .option("path", str(out / "orders"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    totals = spark.read.parquet(str(out / "orders")).groupBy("customer").count()
    (
        totals.select(F.col("customer").alias("key"), F.col("count").cast("string").alias("value"))
        .write.format(source)
        # Spark's Kafka sink takes append as it takes the default mode; PySpark lets
        # a Python sink be written only in append or overwrite mode (docs/spark.md).
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "totals")
        .option("kafka.acks", "all")
        .option("kafka.linger.ms", "5")
        .option("kafka.enable.idempotence", "true")
        .save()
    )
    back = (
        spark.read.format(source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "totals")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    return query, back


def test_a_job_for_sparks_kafka_source_runs_with_only_the_format_changed(
    spark, broker, tmp_path
) -> None:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "orders", 3)
    create_topic(bootstrap, "totals", 3)
    produce(
        bootstrap,
        "orders",
        ((CUSTOMERS[i % 7].encode(), f"item-{i}".encode(), None) for i in range(ORDERS)),
        headers=[("channel", b"web")],
    )
    # This Spark has no JVM Kafka connector, and Python sources cannot take its name.
    with pytest.raises(AnalysisException, match="KAFKA_DATA_SOURCE_NOT_ENABLED"):
        spark_kafka_pipeline(spark, "kafka", bootstrap, tmp_path / "kafka")

    query, back = spark_kafka_pipeline(spark, "herdless", bootstrap, tmp_path / "herdless")

    assert query.exception() is None
    rows = spark.read.parquet(str(tmp_path / "herdless" / "orders"))
    summary = rows.agg(
        F.count("*").alias("rows"),
        F.countDistinct("partition", "offset").alias("records"),
        F.sum(F.when(F.col("channel") == "web", 0).otherwise(1)).alias("without_header"),
    ).first()
    assert summary.asDict() == {"rows": ORDERS, "records": ORDERS, "without_header": 0}

    # maxOffsetsPerTrigger: the backlog came in batches of at most 250 records.
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in batches] == [250, 250, 250, 250]
    # Each batch's offsets and lag are in the query's progress, as with Spark's source.
    first, last = batches[0]["sources"][0], batches[-1]["sources"][0]
    latest = json.loads(first["latestOffset"])
    assert sum(latest["offsets"]["orders"].values()) == ORDERS
    assert latest["maxOffsetsBehindLatest"] > 0 and latest["minOffsetsBehindLatest"] >= 0
    read = json.loads(first["endOffset"])["offsets"]["orders"]
    assert sum(read.values()) == 250 and first["numInputRows"] == 250
    assert json.loads(last["endOffset"])["offsets"] == latest["offsets"]
    assert json.loads(last["latestOffset"])["avgOffsetsBehindLatest"] == 0

    # Without kafka.group.id a query reads every partition itself and joins no group.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    groups = admin.list_consumer_groups().result(10).valid
    assert [g.group_id for g in groups if g.group_id.startswith(("orders", "spark"))] == []

    # The sink partitions keys as Java's producer does, as Spark's Kafka sink would.
    counted = {bytes(r.key).decode(): (r.partition, int(r.value)) for r in back.collect()}
    assert counted == {
        name: ((murmur2(name.encode()) & 0x7FFFFFFF) % 3, ORDERS // 7 + (i < ORDERS % 7))
        for i, name in enumerate(CUSTOMERS)
    }


def _stream_to_the_end(spark, name: str, **options: str) -> list[tuple[int, int]]:
    """(partition, offset) of what a Trigger.AvailableNow stream with `options` read."""
    query = (
        spark.readStream.format("herdless")
        .options(**options)
        .load()
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.table(name).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


def test_assign_reads_the_named_partitions_without_joining_a_group(spark, broker) -> None:
    bootstrap, topic = broker.bootstrap, "assigned"
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, ((None, f"{p}-{i}".encode(), p) for p in range(3) for i in range(30)))

    streamed = _stream_to_the_end(
        spark,
        "assigned",
        **{
            "kafka.bootstrap.servers": bootstrap,
            "assign": json.dumps({topic: [0, 2]}),
            "startingOffsets": "earliest",
            "kafka.group.id": "assign-lag",
        },
    )
    assert streamed == [(p, i) for p in (0, 2) for i in range(30)]
    # The group has the query's offsets (its lag shows) but no member: nobody joined.
    assert committed(bootstrap, "assign-lag", topic, 3) == {0: 30, 2: 30}
    assert group_members(bootstrap, "assign-lag") == []

    batch = (
        spark.read.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({topic: [1]}))
        .load()
    )
    assert sorted(r.value.decode() for r in batch.collect()) == sorted(f"1-{i}" for i in range(30))


BASE_MS = 1_700_000_000_000


def _stamped(spark, broker, **options: str):
    return sorted(
        (r.partition, r.offset)
        for r in spark.read.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "stamped")
        .options(**options)
        .load()
        .collect()
    )


def test_reads_start_and_end_at_timestamps(spark, broker) -> None:
    create_topic(broker.bootstrap, "stamped", 2)
    # Record i of each partition is stamped BASE_MS + i seconds.
    produce(
        broker.bootstrap,
        "stamped",
        ((None, b"x", p) for p in range(2) for _ in range(20)),
        timestamp=lambda n: BASE_MS + (n % 20) * 1000,
    )
    at = {p: [(p, i) for i in range(20)] for p in range(2)}
    assert _stamped(spark, broker, startingTimestamp=str(BASE_MS + 10_000)) == (
        at[0][10:] + at[1][10:]
    )
    assert _stamped(spark, broker, endingTimestamp=str(BASE_MS + 3000)) == at[0][:3] + at[1][:3]
    per_partition = _stamped(
        spark,
        broker,
        startingOffsetsByTimestamp=json.dumps({"stamped": {"0": BASE_MS + 15_000, "1": BASE_MS}}),
        endingOffsetsByTimestamp=json.dumps(
            {"stamped": {"0": BASE_MS + 18_000, "1": BASE_MS + 5000}}
        ),
    )
    assert per_partition == at[0][15:18] + at[1][:5]

    future = str(BASE_MS + 10**9)
    with pytest.raises(Exception, match="no record of stamped-0 has a timestamp at or after"):
        _stamped(spark, broker, startingTimestamp=future)
    assert (
        _stamped(
            spark, broker, startingTimestamp=future, startingOffsetsByTimestampStrategy="latest"
        )
        == []
    )

    streamed = _stream_to_the_end(
        spark,
        "stamped_stream",
        **{
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": "stamped",
            "startingTimestamp": str(BASE_MS + 12_000),
        },
    )
    assert streamed == at[0][12:] + at[1][12:]


def _trigger_time(progress: dict) -> float:
    return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()


def test_min_offsets_per_trigger_waits_for_enough_records_or_max_trigger_delay(
    spark, broker, tmp_path
) -> None:
    bootstrap, topic = broker.bootstrap, "trickle"
    create_topic(bootstrap, topic, 1)
    query = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("minOffsetsPerTrigger", "50")
        .option("maxTriggerDelay", "5s")
        .load()
        .writeStream.format("memory")
        .queryName("trickle")
        .option("checkpointLocation", str(tmp_path))
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def batches() -> list[dict]:
        return [p for p in query.recentProgress if p["numInputRows"] > 0]

    try:
        # The first trigger of a run never waits; it finds the topic empty.
        wait_until(lambda: query.lastProgress, 60, "the query's first batch")
        produce(bootstrap, topic, ((None, b"early", 0) for _ in range(10)))
        time.sleep(1.5)
        assert batches() == [], "10 records should wait for minOffsetsPerTrigger (50)"
        produce(bootstrap, topic, ((None, b"more", 0) for _ in range(40)))
        enough = wait_until(batches, 30, "a batch once 50 records are there")
        assert [p["numInputRows"] for p in enough] == [50]

        produce(bootstrap, topic, ((None, b"late", 0) for _ in range(5)))
        wait_until(lambda: len(batches()) == 2, 30, "the last 5 records after maxTriggerDelay")
        late = batches()[1]
        assert late["numInputRows"] == 5
        # Too few records: the batch waited for maxTriggerDelay since the previous one.
        assert _trigger_time(late) - _trigger_time(enough[0]) >= 4.5
    finally:
        query.stop()
    assert query.exception() is None


def test_each_query_has_its_own_client_id_in_describe_groups(spark, broker, tmp_path) -> None:
    bootstrap, topic, group = broker.bootstrap, "two-ids", "two-queries"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, ((None, b"r", p) for p in range(2) for _ in range(10)))
    queries = [
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.group.id", group)
        .option("kafka.session.timeout.ms", "6000")
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("noop")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(processingTime="200 milliseconds")
        .start()
        for name in ("first", "second")
    ]
    try:
        members = wait_until(
            lambda: (lambda m: m if sorted(len(p) for _, p in m) == [1, 1] else None)(
                group_members(bootstrap, group)
            ),
            60,
            "two members with a partition each",
        )
        wait_until(lambda: all(q.lastProgress for q in queries), 60, "a batch of each query")
        reported = [
            json.loads(q.lastProgress["sources"][0]["latestOffset"])["clientId"] for q in queries
        ]
        wait_until(
            lambda: committed(bootstrap, group, topic, 2) == end_offsets(bootstrap, topic, 2),
            30,
            "both queries to commit what they read",
        )
    finally:
        for query in queries:
            query.stop()
    # Two queries of one group: DescribeGroups tells them apart, and each query's
    # progress names its own member.
    assert len(set(reported)) == 2
    assert sorted(client for client, _ in members) == sorted(reported)
    assert all(client.startswith("herdless-spark-") for client in reported)
