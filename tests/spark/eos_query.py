"""A streaming query that copies one topic's values into another through the exactly-once
sink, run as its own process so that a test can SIGKILL its driver (eos_kills.py).

    python tests/spark/eos_query.py BOOTSTRAP INPUT OUTPUT CHECKPOINT [--available-now]
        [--max-offsets N] [--kill-worker-in-batch B --attempts-log FILE]

It prints "started" once the query runs. --kill-worker-in-batch SIGKILLs the
Python worker of the first attempt of task 0 of batch B halfway through its
rows, so that Spark retries the task (the master allows 4 attempts a task);
every attempt is logged as "batch partition attempt".
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pyarrow as pa

CONF_DIR = Path(__file__).parent / "conf"


def kill_first_attempt(
    batch_id: int, attempts_log: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    context = TaskContext.get()
    batch = int(context.getLocalProperty("streaming.sql.batchId"))
    partition, attempt = context.partitionId(), context.attemptNumber()
    with open(attempts_log, "a") as log:
        log.write(f"{batch} {partition} {attempt}\n")
    doomed = batch == batch_id and partition == 0 and attempt == 0
    rows = [row for batch_rows in batches for row in batch_rows.to_pylist()]
    half = len(rows) // 2 if doomed else len(rows)
    if half:
        yield pa.RecordBatch.from_pylist(rows[:half], schema=pa.schema([("value", pa.binary())]))
    if doomed:
        time.sleep(1.0)  # let the sink produce the first half inside its transaction
        os.kill(os.getpid(), signal.SIGKILL)
    if rows[half:]:
        yield pa.RecordBatch.from_pylist(rows[half:], schema=pa.schema([("value", pa.binary())]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bootstrap")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("checkpoint")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-offsets", type=int, default=200)
    parser.add_argument("--kill-worker-in-batch", type=int, default=None)
    parser.add_argument("--attempts-log", default=None)
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["SPARK_CONF_DIR"] = str(CONF_DIR)
    from pyspark.sql import SparkSession

    import herdless.spark

    spark = (
        SparkSession.builder.master("local[2,4]")  # a failed task is tried up to 4 times
        .appName("herdless-eos-query")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", str(Path(args.checkpoint).parent / "spark-local"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    herdless.spark.register(spark)
    frame = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
        .select("value")
    )
    if args.kill_worker_in_batch is not None:
        frame = frame.mapInArrow(
            partial(kill_first_attempt, args.kill_worker_in_batch, args.attempts_log),
            "value binary",
        )
    writer = (
        frame.writeStream.format("herdless")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("transactionalIdPrefix", "eos-copy")
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="100 milliseconds")
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    if query.exception() is not None:
        print(f"failed: {query.exception()}", flush=True)
        sys.exit(1)
    spark.stop()


if __name__ == "__main__":
    main()
