"""Count click events per page per minute, from herdless into Parquet, exactly once.

    python examples/clickstream/job.py --output /tmp/clickstream
    python examples/clickstream/job.py --output /tmp/clickstream --available-now

The query joins consumer group `clickstream` (so `herdless groups lag
clickstream` shows how far behind it is) and commits each batch's offsets to
it. Its checkpoint (<output>/checkpoint) is what makes the Parquet output
exactly-once across restarts: stop the job at any moment and start it again
with the same --output.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import herdless.spark

EVENT = "user string, page string, ts long"


def counts_per_page_per_minute(clicks: DataFrame) -> DataFrame:
    events = clicks.select(F.from_json(F.col("value").cast("string"), EVENT).alias("e")).select(
        "e.page", F.timestamp_millis("e.ts").alias("at")
    )
    return (
        # A minute is final once events 30 s younger than its end have arrived.
        events.withWatermark("at", "30 seconds")
        .groupBy(F.window("at", "1 minute").alias("minute"), "page")
        .count()
        .select(
            F.col("minute.start").alias("minute"),
            "page",
            F.col("count").alias("clicks"),
        )
    )


def start(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    group: str,
    output: Path,
    *,
    available_now: bool = False,
    trigger_seconds: float = 5.0,
):
    clicks = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.group.id", group)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50000")
        .load()
    )
    writer = (
        counts_per_page_per_minute(clicks)
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(output / "counts"))
        .option("checkpointLocation", str(output / "checkpoint"))
        .queryName("clickstream")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", "-b", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--group", default="clickstream")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--available-now", action="store_true", help="process the backlog, stop")
    parser.add_argument("--trigger-seconds", type=float, default=5.0)
    args = parser.parse_args()

    # Spark's Python workers must run this interpreter, which has herdless installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("clickstream")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    herdless.spark.register(spark)
    query = start(
        spark,
        args.bootstrap_server,
        args.topic,
        args.group,
        args.output,
        available_now=args.available_now,
        trigger_seconds=args.trigger_seconds,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
