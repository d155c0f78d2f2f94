"""Helpers for streaming tests: start a herdless-to-Parquet query, wait for conditions."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

SINK_SCHEMA = "partition int, offset long, value string"


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def start_to_parquet(
    spark,
    bootstrap: str,
    topic: str,
    group: str,
    out: Path,
    *,
    name: str,
    available_now: bool = False,
    **options: str,
):
    """A query that copies (partition, offset, value) of each record into Parquet.

    Its member joins with the group protocol the source chooses (KIP-848's on
    herdless) unless `options` say otherwise.
    """
    frame = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("group.id", group)
        .options(**options)
        .load()
        .select("partition", "offset", F.col("value").cast("string").alias("value"))
    )
    writer = (
        frame.writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .queryName(name)
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="200 milliseconds")
    )
    return writer.start()


def sunk_values(spark, out: Path) -> list[str]:
    """Values in a Parquet sink, as its commit log shows them (Spark's file sink metadata)."""
    if not (out / "data" / "_spark_metadata").exists():
        return []
    frame = spark.read.schema(SINK_SCHEMA).parquet(str(out / "data"))
    return [row.value for row in frame.select("value").collect()]
