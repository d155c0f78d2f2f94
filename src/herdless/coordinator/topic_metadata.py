"""The topics of the cluster as the consumer group coordinator is told them.

The coordinator never looks the topics up itself: the broker hands every
consumer group operation that needs them a TopicsImage, built from its own
metadata, so that the shard stays sans-IO and a test states the cluster it
runs against. Consumer groups name partitions by topic id, as Kafka's
records and the ConsumerGroupHeartbeat API do.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple


class TopicIdPartition(NamedTuple):
    topic_id: uuid.UUID
    partition: int


# A member's share of the topics: assigned, owned, pending revocation, or a target.
Partitions = frozenset[TopicIdPartition]
NO_PARTITIONS: Partitions = frozenset()


NO_RACKS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    # The racks of each partition's replicas, by partition; empty when no broker has a
    # rack. Part of what a target assignment is computed from: rack-aware assignors
    # prefer members in a partition's racks, and a change of them brings a new target.
    partition_racks: tuple[frozenset[str], ...] = ()

    def racks(self, partition: int) -> frozenset[str]:
        racks = self.partition_racks
        return racks[partition] if partition < len(racks) else NO_RACKS

    def partitions(self) -> Iterator[TopicIdPartition]:
        for partition in range(self.num_partitions):
            yield TopicIdPartition(self.topic_id, partition)


class TopicsImage:
    """Every topic by name and by id; a snapshot, never changed once built. `version` grows
    with the broker's metadata; resolved regular expressions record it."""

    def __init__(self, topics: Iterable[TopicMetadata] = (), version: int = 0) -> None:
        self.version = version
        self._by_name = {t.name: t for t in topics}
        self._by_id = {t.topic_id: t for t in self._by_name.values()}

    def topic(self, name: str) -> TopicMetadata | None:
        return self._by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def names(self) -> Iterable[str]:
        return self._by_name.keys()

    def __len__(self) -> int:
        return len(self._by_name)


def by_topic(partitions: Iterable[TopicIdPartition]) -> dict[uuid.UUID, list[int]]:
    """Partitions grouped by topic id, each topic's sorted: the shape of Kafka's
    TopicPartitions arrays, in records and responses alike."""
    grouped: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in partitions:
        grouped.setdefault(topic_id, []).append(partition)
    return {topic_id: sorted(ps) for topic_id, ps in sorted(grouped.items())}


def from_topics(topics: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> Partitions:
    """The inverse of by_topic."""
    return frozenset(TopicIdPartition(t, p) for t, ps in topics for p in ps)
