"""Soak a three-broker cluster with random faults under acks=all load, then count the damage.

Starts Debian's ZooKeeper and three herdless brokers, each in a network namespace
of its own (tests/support/network.py), with each broker's data directory on a
tmpfs of its own and its wall clock behind a shim that can step it
(tests/support/wall_clock.py). It creates a topic with replication factor 3 and
min.insync.replicas 2 and runs an idempotent acks=all writer (confluent-kafka)
throughout. Each cycle injects one fault at a random moment:

- kill: SIGKILL of a random broker, restarted 0.2-3 s later;
- pause: SIGSTOP of a partition leader for longer than its ZooKeeper session;
- restart: a graceful restart of a random broker;
- zookeeper: a ZooKeeper restart;
- cut-followers: a partition leader cut from the other brokers (it keeps ZooKeeper
  and its clients) for longer than replica.lag.time.max.ms;
- cut-zookeeper: a random broker cut from ZooKeeper for longer than its session;
- isolate: a random broker cut from everything for longer than its session;
- cut-pair: two random brokers cut from each other;
- disk-full: a random broker's data directory filled for 1-8 s;
- clock-step: a random broker's wall clock stepped an hour forward or back (and
  back to true time the next time it is chosen);

every cut silent (packets dropped), and healed after. Then it waits until every
partition is led with a full ISR again, timing how long that took. A broker that
exits by itself is restarted, as a supervisor would, and counted. At the end the
same checker the fault tests use compares what was acknowledged with what a
consumer and every replica's log hold, and prints the counts:

    python bench/cluster_soak.py --cycles 100

It needs root (network namespaces, iptables, tmpfs mounts) and a C compiler.
"""

from __future__ import annotations

import contextlib
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
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
from tests.support.cluster import SESSION_TIMEOUT_MS, LabCluster  # noqa: E402
from tests.support.small_disk import Filler, small_filesystem  # noqa: E402
from tests.support.soak import print_counts, seeded_cycles  # noqa: E402
from tests.support.wall_clock import SteppedWallClock  # noqa: E402

from herdless.testing import BrokerProcess  # noqa: E402

TOPIC = "soak"
PARTITIONS = 6
BROKERS = (1, 2, 3)
FAULTS = (
    "kill",
    "pause",
    "restart",
    "zookeeper",
    "cut-followers",
    "cut-zookeeper",
    "isolate",
    "cut-pair",
    "disk-full",
    "clock-step",
)
REPLICA_LAG_MS = 3000
# Room for every record of a long soak; Filler takes what is left when a fault asks.
DISK_BYTES = 2 << 30
HOUR_MS = 3_600_000


