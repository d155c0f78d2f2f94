"""The coordinator across broker restarts: groups come back from `__consumer_offsets`.

A Stable group whose members keep heartbeating through a restart carries on
without a rebalance; committed offsets survive a graceful stop and a kill -9.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.protocol.consumer import (
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from tests.support.broker import BrokerProcess
from tests.support.kafka_python import subscribe_safely
from tests.support.wire import Wire, simple_commit

GROUP = "survivors"
TOPIC = "failover"


class Member(ConsumerRebalanceListener):
    """A kafka-python group member polling in a thread, counting the rebalances it sees."""

    def __init__(self, bootstrap: str, name: str) -> None:
        self.assignments: list[set[int]] = []
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            client_id=name,
            session_timeout_ms=15_000,
            heartbeat_interval_ms=1_000,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        subscribe_safely(self.consumer, [TOPIC], listener=self)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def on_partitions_revoked(self, revoked: object) -> None:
        pass

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.assignments.append({tp.partition for tp in assigned})

    def _poll(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(timeout_ms=200)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def rebalances(bootstrap: str) -> list[dict[str, object]]:
    """The group's entries in __rebalance_history, read like any topic."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition("__rebalance_history", 0)
    reader.assign([tp])
    reader.seek_to_beginning(tp)
    end = reader.end_offsets([tp])[tp]
    entries = []
    while reader.position(tp) < end:
        for records in reader.poll(timeout_ms=1000).values():
            entries += [json.loads(r.value) for r in records if r.key == GROUP.encode()]
    reader.close()
    return entries


def test_stable_group_survives_a_restart_without_rebalancing(own_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    members = [Member(own_broker.bootstrap, f"m{i}") for i in range(2)]
    try:
        wait_for(
            lambda: (
                all(m.assignments for m in members)
                and sorted(p for m in members for p in m.assignments[-1]) == [0, 1, 2, 3]
            ),
            60,
            "both members to share the 4 partitions",
        )
        time.sleep(2)  # let any follow-up rebalance settle
        seen = [len(m.assignments) for m in members]
        history = rebalances(own_broker.bootstrap)
        assert history and history[-1]["members_after"], history
        generation = history[-1]["to_generation"]

        own_broker.restart()
        time.sleep(8)  # members reconnect and heartbeat into the reloaded group

        assert [len(m.assignments) for m in members] == seen, "members saw a rebalance"
        after = rebalances(own_broker.bootstrap)
        assert after == history, f"rebalances after the restart: {after[len(history) :]}"
        assert generation == after[-1]["to_generation"]
    finally:
        for member in members:
            member.close()


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_committed_offsets_survive_restart(own_broker: BrokerProcess, hard: bool) -> None:
    producer = Producer({"bootstrap.servers": own_broker.bootstrap})
    for i in range(100):
        producer.produce(TOPIC, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = KafkaConsumer(
        bootstrap_servers=own_broker.bootstrap, group_id="resumers", enable_auto_commit=False
    )
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(42, "", -1)})
    consumer.close()

    own_broker.restart(hard=hard)

    resumed = KafkaConsumer(
        bootstrap_servers=own_broker.bootstrap, group_id="resumers", enable_auto_commit=False
    )
    resumed.assign([tp])
    assert resumed.committed(tp) == 42
    first = None
    deadline = time.monotonic() + 20
    while first is None and time.monotonic() < deadline:
        for records in resumed.poll(timeout_ms=1000).values():
            first = records[0].value
    resumed.close()
    assert first == b"42", "the group did not resume at its committed position"


def test_offsets_topic_is_compacted_and_still_loads(tmp_path: Path) -> None:
    """Thousands of commits of one partition shrink to a few records; the last one wins."""
    process = BrokerProcess(
        tmp_path / "data",
        "--set",
        "offsets.topic.segment.bytes=4096",
        "--set",
        "log.cleaner.backoff.ms=200",
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        consumer = KafkaConsumer(
            bootstrap_servers=process.bootstrap, group_id="churn", enable_auto_commit=False
        )
        tp = TopicPartition(TOPIC, 0)
        for offset in range(1, 2001):
            consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
        consumer.close()
        partition_dirs = list((tmp_path / "data").glob("__consumer_offsets-*"))

        def stored_bytes() -> int:
            return sum(f.stat().st_size for d in partition_dirs for f in d.glob("*.log"))

        written = 2000 * 60  # each commit record is some 60+ bytes
        wait_for(lambda: stored_bytes() < written / 10, 30, "the cleaner to compact the commits")
        process.restart()
        resumed = KafkaConsumer(
            bootstrap_servers=process.bootstrap, group_id="churn", enable_auto_commit=False
        )
        assert resumed.committed(tp) == 2000
        resumed.close()
    finally:
        process.kill()


def test_commit_to_a_missing_topic_is_refused(own_broker: BrokerProcess) -> None:
    """As in Kafka: UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that does not exist,
    nothing stored; real partitions still commit."""
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    request = simple_commit(
        "careful", {("no-such-topic", 0): 5, (TOPIC, 0): 3, (TOPIC, 1): 4, (TOPIC, -1): 6}
    )
    # The coordinator must be loaded: wait until a fetch of the group answers.
    consumer = KafkaConsumer(
        bootstrap_servers=own_broker.bootstrap, group_id="careful", enable_auto_commit=False
    )
    assert consumer.committed(TopicPartition(TOPIC, 0)) is None
    wire = Wire(own_broker)
    response = wire.call(request, OffsetCommitResponse)
    wire.close()
    errors = {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }
    assert errors == {("no-such-topic", 0): 3, (TOPIC, 0): 0, (TOPIC, 1): 3, (TOPIC, -1): 3}
    assert consumer.committed(TopicPartition(TOPIC, 0)) == 3
    consumer.close()


def test_offset_fetch_batches_several_groups(own_broker: BrokerProcess) -> None:
    """OffsetFetch v8+ asks for many groups at once; each gets its own offsets."""
    admin = AdminClient({"bootstrap.servers": own_broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    for group, offset in (("first", 11), ("second", 22)):
        consumer = KafkaConsumer(
            bootstrap_servers=own_broker.bootstrap, group_id=group, enable_auto_commit=False
        )
        consumer.commit({TopicPartition(TOPIC, 1): OffsetAndMetadata(offset, "", -1)})
        consumer.close()
    Group = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest[8](
        groups=[
            Group(group_id="first", topics=None),
            Group(
                group_id="second",
                topics=[Group.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1])],
            ),
            Group(group_id="nobody", topics=None),
        ],
        require_stable=True,
    )
    wire = Wire(own_broker)
    response = wire.call(request, OffsetFetchResponse)
    wire.close()
    found = {
        g.group_id: (
            g.error_code,
            {
                (t.name, p.partition_index): p.committed_offset
                for t in g.topics
                for p in t.partitions
            },
        )
        for g in response.groups
    }
    assert found == {
        "first": (0, {(TOPIC, 1): 11}),
        "second": (0, {(TOPIC, 0): -1, (TOPIC, 1): 22}),
        "nobody": (0, {}),
    }
