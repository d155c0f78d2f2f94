"""Rows per second of a Structured Streaming read from herdless into a count, local[2].

Produces --records records (--value-bytes each, keyed) into a fresh topic on a
fresh herdless broker, then runs

    spark.readStream.format("herdless")...load().groupBy().count()

with Trigger.AvailableNow into the memory sink, and reports:

- batch rows/s: rows read / the summed durations of the micro-batches that read
  them (Spark's own progress reports): the data source's throughput;
- wall rows/s: rows / the time from start() to the query's end, which also pays
  for query start-up and joining the consumer group.

A warm-up query over a small topic runs first so that neither figure pays for
the JVM's and the Python workers' first start.

    python bench/spark_read.py
    python bench/spark_read.py --records 200000 --partitions 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from peers import herdless as herdless_broker


def produce(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"}
    )
    value = b"v" * value_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, f"key-{i}".encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise SystemExit("the broker did not acknowledge every record")


def count_query(spark, bootstrap: str, topic: str, checkpoint: Path, max_per_trigger: int | None):
    reader = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("group.id", f"bench-{topic}")
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    return (
        reader.load()
        .groupBy()
        .count()
        .writeStream.format("memory")
        .queryName(topic.replace("-", "_"))
        .outputMode("complete")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )


def run(spark, bootstrap: str, topic: str, workdir: Path, records: int, max_per_trigger):
    writer = count_query(spark, bootstrap, topic, workdir / f"{topic}-checkpoint", max_per_trigger)
    started = time.monotonic()
    query = writer.start()
    query.awaitTermination()
    wall = time.monotonic() - started
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    counted = spark.sql(f"select * from {topic.replace('-', '_')}").first()[0]
    if counted != records:
        raise SystemExit(f"counted {counted} records, produced {records}")
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    return wall, busy, len(batches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault(
        "SPARK_CONF_DIR", str(Path(__file__).resolve().parent.parent / "tests/spark/conf")
    )
    from pyspark.sql import SparkSession

    import herdless.spark

    with tempfile.TemporaryDirectory() as tmp, herdless_broker(tmp) as bootstrap:
        workdir = Path(tmp)
        print(f"producing {args.records:,} records of {args.value_bytes} bytes ...", flush=True)
        produce(bootstrap, "warmup", args.partitions, 10_000, args.value_bytes)
        produce(bootstrap, "measured", args.partitions, args.records, args.value_bytes)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        herdless.spark.register(spark)
        run(spark, bootstrap, "warmup", workdir, 10_000, None)
        wall, busy, batches = run(
            spark, bootstrap, "measured", workdir, args.records, args.max_offsets_per_trigger
        )
        spark.stop()
    print(
        f"{args.records:,} records, {args.partitions} partitions, local[2], {batches} batch(es)\n"
        f"batch rows/s: {args.records / busy:,.0f}  ({busy:.2f} s in batches)\n"
        f"wall rows/s:  {args.records / wall:,.0f}  ({wall:.2f} s from start() to the end)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
