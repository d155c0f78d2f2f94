"""Rows per second of a Structured Streaming read from herdless into a count, local[2].

Produces --records records (--value-bytes each, keyed) into a fresh topic on a
fresh herdless broker, then runs, --runs times (each run a new group and
checkpoint, so each reads the whole topic),

    spark.readStream.format("herdless")...load().groupBy().count()

with Trigger.AvailableNow into the memory sink, and reports for each run:

- batch rows/s: rows read / the summed durations of the micro-batches that read
  them (Spark's own progress reports): the data source's throughput;
- wall rows/s: rows / the time from start() to the query's end, which also pays
  for query start-up and joining the consumer group (with the classic group
  protocol, the broker's group.initial.rebalance.delay.ms: 3 s unless
  --rebalance-delay-ms says; the consumer protocol of KIP-848 has no such wait);
- where the wall time went: before the first batch, in batches, after them;
- the CPU seconds each kind of process used from start() to the end (Linux
  only): what bounds a figure on a machine with two cores.

A warm-up query over a smaller topic (--warmup-records) runs first so that no figure pays for the
JVM's and the Python workers' first start. Then, for comparison, the same
query runs over a source whose readers yield Arrow batches of the same rows
built in advance (format "prebuilt"): what Spark itself costs, the most any
Python data source could reach on this machine at this moment.

    python bench/spark_read.py
    python bench/spark_read.py --records 200000 --partitions 2 --runs 1
    python bench/spark_read.py --executor-only   # no Spark: the executors' own CPU, by step
    python bench/spark_read.py --join-only       # no Spark: joining the group, each protocol
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from functools import partial
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

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


def count_query(spark, bootstrap: str, topic: str, name: str, checkpoint: Path, max_per_trigger):
    """The measured query: count a herdless topic's records, in a group of its own."""
    reader = (
        spark.readStream.format("herdless")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("group.id", f"bench-{name}")
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    return count_into_memory(reader.load(), name, checkpoint)


def count_into_memory(frame, name: str, checkpoint: Path):
    """The query every run times: count the rows, Trigger.AvailableNow, memory sink `name`."""
    return (
        frame.groupBy()
        .count()
        .writeStream.format("memory")
        .queryName(name)
        .outputMode("complete")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )


# -- the comparison: rows that cost nothing to make -----------------------------------------


class PrebuiltSource(DataSource):
    """Streams `records` rows shaped like herdless's, from Arrow batches that cost nothing."""

    @classmethod
    def name(cls) -> str:
        return "prebuilt"

    def schema(self):
        from herdless.spark.schema import KAFKA_SCHEMA

        return KAFKA_SCHEMA

    def streamReader(self, schema) -> DataSourceStreamReader:
        return PrebuiltStream(
            int(self.options["records"]),
            int(self.options["partitions"]),
            int(self.options["value_bytes"]),
        )


class PrebuiltStream(DataSourceStreamReader):
    def __init__(self, records: int, partitions: int, value_bytes: int) -> None:
        self.records, self.partition_count, self.value_bytes = records, partitions, value_bytes

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def latestOffset(self) -> dict:
        return {"batch": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(p) for p in range(self.partition_count)] if start != end else []

    def read(self, partition: InputPartition):
        rows = self.records // self.partition_count
        chunk = _prebuilt(min(rows, 60_000), partition.value, self.value_bytes)
        for begin in range(0, rows, chunk.num_rows):
            yield chunk.slice(0, min(chunk.num_rows, rows - begin))

    def commit(self, end: dict) -> None:
        pass


def _prebuilt(rows: int, partition: int, value_bytes: int) -> pa.RecordBatch:
    """Arrow's own repeat and range: a few milliseconds, nothing next to what Spark spends."""
    from herdless.spark.schema import KAFKA_ARROW_SCHEMA

    def repeat(value: object, field: str) -> pa.Array:
        return pa.repeat(pa.scalar(value, KAFKA_ARROW_SCHEMA.field(field).type), rows)

    return pa.RecordBatch.from_arrays(
        [
            repeat(b"key-1234567", "key"),
            repeat(b"v" * value_bytes, "value"),
            repeat("measured", "topic"),
            repeat(partition, "partition"),
            pa.array(range(rows), pa.int64()),
            repeat(1_700_000_000_000_000, "timestamp"),
            repeat(0, "timestampType"),
            pa.nulls(rows, KAFKA_ARROW_SCHEMA.field("headers").type),
        ],
        schema=KAFKA_ARROW_SCHEMA,
    )


def prebuilt_query(spark, name: str, checkpoint: Path, records: int, args) -> object:
    frame = (
        spark.readStream.format("prebuilt")
        .option("records", str(records))
        .option("partitions", str(args.partitions))
        .option("value_bytes", str(args.value_bytes))
        .load()
    )
    return count_into_memory(frame, name, checkpoint)


# -- CPU seconds by kind of process, from /proc ---------------------------------------------

ROLES = {
    "pyspark.worker": "Python read workers",
    "python_streaming_source_runner": "Python planning process",
    "herdless serve": "broker",
}


def _role(argv: str) -> str:
    for needle, role in ROLES.items():
        if needle in argv:
            return role
    if "java" in argv.split(" ")[0]:
        return "Spark JVM"
    return "other Spark Python" if "pyspark" in argv else "this script"


def cpu_by_role() -> dict[str, float]:
    """CPU seconds used so far by this process and its descendants (and the children they
    have reaped), summed by what they are; empty where /proc is not there."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    processes: dict[int, tuple[int, float, str]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # utime, stime, cutime, cstime
        processes[int(entry.name)] = (int(fields[1]), sum(map(int, fields[11:15])) / tick, argv)
    used: dict[str, float] = {}
    frontier = [os.getpid()]
    while frontier:
        pid = frontier.pop()
        if pid in processes:
            _, cpu, argv = processes[pid]
            used[_role(argv)] = used.get(_role(argv), 0.0) + cpu
        frontier += [child for child, (parent, _, _) in processes.items() if parent == pid]
    return used


# -- the executors' share, without Spark ----------------------------------------------------


def executor_profile(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Read the topic as executors do, in this process, writing the batches as Arrow IPC
    as Spark's workers do; the CPU seconds of each step, best of five."""
    from herdless.spark import fetch
    from herdless.spark.offsets import OffsetRange
    from herdless.spark.options import ClientOptions
    from herdless.spark.schema import KAFKA_ARROW_SCHEMA

    try:
        from herdless.spark import decode, wire
    except ImportError:  # a tree from before bulk decoding
        decode = wire = None
    steps = [
        (getattr(wire, "BrokerConnection", None), "receive", "receive answers (socket, Fetch)"),
        (decode, "_record_starts", "decode: find record starts"),
        (decode, "_fields", "decode: read fields (numpy)"),
        (decode, "_binary_columns", "decode: copy keys and values (Arrow take)"),
        (fetch, "decode_records", "decode, all of it"),
    ]
    # Steps an older tree lacks are left out: its total still compares.
    steps = [(owner, name, label) for owner, name, label in steps if hasattr(owner, name)]
    spent: dict[str, float] = {}
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in steps]

    def timed(function, label):
        def wrapper(*args, **kwargs):
            began = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - began

        return wrapper

    connection = ClientOptions(bootstrap, {}, 10.0)
    best: tuple[float, dict[str, float]] | None = None
    try:
        for (owner, name, label), (_, _, function) in zip(steps, originals, strict=True):
            setattr(owner, name, timed(function, label))
        for _ in range(5):
            spent.clear()
            began = time.process_time()
            with open(os.devnull, "wb") as sink:
                for p in range(partitions):
                    until = (records - p + partitions - 1) // partitions
                    writer = pa.ipc.new_stream(sink, KAFKA_ARROW_SCHEMA)
                    for batch in fetch.read_range(
                        connection, OffsetRange(topic, p, 0, until), 30.0, True
                    ):
                        writer.write_batch(batch)
                    writer.close()
            total = time.process_time() - began
            if best is None or total < best[0]:
                best = (total, dict(spent))
    finally:
        for owner, name, function in originals:
            setattr(owner, name, function)
    total, parts = best
    print(f"executor CPU for {records:,} records: {total:.3f} s ({records / total:,.0f} rows/s)")
    for label, seconds in sorted(parts.items(), key=lambda item: -item[1]):
        print(f"  {seconds:.3f} s  {label}")


