"""Batch reads and writes: df.write.format("herdless") and spark.read.format("herdless")."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from tests.spark.kafka import create_topic, end_offsets, produce

ROWS = 100_000


def test_writer_round_trips_keys_values_and_headers(spark, broker) -> None:
    create_topic(broker.bootstrap, "roundtrip", 4)
    source = spark.range(ROWS).select(
        F.concat(F.lit("k"), F.col("id").cast("string")).cast("binary").alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"),
        F.array(
            F.struct(
                F.lit("id").alias("key"), F.col("id").cast("string").cast("binary").alias("value")
            ),
            F.struct(F.lit("kind").alias("key"), F.lit(b"click").alias("value")),
        ).alias("headers"),
    )
    source.write.format("herdless").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", "roundtrip"
    ).mode("append").save()

    assert sum(end_offsets(broker.bootstrap, "roundtrip", 4).values()) == ROWS
    back = (
        spark.read.format("herdless")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "roundtrip")
        .load()
    )
    rows = back.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        F.col("headers"),
    ).collect()
    assert len(rows) == ROWS
    seen = set()
    for row in rows:
        number = int(row.key[1:])
        assert row.value == f"value-{number}"
        assert [(h.key, bytes(h.value)) for h in row.headers] == [
            ("id", str(number).encode()),
            ("kind", b"click"),
        ]
        seen.add(number)
    assert seen == set(range(ROWS))


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
