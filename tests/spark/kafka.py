"""Plain Kafka client helpers for the Spark tests: topics, producing, committed offsets."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(
    bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, config=config or {})])
    futures[name].result(30)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes, int | None]],
    headers: list[tuple[str, bytes]] | None = None,
    timestamp: Callable[[int], int] | None = None,
) -> int:
    """Produce (key, value, partition) records and wait for every acknowledgement.

    `timestamp` gives the i-th record's timestamp (ms); by default the producer stamps it.
    """
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    count = 0
    for key, value, partition in records:
        extra = {} if partition is None else {"partition": partition}
        if timestamp is not None:
            extra["timestamp"] = timestamp(count)
        while True:
            try:
                producer.produce(topic, value, key, headers=headers, **extra)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
    assert producer.flush(60) == 0
    return count


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets, fetched with OffsetFetch (no joining)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        answer = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def group_assignment(bootstrap: str, group: str) -> dict[str, set[int]]:
    """Partitions of each member (by member id) as the coordinator describes the group."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(10)
    return {
        member.member_id: {tp.partition for tp in member.assignment.topic_partitions}
        for member in description.members
    }


def group_members(bootstrap: str, group: str) -> list[tuple[str, set[int]]]:
    """(client id, partitions) of each member, as DescribeGroups answers."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(10)
    return [
        (member.client_id, {tp.partition for tp in member.assignment.topic_partitions})
        for member in description.members
    ]


def group_protocol(bootstrap: str, group: str) -> str:
    """The group's protocol as its coordinator reports it: "classic" or "consumer" (KIP-848)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(10)
    return description.type.name.lower()
