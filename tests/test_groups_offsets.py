"""Committed offsets outlive the broker: a graceful restart and a kill -9.

A group commits positions (with metadata), the broker goes down and comes back,
and then OffsetFetch returns exactly those positions (to confluent-kafka's
committed() and to kafka-python's admin client), and a consumer joining the
group starts at them: the first record it gets from each partition is the one
at the committed offset.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from tests.support.broker import BrokerProcess

PARTITIONS = 3
PER_PARTITION = 50
TOPIC = "durable-offsets"
GROUP = "durable-group"
TIMEOUT_S = 60.0


def produce(bootstrap: str, counts: dict[int, int], start: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in counts.items():
        for i in range(start.get(partition, 0), start.get(partition, 0) + count):
            producer.produce(TOPIC, value=value_at(partition, i).encode(), partition=partition)
    assert producer.flush(30) == 0


def value_at(partition: int, offset: int) -> str:
    return f"p{partition}-{offset}"


def group_consumer(bootstrap: str, name: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": name,
            "enable.auto.commit": False,
            # Without a committed offset, start at the beginning: a lost commit then
            # shows up as a consumer starting at 0 instead of the committed position.
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
        }
    )
    consumer.subscribe([TOPIC])
    return consumer


def first_records(consumer: Consumer, partitions: set[int]) -> dict[int, tuple[int, str]]:
    """(offset, value) of the first record the group member gets from each partition."""
    first: dict[int, tuple[int, str]] = {}
    errors: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    while not partitions <= set(first):
        assert time.monotonic() < deadline, (
            f"no records from partitions {sorted(partitions - set(first))} within "
            f"{TIMEOUT_S:.0f}s; got firsts {first}, errors {errors[-5:]}, "
            f"assignment {[tp.partition for tp in consumer.assignment()]}"
        )
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            errors.append(str(message.error()))
            continue
        first.setdefault(message.partition(), (message.offset(), message.value().decode()))
    return first


def commit(consumer: Consumer, positions: dict[int, int], metadata: str) -> None:
    """Commit synchronously; returns only once the broker acknowledged every partition."""
    result = consumer.commit(
        offsets=[TopicPartition(TOPIC, p, o, metadata=metadata) for p, o in positions.items()],
        asynchronous=False,
    )
    failed = [(tp.partition, str(tp.error)) for tp in result or [] if tp.error is not None]
    assert not failed, f"commit failed for {failed}"


def assert_committed(bootstrap: str, positions: dict[int, int], metadata: str) -> None:
    """OffsetFetch through two clients returns exactly what was committed."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False}
    )
    try:
        fetched = consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=TIMEOUT_S
        )
    finally:
        consumer.close()
    seen = {tp.partition: (tp.offset, tp.metadata) for tp in fetched}
    wanted = {p: (o, metadata) for p, o in positions.items()}
    assert seen == wanted, f"committed() returned {seen}, committed {wanted}"

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        listed = admin.list_group_offsets({GROUP: None})[GROUP]
    finally:
        admin.close()
    # confluent-kafka-python sends the metadata's C string with its NUL terminator
    # (metadata_size = strlen + 1) and reads it back the same way; the broker keeps
    # the bytes as sent, so kafka-python sees the NUL.
    seen_kp = {
        tp.partition: (meta.offset, meta.metadata.removesuffix("\x00"))
        for tp, meta in listed.items()
        if isinstance(tp, KpTopicPartition) and tp.topic == TOPIC
    }
    assert seen_kp == wanted, f"kafka-python's OffsetFetch returned {seen_kp}, committed {wanted}"


def assert_resumes_at(consumer: Consumer, positions: dict[int, int]) -> None:
    first = first_records(consumer, set(positions))
    wanted = {p: (o, value_at(p, o)) for p, o in positions.items()}
    assert first == wanted, f"the group resumed at {first}, not at the committed positions {wanted}"


def test_committed_offsets_survive_graceful_restart_and_kill_9(
    own_broker: BrokerProcess,
) -> None:
    bootstrap = own_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    produce(bootstrap, {p: PER_PARTITION for p in range(PARTITIONS)}, {})

    # A first member reads from the start and commits positions part way in;
    # partition 2's position is the end of the log.
    first = group_consumer(bootstrap, "before-restart")
    assert_resumes_at(first, {0: 0, 1: 0, 2: 0})
    before_restart = {0: 10, 1: 25, 2: PER_PARTITION}
    commit(first, before_restart, "before graceful restart")
    first.close()

    code = own_broker.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{own_broker.log_tail()}"
    own_broker.start()
    assert_committed(bootstrap, before_restart, "before graceful restart")

    second = group_consumer(bootstrap, "after-restart")
    # Partition 2 was consumed to its end: its next record is the next one produced.
    produce(bootstrap, {2: 1}, {2: PER_PARTITION})
    assert_resumes_at(second, {0: 10, 1: 25, 2: PER_PARTITION})

    # Commit as a live member of the group and kill the broker the moment the
    # commit is acknowledged: an acknowledged commit must already be durable.
    before_kill = {0: 30, 1: 26, 2: PER_PARTITION + 1}
    commit(second, before_kill, "before kill -9")
    own_broker.kill()
    own_broker.start()
    second.close()  # leaves the group on the restarted broker
    assert_committed(bootstrap, before_kill, "before kill -9")

    produce(bootstrap, {2: 1}, {2: PER_PARTITION + 1})
    third = group_consumer(bootstrap, "after-kill")
    try:
        assert_resumes_at(third, before_kill)
    finally:
        third.close()
