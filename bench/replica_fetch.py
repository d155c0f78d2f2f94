"""What replication's fetches cost two brokers that follow each other's many partitions.

Starts Debian's ZooKeeper and two herdless brokers on 127.0.0.1, creates a topic
of --partitions partitions with replication factor 2 (each broker leads half and
follows the other half), then for --seconds produces --rate records a second
(100 bytes, acks=all) spread over --active of them, the rest staying quiet. It
reports each broker's CPU seconds (user + system) over that window, the Fetch
requests it answered (cpu ms/fetch: all of its CPU over that count) and how
many fetch sessions it held.

The follower's fetches go in fetch sessions (KIP-227) when the brokers' code
does; to compare with code that does not, run this once per source tree, e.g.

    python bench/replica_fetch.py
    git archive <commit> src | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/src python bench/replica_fetch.py

Brokers run with the interpreter and PYTHONPATH of this script.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.cluster import ClusterProcesses  # noqa: E402

TOPIC = "replicated"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(process: BrokerProcess) -> float:
    assert process.process is not None
    fields = Path(f"/proc/{process.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are the 14th and 15th fields; [0] here is the 3rd (state).
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    figures = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "herdless_request_seconds_count":
                if sample.labels.get("api") == "Fetch":
                    figures["fetches"] = sample.value
            elif sample.name == "herdless_fetch_sessions":
                figures["sessions"] = sample.value
    return figures


def produce(bootstrap: str, partitions: int, rate: int, seconds: float) -> int:
    """Records at `rate` a second for `seconds`, round the first `partitions`; the count."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    value = b"x" * 100
    sent = 0
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            try:
                producer.produce(TOPIC, value, partition=sent % partitions)
            except BufferError:
                break
            sent += 1
        producer.poll(0.002)
    producer.flush(60)
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=400)
    parser.add_argument("--active", type=int, default=8, help="partitions written to")
    # Below what the two brokers can acknowledge, so both runs do the same work.
    parser.add_argument("--rate", type=int, default=20, help="records a second")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="replica-fetch-") as base:
        cluster = ClusterProcesses(Path(base), brokers=2)
        ports = cluster.metrics_ports
        try:
            cluster.start()
            cluster.create_topic(TOPIC, args.partitions, replication_factor=2)
            time.sleep(2.0)  # let the followers' first, full fetches settle
            before = {i: (cpu_seconds(p), scrape(ports[i])) for i, p in cluster.brokers.items()}
            started = time.monotonic()
            sent = produce(cluster.bootstrap, args.active, args.rate, args.seconds)
            elapsed = time.monotonic() - started
            after = {i: (cpu_seconds(p), scrape(ports[i])) for i, p in cluster.brokers.items()}
        finally:
            cluster.stop()
    print(
        f"{args.partitions} partitions (RF 2), {sent / elapsed:.0f} records/s to"
        f" {args.active} of them for {elapsed:.1f} s"
    )
    header = ("broker", "cpu s", "cpu %", "fetches/s", "cpu ms/fetch", "sessions")
    print(" ".join(f"{h:>12}" for h in header))
    for broker_id in sorted(after):
        cpu = after[broker_id][0] - before[broker_id][0]
        fetches = after[broker_id][1].get("fetches", 0) - before[broker_id][1].get("fetches", 0)
        sessions = after[broker_id][1].get("sessions", float("nan"))
        per_fetch = 1000 * cpu / fetches if fetches else float("nan")
        row = (
            f"{broker_id}",
            f"{cpu:.2f}",
            f"{100 * cpu / elapsed:.1f}",
            f"{fetches / elapsed:.1f}",
            f"{per_fetch:.2f}",
            f"{sessions:.0f}",
        )
        print(" ".join(f"{cell:>12}" for cell in row))


if __name__ == "__main__":
    main()