class SoakCluster(LabCluster):
    """The lab cluster, each broker's wall clock behind a shim of its own."""

    def __init__(self, base_dir: Path) -> None:
        self.clocks = {b: SteppedWallClock(base_dir / f"clock-{b}") for b in BROKERS}
        super().__init__(base_dir, len(BROKERS))

    def broker_process(
        self,
        broker_id: int,
        *extra_args: str,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> BrokerProcess:
        return super().broker_process(
            broker_id, *extra_args, host=host, prefix=(*prefix, *self.clocks[broker_id].prefix)
        )


@contextlib.contextmanager
def soak_cluster(base: Path) -> Iterator[SoakCluster]:
    with contextlib.ExitStack() as stack:
        for broker_id in BROKERS:
            stack.enter_context(small_filesystem(base / f"broker-{broker_id}", DISK_BYTES))
        cluster = SoakCluster(base)
        try:
            yield cluster
        finally:
            cluster.stop()


def restart_exited(cluster: LabCluster, exits: list[str]) -> None:
    """Restart a broker that exited by itself, as a supervisor (systemd) would, and
    remember why it exited: those are findings too, counted apart."""
    for broker_id, process in cluster.brokers.items():
        if process.process is not None and not process.alive():
            lines = [line for line in process.log().splitlines() if line.startswith("error:")]
            exits.append(f"broker {broker_id}: {lines[-1] if lines else 'no error line'}")
            process.start()


def all_served(cluster: LabCluster, exits: list[str], timeout: float = 120.0) -> float:
    started = time.monotonic()
    deadline = started + timeout
    while time.monotonic() < deadline:
        restart_exited(cluster, exits)
        try:
            served(cluster, timeout=5)
            return time.monotonic() - started
        except TimeoutError:
            # A broker back from a full disk may take a while: its probe backs off
            # while the directory keeps failing.
            continue
    served(cluster, timeout=1)
    return time.monotonic() - started


def served(cluster: LabCluster, timeout: float) -> None:
    cluster.wait_for(
        lambda m: (
            len(m.brokers) == len(BROKERS)
            and TOPIC in m.topics
            and all(
                p.leader in m.brokers and len(p.isrs) == len(BROKERS)
                for p in m.topics[TOPIC].partitions.values()
            )
        ),
        timeout=timeout,
        what="every partition led with a full ISR",
    )


def a_leader(cluster: LabCluster, rng: random.Random) -> int:
    return cluster.leader_of(TOPIC, rng.randrange(PARTITIONS))


def beyond_session(rng: random.Random) -> float:
    return SESSION_TIMEOUT_MS / 1000 + rng.uniform(0.5, 3.0)


def inject(cluster: SoakCluster, fault: str, rng: random.Random) -> None:
    if fault == "kill":
        victim = rng.choice(BROKERS)
        cluster.brokers[victim].kill()
        time.sleep(rng.uniform(0.2, 3.0))
        cluster.brokers[victim].start()
    elif fault == "pause":
        victim = a_leader(cluster, rng)
        cluster.pause(victim)
        time.sleep(beyond_session(rng))
        cluster.resume(victim)
    elif fault == "restart":
        cluster.brokers[rng.choice(BROKERS)].restart()
    elif fault == "zookeeper":
        cluster.zookeeper.restart()
    elif fault == "cut-followers":
        cluster.cut_from_brokers(a_leader(cluster, rng))
        time.sleep(REPLICA_LAG_MS / 1000 + rng.uniform(0.5, 4.0))
        cluster.heal_network()
    elif fault == "cut-zookeeper":
        cluster.cut_from_zookeeper(rng.choice(BROKERS))
        time.sleep(beyond_session(rng))
        cluster.heal_network()
    elif fault == "isolate":
        cluster.isolate(rng.choice(BROKERS))
        time.sleep(beyond_session(rng))
        cluster.heal_network()
    elif fault == "cut-pair":
        one, other = rng.sample(BROKERS, 2)
        cluster.cut_between(one, other)
        time.sleep(rng.uniform(1.0, 8.0))
        cluster.heal_network()
    elif fault == "disk-full":
        filler = Filler(cluster.brokers[rng.choice(BROKERS)].data_dir)
        time.sleep(rng.uniform(1.0, 8.0))
        filler.remove()
    else:
        clock = cluster.clocks[rng.choice(BROKERS)]
        clock.step(-clock.shift_ms if clock.shift_ms else rng.choice((-HOUR_MS, HOUR_MS)))


def main() -> None:
    # Stopped with SIGTERM, stop the cluster and remove the lab and the mounts on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cycles, seed, rng = seeded_cycles(__doc__.split("\n")[0])
    console = Console(width=140)
    console.print(f"seed {seed}, {cycles} cycles")
    recovery: dict[str, list[float]] = {fault: [] for fault in FAULTS}
    exits: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="herdless-soak-") as base,
        soak_cluster(Path(base)) as cluster,
    ):
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        new = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([new], operation_timeout=30)[TOPIC].result(timeout=60)
        all_served(cluster, exits)
        # At most about 2,000 records a second: a long soak stays within its tmpfs and memory.
        writer = Writer(cluster.bootstrap, TOPIC, pause_every=10).start()
        with Progress(console=console) as progress:
            task = progress.add_task("fault cycles", total=cycles)
            for _ in range(cycles):
                time.sleep(rng.uniform(0.2, 2.0))
                fault = rng.choice(FAULTS)
                inject(cluster, fault, rng)
                recovery[fault].append(all_served(cluster, exits))
                progress.advance(task)
                if not console.is_terminal:
                    print(f"cycle {sum(map(len, recovery.values()))}: {fault}", flush=True)
        writer.stop()
        all_served(cluster, exits)
        ends = high_watermarks(cluster.bootstrap, TOPIC, PARTITIONS)
        seen = read_partitions(cluster.bootstrap, TOPIC, PARTITIONS, ends, timeout=300)
        report = check(writer.acked, seen)
        data_dirs = [p.data_dir for p in cluster.brokers.values()]
        report.divergent = len(divergent_partitions(data_dirs, TOPIC, PARTITIONS))
        tracebacks = sum(p.log().count("Traceback") for p in cluster.brokers.values())

    counts = {
        "acknowledged": report.acknowledged,
        "lost": report.lost,
        "duplicated": report.duplicated,
        "reordered": report.reordered,
        "divergent": report.divergent,
        "failed sends": len(writer.failed),
        "broker exits": len(exits),
        "tracebacks": tracebacks,
    }
    print_counts(console, f"{cycles} fault cycles (seed {seed})", counts)
    times = Table(title="seconds from the end of a fault to every partition led with a full ISR")
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
    sys.exit(0 if report.clean and not tracebacks else 1)


if __name__ == "__main__":
    main()
