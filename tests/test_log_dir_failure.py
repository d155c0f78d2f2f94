"""A broker of a three-broker cluster whose data directory fills gives up its leaderships.

Each broker's data directory is a real small filesystem (tests/support/small_disk.py);
the test fills one broker's while an idempotent acks=all writer and a committing
consumer group run. That broker leads a partition of the written topic and the
group's `__consumer_offsets` partition; it is the controller, or it is not. What users
rely on: within seconds of the disk filling, the other replicas (in sync, on healthy
disks) lead instead; the writer and the group carry on; nothing acknowledged is lost;
and once there is room again, the broker's replicas come back on their own and rejoin
every ISR, with no restart.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.coordinator import partition_for
from tests.support.checker import (
    Writer,
)
from tests.support.cluster import ClusterProcesses, running_cluster, verify_acknowledged
from tests.support.small_disk import Filler, small_filesystem

BROKERS = (1, 2, 3)
DISK_BYTES = 20 << 20
# Few enough for the filler to take them all in moments.
DISK_INODES = 2000
TOPIC = "filled"
PARTITIONS = 3
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions of tests/support/cluster.py
# What the operator is promised: leadership leaves a broker whose disk failed this fast.
MOVE_WITHIN_S = 5.0
# How long the disk stays full once leadership has moved.
FULL_FOR_S = 6.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    base = tmp_path / "cluster"
    with contextlib.ExitStack() as stack:
        # A data directory is the small filesystem itself; the broker's log is beside it.
        for broker_id in BROKERS:
            stack.enter_context(
                small_filesystem(base / f"broker-{broker_id}", DISK_BYTES, inodes=DISK_INODES)
            )
        yield stack.enter_context(running_cluster(base))


class Committer:
    """A member of a group that consumes the topic and commits what it consumed, every
    100 ms and synchronously, recording when each commit succeeded or failed."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                # Longer than any failover here: the member is never dropped for it.
                "session.timeout.ms": 30_000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        # (monotonic time, None or the error) of every commit.
        self.results: list[tuple[float, str | None]] = []
        # What the last successful commit committed: partition -> next offset.
        self.committed: dict[int, int] = {}
        self._next: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Committer:
        self._consumer.subscribe([TOPIC])
        self._thread.start()
        return self

    def _run(self) -> None:
        last_commit = time.monotonic()
        while not self._stop.is_set():
            for message in self._consumer.consume(500, timeout=0.05):
                if message.error() is None:
                    self._next[message.partition()] = message.offset() + 1
            if time.monotonic() - last_commit < 0.1 or not self._next:
                continue
            last_commit = time.monotonic()
            offsets = dict(self._next)
            try:
                self._consumer.commit(
                    offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                    asynchronous=False,
                )
            except KafkaException as exc:
                self.results.append((time.monotonic(), str(exc)))
            else:
                self.results.append((time.monotonic(), None))
                self.committed.update(offsets)

    def succeeded_after(self, moment: float) -> float | None:
        """When the first commit after `moment` succeeded; None if none has."""
        return next((t for t, error in self.results if t > moment and error is None), None)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


def group_led_by(cluster: ClusterProcesses, broker_id: int) -> tuple[str, int]:
    """A group id whose `__consumer_offsets` partition `broker_id` leads, and that partition."""
    partitions = cluster.metadata().topics[OFFSETS_TOPIC].partitions
    led = {p for p, state in partitions.items() if state.leader == broker_id}
    assert led, f"broker {broker_id} leads no {OFFSETS_TOPIC} partition: {partitions}"
    for n in range(10_000):
        group = f"fillers-{n}"
        if partition_for(group, OFFSETS_PARTITIONS) in led:
            return group, partition_for(group, OFFSETS_PARTITIONS)
    raise AssertionError("no group id found")


def led_by(cluster: ClusterProcesses, broker_id: int) -> set[tuple[str, int]]:
    metadata = cluster.metadata()
    return {
        (name, p)
        for name in (TOPIC, OFFSETS_TOPIC)
        for p, state in metadata.topics[name].partitions.items()
        if state.leader == broker_id
    }


@pytest.mark.parametrize("victim_is_controller", [True, False], ids=["controller", "other"])
def test_a_leaders_full_disk_moves_its_leaderships_and_loses_nothing(
    cluster: ClusterProcesses, victim_is_controller: bool
) -> None:
    controller = cluster.metadata().controller_id
    victim = controller if victim_is_controller else min(set(BROKERS) - {controller})
    others = sorted(set(BROKERS) - {victim})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # The victim leads partition 0; every replica is in the ISR at first.
    assignment = [[victim, *others], [others[0], others[1], victim], [others[1], victim, others[0]]]
    new = NewTopic(
        TOPIC, PARTITIONS, replica_assignment=assignment, config={"min.insync.replicas": "2"}
    )
    admin.create_topics([new])[TOPIC].result(timeout=30)
    # The first FindCoordinator creates the offsets topic.
    with contextlib.suppress(Exception):
        cluster.describe_group("warm-up")
    cluster.wait_serving(TOPIC, OFFSETS_TOPIC)
    group, offsets_partition = group_led_by(cluster, victim)

    writer = Writer(cluster.bootstrap, TOPIC).start()
    committer = Committer(cluster.bootstrap, group).start()
    try:
        deadline = time.monotonic() + 30
        while not committer.committed and time.monotonic() < deadline:
            time.sleep(0.1)
        assert committer.committed, f"the group never committed: {committer.results[-3:]}"
        time.sleep(1)
        leading = led_by(cluster, victim)
        assert (TOPIC, 0) in leading and (OFFSETS_TOPIC, offsets_partition) in leading

        filled_at = time.monotonic()
        filler = Filler(cluster.brokers[victim].data_dir)
        cluster.wait_for(
            lambda m: all(
                m.topics[name].partitions[p].leader not in (victim, -1) for name, p in leading
            ),
            MOVE_WITHIN_S,
            what=f"every leadership of broker {victim} ({sorted(leading)}) moved",
        )
        moved_at = time.monotonic()
        print(f"leaderships moved {moved_at - filled_at:.2f}s after the disk filled")
        acked_at_move = len(writer.acked)
        time.sleep(FULL_FOR_S)
        # Served by the healthy replicas meanwhile: records acknowledged, offsets committed.
        assert len(writer.acked) > acked_at_move, "no record acknowledged after the move"
        committed_again = committer.succeeded_after(moved_at)
        assert committed_again is not None, f"no commit after the move: {committer.results[-5:]}"

        filler.remove()
        # Room again: the victim follows, catches up, and is back in every ISR.
        cluster.wait_serving(TOPIC, OFFSETS_TOPIC, timeout=60)
        time.sleep(1)
    finally:
        committer.stop()
    verify_acknowledged(cluster, writer, TOPIC, PARTITIONS)
    assert cluster.committed(group, TOPIC) == committer.committed
    log = cluster.brokers[victim].log()
    assert "Traceback" not in log, log
    # One line for each change of the directory's state, not one per failed write.
    changes = [line for line in log.splitlines() if "herdless.broker.logs.log_dir_failure" in line]
    assert len(changes) == 2, "\n".join(changes)
    assert "failed (" in changes[0] and "writes again" in changes[1], "\n".join(changes)
