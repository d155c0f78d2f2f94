"""Exactly-once, checked: consume-transform-produce under SIGKILL, then every input record
counted in the output read with read_committed.

Transformers (tests/support/transformer.py, each its own process with a transactional
id of its own) copy an input topic into an output topic in one consumer group, each
batch in a transaction with the group's offsets. Faults kill transformers, partition
leaders and the brokers of the transaction coordinators; a killed process is started
again as a supervisor would. At the end, read with read_committed, the output must hold
every input record exactly once, no record of a transaction its transformer saw
aborted, and the group's committed offsets must say exactly which input records are
in it.
"""

from __future__ import annotations

import contextlib
import logging
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from herdless.coordinator import partition_for
from herdless.testing import BrokerProcess, HerdlessCluster
from tests.support.checker import high_watermarks, read_partitions

TRANSFORMER = Path(__file__).with_name("transformer.py")
# Kafka's default transaction.state.log.num.partitions: where a transactional id's
# coordinator lives, unless the cluster is set otherwise.
STATE_PARTITIONS = 50


@dataclass
class Transformer:
    transactional_id: str
    incarnation: int = 0
    process: subprocess.Popen[bytes] | None = None


class Transformers:
    """Transformer processes, killed and started again by the fault loop."""

    def __init__(
        self, bootstrap: str, source: str, sink: str, group: str, count: int, workdir: Path
    ) -> None:
        self.bootstrap, self.source, self.sink, self.group = bootstrap, source, sink, group
        self.workdir = workdir
        self.members = [Transformer(f"{group}-{i}") for i in range(count)]
        self.outcomes = workdir / "outcomes.log"
        # Exits the supervisor saw, by exit code (SIGKILLs it sent are not counted).
        self.exits: Counter[int] = Counter()

    def start(self, member: Transformer) -> None:
        member.incarnation += 1
        log = open(self.workdir / f"{member.transactional_id}.log", "ab")  # noqa: SIM115
        member.process = subprocess.Popen(
            [
                sys.executable,
                str(TRANSFORMER),
                self.bootstrap,
                self.source,
                self.sink,
                self.group,
                member.transactional_id,
                f"{member.transactional_id}#{member.incarnation}",
                str(self.outcomes),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def start_all(self) -> Transformers:
        for member in self.members:
            self.start(member)
        return self

    def kill(self, member: Transformer) -> None:
        if member.process is not None and member.process.poll() is None:
            member.process.kill()
            member.process.wait()
        member.process = None

    def supervise(self) -> None:
        """Start again any transformer that exited on its own, as a supervisor would."""
        for member in self.members:
            if member.process is not None and member.process.poll() is not None:
                self.exits[member.process.returncode] += 1
                self.start(member)

    def stop_all(self) -> None:
        for member in self.members:
            self.kill(member)

    def outcome_of(self) -> dict[str, str]:
        """Each transaction's outcome as its transformer last wrote it."""
        found: dict[str, str] = {}
        with contextlib.suppress(FileNotFoundError):
            for line in self.outcomes.read_text().splitlines():
                transaction, _, outcome = line.partition(" ")
                found[transaction] = outcome
        return found


class System:
    """The brokers under test, and the faults they take."""

    bootstrap: str
    faults: Sequence[str]

    def inject(self, fault: str, transformers: Transformers, rng: random.Random) -> str:
        raise NotImplementedError


class OneBroker(System):
    faults = ("transformer", "transformer", "broker")

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap

    def inject(self, fault: str, transformers: Transformers, rng: random.Random) -> str:
        if fault == "transformer":
            return _kill_transformer(transformers, rng)
        self.broker.kill()
        time.sleep(rng.uniform(0.0, 1.0))
        self.broker.start()
        return "SIGKILL of the broker"


class Cluster(System):
    faults = ("transformer", "output-leader", "coordinator")

    def __init__(self, cluster: HerdlessCluster, sink: str, partitions: int) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap
        self.sink, self.partitions = sink, partitions
        self.state_partitions = int(
            cluster.settings.get("transaction.state.log.num.partitions", STATE_PARTITIONS)
        )

    def inject(self, fault: str, transformers: Transformers, rng: random.Random) -> str:
        if fault == "transformer":
            return _kill_transformer(transformers, rng)
        if fault == "output-leader":
            partition = rng.randrange(self.partitions)
            victim = self.cluster.leader_of(self.sink, partition)
            what = f"SIGKILL of broker {victim}, leader of {self.sink}-{partition}"
        else:
            member = rng.choice(transformers.members)
            state = partition_for(member.transactional_id, self.state_partitions)
            victim = self.cluster.leader_of("__transaction_state", state)
            what = (
                f"SIGKILL of broker {victim}, transaction coordinator of {member.transactional_id}"
            )
        self.cluster.kill(victim)
        time.sleep(rng.uniform(0.2, 2.0))
        self.cluster.brokers[victim].start()
        return what


def _kill_transformer(transformers: Transformers, rng: random.Random) -> str:
    member = rng.choice(transformers.members)
    transformers.kill(member)
    time.sleep(rng.uniform(0.0, 1.0))
    transformers.start(member)
    return f"SIGKILL of transformer {member.transactional_id}"


@dataclass
class ExactlyOnceReport:
    inputs: int = 0
    outputs: int = 0
    committed_transactions: int = 0
    aborted_transactions: int = 0
    missing: int = 0
    duplicated: int = 0
    aborted_visible: int = 0
    offsets_disagreeing: int = 0
    details: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.missing or self.duplicated or self.aborted_visible or self.offsets_disagreeing
        )

    def counts(self) -> dict[str, int]:
        return {
            "input records": self.inputs,
            "output records": self.outputs,
            "transactions committed": self.committed_transactions,
            "transactions aborted": self.aborted_transactions,
            "missing": self.missing,
            "duplicated": self.duplicated,
            "aborted visible": self.aborted_visible,
            "offsets disagreeing": self.offsets_disagreeing,
        }

    def __str__(self) -> str:
        counts = ", ".join(f"{name} {count}" for name, count in self.counts().items())
        return "\n".join([counts, *self.details[:20]])


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=30
        )
    finally:
        consumer.close()
    return {tp.partition: max(tp.offset, 0) for tp in found}


