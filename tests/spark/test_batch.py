"""Batch reads and writes, and the streaming writer: spark.read / df.write / df.writeStream."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from tests.spark.kafka import create_topic, end_offsets, produce

ROWS = 100_000


def _source(spark, rows: int):
    """Rows whose key names an id from which value and headers can be checked."""
    return spark.range(rows).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).cast("binary").alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"),
        F.array(
            F.struct(
                F.lit("id").alias("key"), F.col("id").cast("string").cast("binary").alias("value")
            ),
            F.struct(F.lit("kind").alias("key"), F.lit(b"click").alias("value")),
        ).alias("headers"),
    )


def _assert_round_trip(back, rows: int) -> None:
    """Every record checked, in Spark: the key gives the id, the id gives value and headers."""
    checked = back.select(
        F.expr("cast(substring(cast(key as string), 2) as bigint)").alias("id"),
        F.col("value").cast("string").alias("value"),
        "headers",
    ).select(
        "id",
        (
            (F.col("value") == F.concat(F.lit("value-"), F.col("id").cast("string")))
            & (
                F.col("headers")
                == F.array(
                    F.struct(
                        F.lit("id").alias("key"),
                        F.col("id").cast("string").cast("binary").alias("value"),
                    ),
                    F.struct(F.lit("kind").alias("key"), F.lit(b"click").alias("value")),
                )
            )
        ).alias("intact"),
    )
    summary = checked.agg(
        F.count("*").alias("rows"),
        F.countDistinct("id").alias("ids"),
        F.min("id").alias("low"),
        F.max("id").alias("high"),
        F.sum(F.when(F.col("intact"), 0).otherwise(1)).alias("damaged"),
    ).first()
    assert summary.asDict() == {"rows": rows, "ids": rows, "low": 0, "high": rows - 1, "damaged": 0}


def _read(spark, bootstrap: str, topic: str):
    return (
        spark.read.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )


def test_writer_round_trips_keys_values_and_headers(spark, broker) -> None:
    create_topic(broker.bootstrap, "roundtrip", 4)
    _source(spark, ROWS).write.format("herdless").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).option("topic", "roundtrip").mode("append").save()

    assert sum(end_offsets(broker.bootstrap, "roundtrip", 4).values()) == ROWS
    _assert_round_trip(_read(spark, broker.bootstrap, "roundtrip"), ROWS)


def test_writer_honours_a_partition_column(spark, broker) -> None:
    create_topic(broker.bootstrap, "placed", 3)
    spark.range(30).selectExpr(
        "cast(id as string) as value", "cast(id % 3 as int) as partition"
    ).write.format("herdless").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", "placed"
    ).mode("append").save()
    rows = _read(spark, broker.bootstrap, "placed").select("partition", "value").collect()
    assert sorted((r.partition, int(r.value)) for r in rows) == sorted(
        (i % 3, i) for i in range(30)
    )


def test_stream_writer_copies_a_topic_with_keys_values_and_headers(spark, broker, tmp_path) -> None:
    create_topic(broker.bootstrap, "copy-from", 2)
    create_topic(broker.bootstrap, "copy-to", 3)
    _source(spark, 5000).write.format("herdless").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).option("topic", "copy-from").mode("append").save()
    query = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "copy-from")
        .option("group.id", "copier")
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers")
        .writeStream.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "copy-to")
        .option("checkpointLocation", str(tmp_path))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    _assert_round_trip(_read(spark, broker.bootstrap, "copy-to"), 5000)


def test_batch_read_between_json_offsets(spark, broker) -> None:
    create_topic(broker.bootstrap, "ranges", 2)
    produce(
        broker.bootstrap,
        "ranges",
        ((None, f"{p}-{i}".encode(), p) for p in (0, 1) for i in range(50)),
    )
    frame = (
        spark.read.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "ranges")
        .option("startingOffsets", json.dumps({"ranges": {"0": 10, "1": -2}}))
        .option("endingOffsets", json.dumps({"ranges": {"0": 20, "1": -1}}))
        .option("includeHeaders", "true")
        .load()
    )
    rows = frame.select("partition", "offset", F.col("value").cast("string").alias("v")).collect()
    got = sorted((r.partition, r.offset, r.v) for r in rows)
    assert got == [(0, i, f"0-{i}") for i in range(10, 20)] + [(1, i, f"1-{i}") for i in range(50)]
    schema = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert schema == {
        "key": "binary",
        "value": "binary",
        "topic": "string",
        "partition": "int",
        "offset": "bigint",
        "timestamp": "timestamp",
        "timestampType": "int",
        "headers": "array<struct<key:string,value:binary>>",
    }


def test_headers_are_left_out_unless_include_headers(spark, broker) -> None:
    create_topic(broker.bootstrap, "headless", 1)
    produce(broker.bootstrap, "headless", [(b"k", b"v", 0)], headers=[("h", b"1")])
    frame = (
        spark.read.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "headless")
        .load()
    )
    assert "headers" not in frame.columns  # Spark's default: includeHeaders=false
    assert [(bytes(r.key), bytes(r.value)) for r in frame.collect()] == [(b"k", b"v")]


def test_subscribe_pattern_reads_every_matching_topic(spark, broker) -> None:
    for name in ("pattern-a", "pattern-b", "other-c"):
        create_topic(broker.bootstrap, name, 1)
        produce(broker.bootstrap, name, [(None, name.encode(), 0)])
    frame = (
        spark.read.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribePattern", "pattern-.*")
        .load()
    )
    assert sorted(r.topic for r in frame.select("topic").collect()) == ["pattern-a", "pattern-b"]


def test_min_partitions_and_max_records_per_partition_split_the_read(spark, broker) -> None:
    create_topic(broker.bootstrap, "split", 1)
    produce(broker.bootstrap, "split", ((None, b"%d" % i, 0) for i in range(100)))
    for options, tasks in (({"minPartitions": "4"}, 4), ({"maxRecordsPerPartition": "30"}, 4)):
        frame = (
            spark.read.format("herdless")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "split")
            .options(**options)
            .load()
        )
        assert frame.rdd.getNumPartitions() == tasks
        assert sorted(r.offset for r in frame.select("offset").collect()) == list(range(100))