# -- the planning side's join, without Spark -------------------------------------------------


def join_profile(bootstrap: str, topic: str, rounds: int = 5) -> None:
    """Time a new group's first join as a query's planning process makes it, from creating
    its member to knowing its partitions, with the protocol the source chooses and with
    the classic one; each round a group of its own."""
    from herdless.spark.member import GroupMember
    from herdless.spark.options import read_options

    for label, extra in (("source's choice", {}), ("classic", {"kafka.group.protocol": "classic"})):
        times, protocol = [], None
        for i in range(rounds):
            options = {
                "kafka.bootstrap.servers": bootstrap,
                "subscribe": topic,
                "kafka.group.id": f"join-{len(extra)}-{i}",
                **extra,
            }
            began = time.monotonic()
            member = GroupMember(read_options(options, "stream"))
            try:
                member.assignment()
                times.append(time.monotonic() - began)
                protocol = getattr(member, "protocol", "classic")  # older trees: classic only
            finally:
                member.close()
        print(
            f"join, {label} ({protocol}): median {statistics.median(times):.3f} s, "
            f"{min(times):.3f}-{max(times):.3f} s over {rounds} groups",
            flush=True,
        )


# -- one run -------------------------------------------------------------------------------


def run(spark, writer, name: str, records: int) -> dict:
    """Run a count query to its end; its figures."""
    cpu_before = cpu_by_role()
    started_at = time.time()
    started = time.monotonic()
    query = writer.start()
    query.awaitTermination()
    wall = time.monotonic() - started
    cpu = {k: v - cpu_before.get(k, 0.0) for k, v in cpu_by_role().items()}
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    counted = spark.sql(f"select * from {name}").first()[0]
    if counted != records:
        raise SystemExit(f"counted {counted} records, expected {records}")
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    first = datetime.fromisoformat(batches[0]["timestamp"]).timestamp() - started_at
    return {
        "batch": records / busy,
        "wall": records / wall,
        "busy": busy,
        "wall_s": wall,
        "before": first,
        "after": wall - first - busy,
        "batches": len(batches),
        "cpu": cpu,
    }