def wait_caught_up(
    bootstrap: str,
    group: str,
    topic: str,
    ends: dict[int, int],
    timeout: float,
    supervise: Callable[[], None] = lambda: None,
) -> dict[int, int]:
    """The group's committed offsets once they reach `ends`, or at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        supervise()
        try:
            committed = committed_offsets(bootstrap, group, topic, len(ends))
        except Exception:  # a broker restarting: ask again
            committed = {}
        if committed and all(committed[p] >= end for p, end in ends.items()):
            return committed
        if time.monotonic() > deadline:
            return committed
        time.sleep(0.5)


def read_committed(
    bootstrap: str,
    topic: str,
    partitions: int,
    timeout: float = 120.0,
    isolation_level: str = "read_committed",
) -> dict[int, list[bytes]]:
    """Every record of `topic` a read_committed consumer (or one at `isolation_level`)
    returns, up to the end."""
    ends = high_watermarks(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"exactly-once-checker-{time.monotonic_ns()}",
            "isolation.level": isolation_level,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    assignment = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(assignment)
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=0.5):
                if message.error() is None:
                    seen[message.partition()].append(message.value())
            # The position passes markers and aborted records: done once it reaches the end.
            positions = consumer.position(assignment)
            # An empty partition has no position to reach its end with.
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in positions):
                break
    finally:
        consumer.close()
    return seen


def check_exactly_once(
    bootstrap: str,
    source: str,
    sink: str,
    partitions: int,
    group: str,
    outcomes: dict[str, str],
) -> ExactlyOnceReport:
    report = ExactlyOnceReport()
    ends = high_watermarks(bootstrap, source, partitions)
    inputs = read_partitions(bootstrap, source, partitions, ends, timeout=120)
    expected = {(p, offset) for p, records in inputs.items() for offset, _ in records}
    report.inputs = len(expected)
    report.committed_transactions = sum(1 for o in outcomes.values() if o == "commit")
    report.aborted_transactions = sum(1 for o in outcomes.values() if o == "abort")
    seen: Counter[tuple[int, int]] = Counter()
    for partition, values in read_committed(bootstrap, sink, partitions).items():
        for value in values:
            report.outputs += 1
            origin, _, transaction = value.decode().partition("|")
            source_partition, _, offset = origin.partition(":")
            key = (int(source_partition), int(offset))
            seen[key] += 1
            if key[0] != partition:
                report.details.append(f"{key} written to partition {partition}")
            if outcomes.get(transaction) == "abort":
                report.aborted_visible += 1
                report.details.append(f"{key} visible from aborted transaction {transaction}")
    missing = sorted(expected - seen.keys())
    report.missing = len(missing)
    for p in range(partitions):
        offsets = [offset for q, offset in missing if q == p]
        if offsets:
            report.details.append(
                f"{len(offsets)} records of {source}-{p} are not in the output,"
                f" offsets {offsets[0]} to {offsets[-1]}"
            )
    for key, count in sorted(seen.items()):
        if count > 1:
            report.duplicated += count - 1
            report.details.append(f"input {key[0]}:{key[1]} is in the output {count} times")
    committed = committed_offsets(bootstrap, group, source, partitions)
    for p in range(partitions):
        written = {offset for (q, offset) in seen if q == p}
        if written != set(range(committed.get(p, 0))):
            report.offsets_disagreeing += 1
            report.details.append(
                f"{source}-{p}: committed offset {committed.get(p)}, but the output holds"
                f" {len(written)} of its records up to offset {max(written, default=-1)}"
            )
    return report


def run(
    system: System,
    workdir: Path,
    cycles: int,
    rng: random.Random,
    *,
    partitions: int = 3,
    transformers: int = 2,
    replication_factor: int = 1,
    advance: Callable[[str], None] = lambda fault: None,
) -> tuple[ExactlyOnceReport, Transformers]:
    """Input written throughout, transformers copying it, `cycles` random faults; then
    the transformers catch up and the output is checked."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.checker import Writer

    source, sink, group = "eos-input", "eos-output", "eos-transformers"
    configs = {"min.insync.replicas": "2"} if replication_factor > 1 else {}
    # librdkafka's complaints about the brokers killed on purpose are not worth printing.
    quiet = logging.getLogger("exactly-once-clients")
    quiet.setLevel(logging.CRITICAL)
    admin = AdminClient({"bootstrap.servers": system.bootstrap, "logger": quiet})
    created = admin.create_topics(
        [NewTopic(t, partitions, replication_factor, config=configs) for t in (source, sink)]
    )
    for future in created.values():
        future.result(30)
    writer = Writer(system.bootstrap, source, prefix="in", pause_every=2, logger=quiet).start()
    running = Transformers(system.bootstrap, source, sink, group, transformers, workdir)
    running.start_all()
    try:
        for _ in range(cycles):
            time.sleep(rng.uniform(0.3, 2.0))
            running.supervise()
            advance(system.inject(rng.choice(system.faults), running, rng))
        writer.stop()
        ends = high_watermarks(system.bootstrap, source, partitions)
        committed = wait_caught_up(system.bootstrap, group, source, ends, 180, running.supervise)
    finally:
        running.stop_all()
    report = check_exactly_once(
        system.bootstrap, source, sink, partitions, group, running.outcome_of()
    )
    behind = sum(ends.values()) - sum(committed.get(p, 0) for p in ends)
    if behind:
        report.details.insert(
            0, f"the transformers were {behind} records behind when they were stopped: {committed}"
        )
    report.details.extend(
        f"transformers exited with {code} {count} times" for code, count in running.exits.items()
    )
    return report, running
