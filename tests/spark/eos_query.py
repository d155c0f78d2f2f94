"""A streaming query that copies one topic's values into another through the exactly-once
sink, run as its own process so that a test can SIGKILL its driver (eos_kills.py).

    python -m tests.spark.eos_query BOOTSTRAP INPUT OUTPUT CHECKPOINT [--available-now]
        [--max-offsets N] [--kill-worker-in-batch B --attempts-log FILE]

It prints "started" once the query runs. --kill-worker-in-batch SIGKILLs the
Python worker of the first attempt of task 0 of batch B in the middle of its
rows (a Python UDF's worker), so that Spark retries the task (the master allows 4 attempts a task);
every attempt is logged as "batch partition attempt".
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

CONF_DIR = Path(__file__).parent / "conf"
# Of the 1,000 rows of a task in the test: most of them have reached the sink by then.
KILL_AT_ROW = 900


_rows_seen: Counter[tuple[int, int, int]] = Counter()


def kill_first_attempt(batch_id: int, attempts_log: str, value: bytes) -> bytes:
    """The value unchanged; the Python worker of task 0's first attempt in batch `batch_id`
    SIGKILLs itself at row KILL_AT_ROW."""
    from pyspark import TaskContext

    context = TaskContext.get()
    batch = int(context.getLocalProperty("streaming.sql.batchId"))
    attempt = (batch, context.partitionId(), context.attemptNumber())
    if not _rows_seen[attempt]:
        with open(attempts_log, "a") as log:
            log.write(" ".join(map(str, attempt)) + "\n")
    _rows_seen[attempt] += 1
    if attempt == (batch_id, 0, 0) and _rows_seen[attempt] == KILL_AT_ROW:
        time.sleep(3.0)  # let the sink produce the rows so far inside its transaction
        os.kill(os.getpid(), signal.SIGKILL)
    return value


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
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    import herdless.spark

    spark = (
        SparkSession.builder.master("local[2,4]")  # a failed task is tried up to 4 times
        .appName("herdless-eos-query")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Each run is a fresh JVM that lives seconds: compiling with C1 only and one GC
        # thread leaves the two cores to the query (as herdless's ZooKeeper does).
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        # Small Arrow batches reach the sink as they are made: a kill finds records
        # produced inside an open transaction more often.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
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
        doomed = partial(kill_first_attempt, args.kill_worker_in_batch, args.attempts_log)
        frame = frame.select(F.udf(doomed, BinaryType())("value").alias("value"))
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