def report(result: dict) -> str:
    cpu = result["cpu"]
    return (
        f"batch rows/s {result['batch']:,.0f} ({result['busy']:.2f} s in "
        f"{result['batches']} batch(es)); wall rows/s {result['wall']:,.0f} "
        f"({result['wall_s']:.2f} s: {result['before']:.2f} before the first batch, "
        f"{result['after']:.2f} after the last)\n"
        f"  CPU s: " + ", ".join(f"{role} {cpu[role]:.2f}" for role in sorted(cpu) if cpu[role])
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--warmup-records",
        type=int,
        default=200_000,
        help="records the warm-up queries read first (10,000 left the first measured run of"
        " each source a third slower: the JVM's code for large batches was still cold)",
    )
    parser.add_argument(
        "--rebalance-delay-ms",
        type=int,
        default=None,
        help="the broker's group.initial.rebalance.delay.ms (default: its own, 3000)",
    )
    parser.add_argument(
        "--executor-only",
        action="store_true",
        help="no Spark: read the topic as executors do, in this process, and profile it",
    )
    parser.add_argument(
        "--join-only",
        action="store_true",
        help="no Spark: time a query's first join of a new group, with each group protocol",
    )
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault(
        "SPARK_CONF_DIR", str(Path(__file__).resolve().parent.parent / "tests/spark/conf")
    )
    from pyspark.sql import SparkSession

    import herdless.spark

    broker_args = []
    if args.rebalance_delay_ms is not None:
        broker_args = ["--set", f"group.initial.rebalance.delay.ms={args.rebalance_delay_ms}"]
    results: list[dict] = []
    prebuilt: list[dict] = []
    # Spark's Python workers import the prebuilt source from this file.
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp, herdless_broker(tmp, broker_args) as bootstrap:
        workdir = Path(tmp)
        print(f"producing {args.records:,} records of {args.value_bytes} bytes ...", flush=True)
        produce(bootstrap, "warmup", args.partitions, args.warmup_records, args.value_bytes)
        produce(bootstrap, "measured", args.partitions, args.records, args.value_bytes)
        if args.join_only:
            join_profile(bootstrap, "measured")
            return 0
        if args.executor_only:
            executor_profile(bootstrap, "measured", args.partitions, args.records)
            return 0
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        herdless.spark.register(spark)
        spark.dataSource.register(PrebuiltSource)
        herdless_query = partial(count_query, spark, bootstrap)
        warmup = args.warmup_records
        run(spark, herdless_query("warmup", "warmup", workdir / "w", None), "warmup", warmup)
        writer = prebuilt_query(spark, "prebuilt_warmup", workdir / "pw", warmup, args)
        run(spark, writer, "prebuilt_warmup", warmup)
        print(
            f"{args.records:,} records, {args.partitions} partitions, local[2], "
            f"{os.cpu_count()} CPUs",
            flush=True,
        )
        for i in range(args.runs):
            name = f"measured_{i}"
            writer = herdless_query("measured", name, workdir / name, args.max_offsets_per_trigger)
            result = run(spark, writer, name, args.records)
            results.append(result)
            load = os.getloadavg()[0]
            print(f"run {i + 1} (load average {load:.1f}): {report(result)}", flush=True)
            name = f"prebuilt_{i}"
            writer = prebuilt_query(spark, name, workdir / name, args.records, args)
            result = run(spark, writer, name, args.records)
            prebuilt.append(result)
            load = os.getloadavg()[0]
            print(f"  prebuilt (load average {load:.1f}): {report(result)}", flush=True)
        spark.stop()
    print(
        f"median: batch rows/s {statistics.median(r['batch'] for r in results):,.0f}, "
        f"wall rows/s {statistics.median(r['wall'] for r in results):,.0f}; prebuilt batches: "
        f"batch rows/s {statistics.median(r['batch'] for r in prebuilt):,.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
