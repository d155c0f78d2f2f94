"""Soak a three-broker cluster with random faults under acks=all load, then count the damage.

Starts Debian's ZooKeeper and three herdless brokers on 127.0.0.1, creates a
topic with replication factor 3 and min.insync.replicas 2, and runs an
idempotent acks=all writer (confluent-kafka) throughout. Each cycle injects
one fault at a random moment: SIGKILL of a random broker (then a restart),
SIGSTOP of a partition leader for longer than its ZooKeeper session (then
SIGCONT), a graceful restart, or a ZooKeeper restart; and waits until every
partition is led with a full ISR again, timing how long that took. A broker
that exits by itself (it could not register in time while ZooKeeper was
restarting, say) is restarted as a supervisor would, and counted. At the end
the same checker the fault tests use compares what was acknowledged with what
a consumer and every replica's log hold, and prints the counts:

    python bench/cluster_soak.py --cycles 100
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.checker import (  # noqa: E402 - after the path is set
    Writer,
    check,
    divergent_partitions,
    high_watermarks,
    read_partitions,
)
from tests.support.cluster import SESSION_TIMEOUT_MS, ClusterProcesses  # noqa: E402
from tests.support.soak import print_counts, seeded_cycles  # noqa: E402

TOPIC = "soak"
PARTITIONS = 6
FAULTS = ("kill", "pause", "restart", "zookeeper")


def restart_exited(cluster: ClusterProcesses, exits: list[str]) -> None:
    """Restart a broker that exited by itself, as a supervisor (systemd) would, and
    remember why it exited: those are findings too, counted apart."""
    for broker_id, process in cluster.brokers.items():
        if process.process is not None and not process.alive():
            lines = [line for line in process.log().splitlines() if line.startswith("error:")]
            exits.append(f"broker {broker_id}: {lines[-1] if lines else 'no error line'}")
            process.start()


def all_served(cluster: ClusterProcesses, exits: list[str], timeout: float = 90.0) -> float:
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        restart_exited(cluster, exits)
        try:
            served(cluster, timeout=5)
            return time.monotonic() - started
        except AssertionError:
            continue
    served(cluster, timeout=1)
    return time.monotonic() - started


def served(cluster: ClusterProcesses, timeout: float) -> None:
    cluster.wait_for(
        lambda m: (
            len(m.brokers) == 3
            and TOPIC in m.topics
            and all(
                p.leader in m.brokers and len(p.isrs) == 3
                for p in m.topics[TOPIC].partitions.values()
            )
        ),
        timeout=timeout,
        what="every partition led with a full ISR",
    )


def inject(cluster: ClusterProcesses, fault: str, rng: random.Random) -> None:
    if fault == "kill":
        victim = rng.choice(list(cluster.brokers))
        cluster.brokers[victim].kill()
        time.sleep(rng.uniform(0.2, 3.0))
        cluster.brokers[victim].start()
    elif fault == "pause":
        victim = cluster.leader_of(TOPIC, rng.randrange(PARTITIONS))
        cluster.pause(victim)
        time.sleep(SESSION_TIMEOUT_MS / 1000 + rng.uniform(0.5, 2.0))
        cluster.resume(victim)
    elif fault == "restart":
        victim = rng.choice(list(cluster.brokers))
        cluster.brokers[victim].restart()
    else:
        cluster.zookeeper.restart()


def main() -> None:
    cycles, seed, rng = seeded_cycles(__doc__.split("\n")[0])
    console = Console(width=140)
    console.print(f"seed {seed}, {cycles} cycles")
    recovery: dict[str, list[float]] = {fault: [] for fault in FAULTS}
    exits: list[str] = []
    with tempfile.TemporaryDirectory(prefix="herdless-soak-") as base:
        cluster = ClusterProcesses(Path(base))
        try:
            cluster.start()
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            new = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
            admin.create_topics([new], operation_timeout=30)[TOPIC].result(timeout=60)
            all_served(cluster, exits)
            writer = Writer(cluster.bootstrap, TOPIC).start()
            with Progress(console=console) as progress:
                task = progress.add_task("fault cycles", total=cycles)
                for _ in range(cycles):
                    time.sleep(rng.uniform(0.2, 2.0))
                    fault = rng.choice(FAULTS)
                    inject(cluster, fault, rng)
                    recovery[fault].append(all_served(cluster, exits))
                    progress.advance(task)
            writer.stop()
            all_served(cluster, exits)
            ends = high_watermarks(cluster.bootstrap, TOPIC, PARTITIONS)
            seen = read_partitions(cluster.bootstrap, TOPIC, PARTITIONS, ends, timeout=300)
            report = check(writer.acked, seen)
            data_dirs = [p.data_dir for p in cluster.brokers.values()]
            report.divergent = len(divergent_partitions(data_dirs, TOPIC, PARTITIONS))
        finally:
            cluster.stop()

    counts = {
        "acknowledged": report.acknowledged,
        "lost": report.lost,
        "duplicated": report.duplicated,
        "reordered": report.reordered,
        "divergent": report.divergent,
        "failed sends": len(writer.failed),
        "broker exits": len(exits),
    }
    print_counts(console, f"{cycles} fault cycles (seed {seed})", counts)
    times = Table(title="seconds until every partition is led with a full ISR again")
    for column in ("fault", "cycles", "median", "max"):
        times.add_column(column, justify="right")
    for fault, seconds in recovery.items():
        if seconds:
            times.add_row(
                fault, str(len(seconds)), f"{statistics.median(seconds):.2f}", f"{max(seconds):.2f}"
            )
    console.print(times)
    for line in report.details[:20]:
        console.print(line)
    for line in exits:
        console.print(f"exited by itself and restarted: {line}")
    sys.exit(0 if report.clean else 1)


if __name__ == "__main__":
    main()
