"""What replication costs and how fast a cluster fails over, on one machine.

Starts Debian's ZooKeeper and three herdless brokers on 127.0.0.1 and measures,
in one run:

- produce and consume throughput of a topic with replication factor 3
  (acks=all, min.insync.replicas=2) beside one with replication factor 1
  (acks=all), alternating rounds, so that the ratio compares like with like;
- failover: a writer produces one record every few milliseconds with acks=all
  to a one-partition topic with replication factor 3; its leader is killed
  with SIGKILL; the time until the first record is acknowledged again (by the
  new leader), and the ZooKeeper session timeout that bounds it.

    python bench/cluster.py                    # 64 MiB per round, 3 rounds, 5 failovers
    python bench/cluster.py --mib 16 --failovers 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.cluster import SESSION_TIMEOUT_MS, ClusterProcesses  # noqa: E402

MB = 1_000_000
PARTITIONS = 4
console = Console(width=None if sys.stdout.isatty() else 120)


def create(cluster: ClusterProcesses, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    config = {"min.insync.replicas": "2"} if rf == 3 else {}
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(60)
    cluster.wait_for(
        lambda m: (
            name in m.topics
            and all(len(p.isrs) == rf and p.leader >= 0 for p in m.topics[name].partitions.values())
        ),
        what=f"{name} online",
    )


def produce(bootstrap: str, topic: str, total: int, size: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    )
    value = b"x" * size
    started = time.monotonic()
    for _ in range(total):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(300) == 0
    return total * size / MB / (time.monotonic() - started)


def consume(bootstrap: str, topic: str, total: int, size: int) -> float:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}"}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    started = time.monotonic()
    seen = 0
    while seen < total:
        seen += sum(1 for m in consumer.consume(10_000, timeout=1) if m.error() is None)
        if time.monotonic() - started > 300:
            raise RuntimeError(f"read {seen} of {total} records of {topic}")
    rate = total * size / MB / (time.monotonic() - started)
    consumer.close()
    return rate


def failover_once(cluster: ClusterProcesses, topic: str) -> float:
    """Seconds from the leader's SIGKILL to the next acknowledged record."""
    acked_at: list[float] = []
    stop = threading.Event()
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "topic.metadata.refresh.interval.ms": 500,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 100,
        }
    )

    def on_delivery(err: object, _msg: object) -> None:
        if err is None:
            acked_at.append(time.monotonic())

    def write() -> None:
        while not stop.is_set():
            producer.produce(topic, b"tick", on_delivery=on_delivery)
            producer.poll(0.005)
        producer.flush(60)

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(1.0)
    victim = cluster.leader_of(topic, 0)
    cluster.brokers[victim].kill()
    killed_at = time.monotonic()
    deadline = killed_at + 60
    while time.monotonic() < deadline and not any(t > killed_at for t in acked_at):
        time.sleep(0.01)
    stop.set()
    thread.join()
    after = [t for t in acked_at if t > killed_at]
    cluster.brokers[victim].start()
    cluster.wait_for(
        lambda m: len(m.brokers) == 3 and len(m.topics[topic].partitions[0].isrs) == 3,
        timeout=60,
        what="the killed broker back in the ISR",
    )
    if not after:
        raise RuntimeError("no record was acknowledged within 60 s of the kill")
    return after[0] - killed_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--failovers", type=int, default=5)
    args = parser.parse_args()
    total = args.mib * 1024 * 1024 // args.record_size
    rates: dict[str, dict[str, list[float]]] = {
        kind: {"produce": [], "consume": []} for kind in ("RF 1", "RF 3")
    }
    failovers: list[float] = []
    with tempfile.TemporaryDirectory(prefix="herdless-bench-cluster-") as base:
        cluster = ClusterProcesses(Path(base))
        try:
            cluster.start()
            for round_no in range(args.rounds):
                kinds = [("RF 1", 1), ("RF 3", 3)]
                if round_no % 2:
                    kinds.reverse()
                for kind, rf in kinds:
                    topic = f"bench-rf{rf}-{round_no}"
                    create(cluster, topic, PARTITIONS, rf)
                    rates[kind]["produce"].append(
                        produce(cluster.bootstrap, topic, total, args.record_size)
                    )
                    rates[kind]["consume"].append(
                        consume(cluster.bootstrap, topic, total, args.record_size)
                    )
                    console.print(
                        f"round {round_no + 1} {kind}: produce"
                        f" {rates[kind]['produce'][-1]:.1f} MB/s, consume"
                        f" {rates[kind]['consume'][-1]:.1f} MB/s"
                    )
            create(cluster, "bench-failover", 1, 3)
            for _ in range(args.failovers):
                failovers.append(failover_once(cluster, "bench-failover"))
                console.print(f"failover: {failovers[-1]:.2f} s")
        finally:
            cluster.stop()

    table = Table(
        title=f"{args.mib} MiB of {args.record_size} B records, {PARTITIONS} partitions,"
        f" acks=all, {args.rounds} rounds (median MB/s)"
    )
    for column in ("", "RF 1", "RF 3", "RF 3 / RF 1"):
        table.add_column(column, justify="right")
    for phase in ("produce", "consume"):
        one = statistics.median(rates["RF 1"][phase])
        three = statistics.median(rates["RF 3"][phase])
        table.add_row(phase, f"{one:.1f}", f"{three:.1f}", f"{three / one:.2f}")
    console.print(table)
    if failovers:
        console.print(
            f"SIGKILL of the leader to the next acknowledged record: median"
            f" {statistics.median(failovers):.2f} s, max {max(failovers):.2f} s over"
            f" {len(failovers)} kills (zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS})"
        )


if __name__ == "__main__":
    main()
