"""Consumers in their own OS processes (tests/marshal/runner.py) and what they did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.marshal import MarshalError, Message, WorldState, decode, read_state
from herdless.marshal.messages import DecodeError
from herdless.marshal.placement import DEFAULT_TOPIC

INTERVAL = 1.0
COORDINATION_PARTITIONS = 4
ROOT = Path(__file__).resolve().parents[2]

T = TypeVar("T")


def create_topic(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """A topic with records spread evenly over its partitions."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0


class Runner:
    """One consumer process."""

    def __init__(
        self, bootstrap: str, workdir: Path, group: str, topic: str, client_id: str, **opts: str
    ) -> None:
        self.client_id = client_id
        self.out = workdir / f"{group}-{client_id}.out"
        self.err = workdir / f"{group}-{client_id}.err"
        command = [
            sys.executable, "-m", "tests.marshal.runner",
            "--bootstrap", bootstrap, "--group", group, "--topic", topic,
            "--client-id", client_id, "--out", str(self.out),
            "--interval", str(INTERVAL),
            "--coordination-partitions", str(COORDINATION_PARTITIONS),
        ]  # fmt: skip
        for name, value in opts.items():
            command += [f"--{name.replace('_', '-')}", str(value)]
        with open(self.err, "ab") as err:
            self.process = subprocess.Popen(command, cwd=ROOT, stdout=err, stderr=err)

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        self.terminate()
        return self.process.wait(30)

    def terminate(self) -> None:
        """SIGTERM: it closes gracefully, releasing its claims, and exits 0."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def log(self) -> str:
        lines = self.err.read_text(errors="replace").splitlines()
        return "\n".join(line for line in lines if not line.startswith("%"))[-3000:]


def stop_all(runners: list[Runner]) -> list[int]:
    """Stop the runners side by side (each takes a moment to release its claims); their
    exit codes."""
    for runner in runners:
        runner.terminate()
    # Waited for, not signalled again: a second SIGTERM ends a runner still releasing
    # its claims after the first.
    return [runner.process.wait(30) for runner in runners]


def processed(workdir: Path, group: str) -> Counter[tuple[int, int]]:
    """How many times each (partition, offset) was processed, over every process of group."""
    counts: Counter[tuple[int, int]] = Counter()
    for path in workdir.glob(f"{group}-*.out"):
        for line in path.read_text().splitlines():
            partition, offset = line.split()
            counts[(int(partition), int(offset))] += 1
    return counts


def owners(state: WorldState, group: str) -> dict[int, str | None]:
    return {key.partition: claim.owner for key, claim in state.group_claims(group).items()}


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def state(bootstrap: str) -> WorldState:
    """The world state; empty until the first consumer has created the coordination topic."""
    try:
        return read_state(bootstrap)
    except MarshalError:
        return WorldState(COORDINATION_PARTITIONS)


def history(bootstrap: str, topic: str = DEFAULT_TOPIC) -> list[tuple[int, Message]]:
    """Every message on the coordination topic with its LogAppendTime (the broker's ms),
    in time order: what the log says each consumer did, and when."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "tests-history", "enable.auto.commit": False}
    )
    try:
        ends = {
            p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in reader.list_topics(topic, timeout=10).topics[topic].partitions
        }
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        read: dict[int, int] = {p: 0 for p in ends}
        found: list[tuple[int, Message]] = []
        deadline = time.monotonic() + 30
        while any(read[p] < end for p, end in ends.items()):
            assert time.monotonic() < deadline, f"{topic} not read to its end: {read} of {ends}"
            for record in reader.consume(500, timeout=0.2):
                if record.error() is not None:
                    continue
                read[record.partition()] = record.offset() + 1
                try:
                    found.append((record.timestamp()[1], decode(record.value())))
                except DecodeError:
                    continue
    finally:
        reader.close()
    return sorted(found, key=lambda entry: entry[0])
