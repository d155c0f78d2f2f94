"""SIGKILL a Spark query writing through the exactly-once sink, restart it from its
checkpoint, and count what the output holds (tests/spark/test_exactly_once.py and
bench/spark_eos_soak.py).

Each cycle starts eos_query.py, waits until its query runs, lets it work for a
random moment and SIGKILLs its whole process group (the Python driver, the JVM,
Spark's Python workers). A last run with Trigger.AvailableNow copies the rest;
then the output, read with read_committed, is compared with the input.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.support.exactly_once import read_committed

# Run as a module: as a script, its directory would come first on sys.path, and
# tests/spark/kafka.py would hide kafka-python.
QUERY_MODULE = "tests.spark.eos_query"
REPOSITORY = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0


@dataclass
class CopyReport:
    inputs: int = 0
    outputs: int = 0
    uncommitted: int = 0  # records in the log that read_committed skips (aborted, killed)
    missing: int = 0
    duplicated: int = 0
    kills: int = 0
    details: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "driver kills": self.kills,
            "input rows": self.inputs,
            "output rows": self.outputs,
            "aborted records in the log": self.uncommitted,
            "missing": self.missing,
            "duplicated": self.duplicated,
        }

    def __str__(self) -> str:
        counts = ", ".join(f"{name} {count}" for name, count in self.counts().items())
        return "\n".join([counts, *self.details[:20]])


class CopyQuery:
    """Runs of eos_query.py copying `source` into `sink`, all from one checkpoint."""

    def __init__(
        self, bootstrap: str, source: str, sink: str, partitions: int, workdir: Path
    ) -> None:
        self.bootstrap = bootstrap
        self.source = source
        self.sink = sink
        self.workdir = workdir
        self.checkpoint = workdir / "checkpoint"
        self.partitions = partitions
        self.runs = 0

    def start(self, *extra: str) -> tuple[subprocess.Popen, Path]:
        self.runs += 1
        log = self.workdir / f"run-{self.runs}.log"
        environment = {**os.environ, "PYTHONPATH": _pythonpath()}
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    QUERY_MODULE,
                    self.bootstrap,
                    self.source,
                    self.sink,
                    str(self.checkpoint),
                    *extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=REPOSITORY,
                start_new_session=True,  # its own process group: the JVM and workers die with it
            )
        return process, log

    def run_and_kill(self, rng: random.Random) -> None:
        process, log = self.start()
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while b"started" not in log.read_bytes():
                if process.poll() is not None:
                    raise AssertionError(f"the query exited early:\n{log.read_text()[-3000:]}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the query did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
            # Spark cannot restart a query killed while it wrote its very first offsets
            # (a temporary file is left in offsets/, and a query at batch 0 wants none):
            # the first kill waits for the first batch.
            while not (self.checkpoint / "commits" / "0").exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"no first batch:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0.0, 4.0))
            else:
                # Half the kills wait for a task's transaction to hold records: between
                # batches and inside one, the window is too short to be hit by chance often.
                self._wait_for_open_transaction(deadline=time.monotonic() + 10)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def _wait_for_open_transaction(self, deadline: float) -> None:
        """Until some partition of the sink has records past its last stable offset."""
        # librdkafka asks for the end of a partition at its isolation level.
        ends = {
            level: Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": "eos-kills",
                    "isolation.level": level,
                }
            )
            for level in ("read_committed", "read_uncommitted")
        }
        try:
            while time.monotonic() < deadline:
                for partition in range(self.partitions):
                    tp = TopicPartition(self.sink, partition)
                    stable, high = (
                        consumer.get_watermark_offsets(tp, timeout=5, cached=False)[1]
                        for consumer in ends.values()
                    )
                    if stable < high:
                        return
                time.sleep(0.01)
        finally:
            for consumer in ends.values():
                consumer.close()

    def run_to_end(self, *extra: str, timeout: float = 300.0) -> None:
        """One run with Trigger.AvailableNow: everything in the input is copied."""
        process, log = self.start("--available-now", *extra)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(f"the query did not finish:\n{log.read_text()[-3000:]}") from None
        assert code == 0, f"the query failed:\n{log.read_text()[-3000:]}"


def _pythonpath() -> str:
    # The herdless the tests run (a PYTHONPATH given to them comes first) and this
    # repository's tests.
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([*parts, str(REPOSITORY)])


def check_copy(
    bootstrap: str, inputs: list[bytes], sink: str, partitions: int, kills: int
) -> CopyReport:
    report = CopyReport(inputs=len(inputs), kills=kills)
    by_partition = read_committed(bootstrap, sink, partitions)
    committed = [value for values in by_partition.values() for value in values]
    everything = read_committed(bootstrap, sink, partitions, isolation_level="read_uncommitted")
    report.outputs = len(committed)
    report.uncommitted = sum(len(v) for v in everything.values()) - len(committed)
    seen = Counter(committed)
    for value in inputs:
        if value not in seen:
            report.missing += 1
            report.details.append(f"{value!r} is not in the output")
    for value, count in seen.items():
        if count > 1:
            report.duplicated += count - 1
            report.details.append(f"{value!r} is in the output {count} times")
    return report
