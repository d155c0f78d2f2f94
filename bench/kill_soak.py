"""SIGKILL one broker over and over under produce and commit load, then count the damage.

Starts `herdless serve` on 127.0.0.1 and runs, throughout, an idempotent
acks=all writer (confluent-kafka) and a committer that commits ever larger
offsets for a consumer group, synchronously, recording each acknowledged
commit. Each cycle waits a random moment, SIGKILLs the broker and starts it
again on the same data directory. After every restart the committed offsets
are read back: one below the last acknowledged commit is a lost commit. At the
end the checker the fault tests use compares every acknowledged record with
what a consumer reads, and the broker's log is searched for tracebacks:

    python bench/kill_soak.py --cycles 100
"""

from __future__ import annotations

import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import Progress

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.broker import BrokerProcess  # noqa: E402 - after the path is set
from tests.support.checker import (  # noqa: E402
    Writer,
    check,
    high_watermarks,
    read_partitions,
)
from tests.support.soak import print_counts, seeded_cycles  # noqa: E402

TOPIC = "soak"
PARTITIONS = 4
GROUP = "soak-committer"
# The clients' connection errors at each kill are expected: not printed.
QUIET = logging.getLogger("kill-soak-clients")
QUIET.setLevel(logging.CRITICAL)


class Committer:
    """Commits offset N+1 after N for every partition of TOPIC, synchronously, forever."""

    def __init__(self, bootstrap: str) -> None:
        settings = {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "socket.timeout.ms": 5000,
            "logger": QUIET,
        }
        self._consumer = Consumer(settings)
        # Read back through another client: one client's calls from two threads queue.
        self._reader = Consumer(settings)
        self.acknowledged = 0  # the last offset every partition was acknowledged at
        self.commits = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Committer:
        self._thread.start()
        return self

    def _run(self) -> None:
        offset = 0
        while not self._stop.is_set():
            offset += 1
            offsets = [TopicPartition(TOPIC, p, offset) for p in range(PARTITIONS)]
            try:
                answered = self._consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException:
                self.failures += 1
                time.sleep(0.05)
                continue
            if answered is not None and all(tp.error is None for tp in answered):
                self.acknowledged = offset
                self.commits += 1
            else:
                self.failures += 1
            time.sleep(0.01)

    def committed(self) -> int:
        """The smallest offset committed over the partitions, as the broker answers now."""
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + 30
        while True:
            try:
                found = self._reader.committed(partitions, timeout=10)
                return min(tp.offset for tp in found)
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()
        self._reader.close()


def main() -> None:
    cycles, seed, rng = seeded_cycles(__doc__.split("\n")[0])
    console = Console(width=140)
    console.print(f"seed {seed}, {cycles} cycles")
    lost_commits: list[str] = []
    with tempfile.TemporaryDirectory(prefix="herdless-kill-soak-") as base:
        broker = BrokerProcess(Path(base) / "data", "--set", "group.initial.rebalance.delay.ms=0")
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": QUIET})
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
            del admin
            # About 4,000 records a second: enough to be killed mid-write every cycle,
            # few enough that the acknowledgements of 100 cycles fit in memory.
            writer = Writer(broker.bootstrap, TOPIC, pause_every=20, logger=QUIET).start()
            committer = Committer(broker.bootstrap).start()
            with Progress(console=console) as progress:
                task = progress.add_task("SIGKILL cycles", total=cycles)
                for cycle in range(cycles):
                    time.sleep(rng.uniform(0.3, 2.5))
                    acknowledged_before = committer.acknowledged
                    broker.kill()
                    broker.start()
                    found = committer.committed()
                    if found < acknowledged_before:
                        lost_commits.append(
                            f"cycle {cycle}: committed {found} after {acknowledged_before}"
                            " was acknowledged"
                        )
                    progress.advance(task)
            writer.stop()
            committer.stop()
            ends = high_watermarks(broker.bootstrap, TOPIC, PARTITIONS)
            seen = read_partitions(broker.bootstrap, TOPIC, PARTITIONS, ends, timeout=300)
            report = check(writer.acked, seen)
        finally:
            broker.kill()
        tracebacks = broker.log_path.read_text(errors="replace").count("Traceback")

    counts = {
        "records acknowledged": report.acknowledged,
        "lost": report.lost,
        "duplicated": report.duplicated,
        "reordered": report.reordered,
        "commits acknowledged": committer.commits,
        "commits lost": len(lost_commits),
        "tracebacks in the log": tracebacks,
    }
    print_counts(console, f"{cycles} SIGKILL cycles of one broker (seed {seed})", counts)
    for line in [*report.details[:20], *lost_commits[:20]]:
        console.print(line)
    sys.exit(0 if report.clean and not lost_commits and not tracebacks else 1)


if __name__ == "__main__":
    main()
