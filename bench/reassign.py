"""How long moving a partition to another broker takes, with and without a replication
throttle, and what producers feel meanwhile.

Starts Debian's ZooKeeper and four herdless brokers on 127.0.0.1, every broker with
`leader.replication.throttled.rate` and `follower.replication.throttled.rate` set to the
throttle (they apply only to the replicas a topic names). Fills a one-partition topic of
replication factor 3 with --mib MiB, then moves one of its replicas to the fourth broker
(AlterPartitionReassignments) twice: once with no throttled replicas, once with the
topic's leader/follower.replication.throttled.replicas set to `*`; each move is timed
from the request to the end of the reassignment. Throughout, a producer sends a 100-byte
record every 20 ms with acks=all to the same partition; the table gives the p50 and p99 of
its acknowledgement latency at rest and during each move.

    python bench/reassign.py                      # 1 GiB, throttle 25 MB/s
    python bench/reassign.py --mib 64 --throttle-mb 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import KafkaAdminClient, TopicPartition
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.cluster import ClusterProcesses  # noqa: E402

MB = 1_000_000
MiB = 1024 * 1024
TOPIC = "moving"
console = Console(width=None if sys.stdout.isatty() else 120)


class LatencyProbe:
    """A record every 20 ms, acks=all; each acknowledgement's latency, by when it came.
    Every 5 ms queued records faster than four brokers on two loaded cores acknowledged
    them, and the latency measured the queue."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 1000}
        )
        self.samples: list[tuple[float, float]] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()

            def done(err: object, _msg: object, sent: float = sent) -> None:
                now = time.monotonic()
                if err is not None:
                    self.failed += 1
                else:
                    self.samples.append((now, (now - sent) * 1000))

            self._producer.produce(TOPIC, b"p" * 100, partition=0, on_delivery=done)
            self._producer.poll(0.02)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(60)

    def between(self, start: float, end: float) -> list[float]:
        return [latency for at, latency in self.samples if start <= at <= end]


def fill(bootstrap: str, mib: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": MiB}
    )
    # Incompressible values: the bytes moved are the bytes produced.
    values = [os.urandom(10_000) for _ in range(64)]
    for i in range(mib * MiB // 10_000):
        while True:
            try:
                producer.produce(TOPIC, values[i % 64], partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(600) == 0


def set_throttled_replicas(bootstrap: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    op = AlterConfigOpType.SET if value else AlterConfigOpType.DELETE
    resource = ConfigResource(
        "topic",
        TOPIC,
        incremental_configs=[
            ConfigEntry(f"{side}.replication.throttled.replicas", value, incremental_operation=op)
            for side in ("leader", "follower")
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def move(admin: KafkaAdminClient, cluster: ClusterProcesses, target: list[int]) -> float:
    started = time.monotonic()
    errors = admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): target})
    assert errors == {TopicPartition(TOPIC, 0): None}, errors
    while admin.list_partition_reassignments({TOPIC: [0]}):
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    cluster.wait_serving(TOPIC)
    return elapsed


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="size of the partition moved")
    parser.add_argument("--throttle-mb", type=float, default=25.0, help="MB/s of the throttle")
    args = parser.parse_args()
    rate = int(args.throttle_mb * MB)
    with tempfile.TemporaryDirectory() as base:
        cluster = ClusterProcesses(
            Path(base),
            4,
            **{
                "leader.replication.throttled.rate": str(rate),
                "follower.replication.throttled.rate": str(rate),
            },
        )
        cluster.start()
        try:
            cluster.create_topic(TOPIC, 1, 3)
            console.print(f"filling {TOPIC}-0 with {args.mib} MiB", style="dim")
            fill(cluster.bootstrap, args.mib)
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
            probe = LatencyProbe(cluster.bootstrap)
            probe.start()
            time.sleep(5)
            rest = probe.between(time.monotonic() - 5, time.monotonic())
            replicas = list(cluster.metadata(TOPIC).topics[TOPIC].partitions[0].replicas)
            (fourth,) = set(cluster.brokers) - set(replicas)
            rows = []
            for throttled in (False, True):
                set_throttled_replicas(cluster.bootstrap, "*" if throttled else "")
                # The last replica leaves for the broker that has none, then comes back.
                leaving = replicas[-1]
                target = [*replicas[:-1], fourth]
                started = time.monotonic()
                elapsed = move(admin, cluster, target)
                during = probe.between(started, started + elapsed)
                rows.append((throttled, elapsed, during))
                replicas, fourth = target, leaving
            probe.stop()
        finally:
            cluster.stop()
    table = Table(title=f"moving a {args.mib} MiB partition to another broker (RF 3)")
    for column in ("throttle", "time (s)", "MB/s", "p50 ack (ms)", "p99 ack (ms)"):
        table.add_column(column, justify="right")
    table.add_row("at rest", "-", "-", f"{percentile(rest, 50):.1f}", f"{percentile(rest, 99):.1f}")
    for throttled, elapsed, during in rows:
        table.add_row(
            f"{args.throttle_mb:g} MB/s" if throttled else "none",
            f"{elapsed:.1f}",
            f"{args.mib * MiB / MB / elapsed:.1f}",
            f"{percentile(during, 50):.1f}",
            f"{percentile(during, 99):.1f}",
        )
    console.print(table)
    console.print(
        f"load average {os.getloadavg()[0]:.2f}; {probe.failed} probe records failed",
        style="dim",
    )


if __name__ == "__main__":
    main()
