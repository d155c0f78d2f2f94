"""What was acknowledged against what every client and replica sees: lost, duplicated,
reordered and divergent records, counted.

A Writer produces unique values with acks=all from a thread and records each
acknowledged (partition, offset, value); check() then reads every partition
from the beginning through a client, compares it with the acknowledgements,
and compares the replicas' log files with each other.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


@dataclass
class Acked:
    partition: int
    offset: int
    value: bytes


class Writer:
    """Produces `prefix-N` values with acks=all and idempotence until stopped."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        prefix: str = "v",
        pause_every: int = 50,
        **settings: object,
    ) -> None:
        self.topic = topic
        # A 5 ms pause after every `pause_every` records keeps the rate bounded.
        self._pause_every = pause_every
        self.prefix = prefix
        self.acked: list[Acked] = []
        # When each acknowledgement came, on the monotonic clock.
        self.acked_at: list[float] = []
        self.failed: list[str] = []
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 50,
                "topic.metadata.refresh.interval.ms": 1000,
                **settings,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def _report(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked.append(Acked(msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]
            self.acked_at.append(time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"{self.prefix}-{self.sent}".encode()
            try:
                self._producer.produce(self.topic, value=value, key=value, on_delivery=self._report)
                self.sent += 1
            except BufferError:
                self._producer.poll(0.05)
                continue
            self._producer.poll(0)
            if self.sent % self._pause_every == 0:
                time.sleep(0.005)

    def longest_gap(self, since: float = 0.0) -> float:
        """The longest time between two acknowledgements after `since` (monotonic)."""
        times = [t for t in self.acked_at if t >= since]
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def stop(self, flush_timeout: float = 120.0) -> None:
        self._stop.set()
        self._thread.join()
        remaining = self._producer.flush(flush_timeout)
        assert remaining == 0, f"{remaining} records neither acknowledged nor failed"


@dataclass
class Report:
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    divergent: int = 0
    details: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.divergent)

    def __str__(self) -> str:
        head = (
            f"acknowledged {self.acknowledged}, lost {self.lost}, duplicated {self.duplicated},"
            f" reordered {self.reordered}, divergent {self.divergent}"
        )
        return "\n".join([head, *self.details[:20]])


def read_partitions(
    bootstrap: str, topic: str, partitions: int, ends: dict[int, int], timeout: float = 60.0
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of each partition, from offset 0 up to `ends` (the high watermarks)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"checker-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = all(
            (seen[p][-1][0] + 1 if seen[p] else 0) >= ends.get(p, 0) for p in range(partitions)
        )
        if done:
            break
        for message in consumer.consume(1000, timeout=0.5):
            if message.error() is None:
                seen[message.partition()].append((message.offset(), message.value()))
    consumer.close()
    return seen


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker-watermarks"})
    ends = {}
    for p in range(partitions):
        ends[p] = _high_watermark(consumer, TopicPartition(topic, p))
    consumer.close()
    return ends


# What a partition's leader answers while leadership moves, or librdkafka while it
# reconnects to a broker back from a restart.
_MOVING = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
}


def _high_watermark(consumer: Consumer, partition: TopicPartition, timeout_s: float = 30) -> int:
    # Leadership may still be moving after a fault (a broker back, the preferred leader
    # elected again): a retriable refusal is asked again once librdkafka's metadata
    # catches up.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(consumer.get_watermark_offsets(partition, timeout=10)[1])
        except KafkaException as exc:
            if exc.args[0].code() not in _MOVING or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def check(
    acked: Iterable[Acked],
    seen: dict[int, list[tuple[int, bytes]]],
) -> Report:
    report = Report()
    by_position: dict[tuple[int, int], bytes] = {}
    counts: Counter[bytes] = Counter()
    for partition, records in seen.items():
        previous = -1
        for offset, value in records:
            by_position[(partition, offset)] = value
            counts[value] += 1
            if offset <= previous:
                report.reordered += 1
                report.details.append(f"partition {partition}: offset {offset} after {previous}")
            previous = offset
    acked = list(acked)
    report.acknowledged = len(acked)
    for record in acked:
        found = by_position.get((record.partition, record.offset))
        if found != record.value:
            report.lost += 1
            report.details.append(
                f"lost: {record.value!r} acknowledged at {record.partition}/{record.offset},"
                f" found {found!r}"
            )
    for value, count in counts.items():
        if count > 1:
            report.duplicated += count - 1
            report.details.append(f"duplicated: {value!r} {count} times")
    # Acknowledged order within a partition must be offset order.
    last: dict[int, int] = {}
    for record in sorted(acked, key=lambda r: int(r.value.split(b"-")[-1])):
        if record.offset < last.get(record.partition, -1):
            report.reordered += 1
        last[record.partition] = max(record.offset, last.get(record.partition, -1))
    return report


def replica_logs(data_dirs: Iterable[Path], topic: str, partition: int) -> list[bytes]:
    """Each replica's log files of one partition, concatenated."""
    logs = []
    for data_dir in data_dirs:
        directory = data_dir / f"{topic}-{partition}"
        if directory.exists():
            logs.append(b"".join(p.read_bytes() for p in sorted(directory.glob("*.log"))))
    return logs


def divergent_partitions(
    data_dirs: list[Path], topic: str, partitions: int, settle_s: float = 30.0
) -> list[int]:
    """Partitions whose replicas still differ byte for byte after `settle_s` of catching up."""
    deadline = time.monotonic() + settle_s
    while True:
        differing = [
            p for p in range(partitions) if len(set(replica_logs(data_dirs, topic, p))) > 1
        ]
        if not differing or time.monotonic() > deadline:
            return differing
        time.sleep(0.25)
