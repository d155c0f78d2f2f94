"""The broker's topics as consumer groups are told them: current, and built no more than needed."""

from __future__ import annotations

import uuid

from herdless.broker.coordinators.consumer_topics import ConsumerTopics
from herdless.cluster.metadata import BrokerEndpoint, PartitionMetadata, TopicMetadata


class Topics:
    """A metadata view of topics only, counting how often it is walked."""

    def __init__(self, racks: dict[int, str | None] | None = None) -> None:
        self.partitions: dict[str, int] = {}
        self.ids: dict[str, uuid.UUID] = {}
        self.walks = 0
        self.racks = racks or {0: None}

    def brokers(self) -> list[BrokerEndpoint]:
        return [BrokerEndpoint(n, "h", 9092 + n, rack) for n, rack in self.racks.items()]

    def add(self, name: str, partitions: int) -> None:
        self.ids.setdefault(name, uuid.uuid4())
        self.partitions[name] = partitions

    def topic_names(self) -> list[str]:
        self.walks += 1
        return sorted(self.partitions)

    def topic(self, name: str) -> TopicMetadata | None:
        if name not in self.partitions:
            return None
        # Replicas in turn over the brokers, two each where there are two.
        nodes = sorted(self.racks)
        replicas = [
            tuple(nodes[(p + i) % len(nodes)] for i in range(min(2, len(nodes))))
            for p in range(self.partitions[name])
        ]
        parts = tuple(PartitionMetadata(p, r[0], 0, r, r) for p, r in enumerate(replicas))
        return TopicMetadata(name, self.ids[name], parts)


def test_the_image_is_rebuilt_when_stale_or_missing_a_topic_and_kept_when_the_same() -> None:
    now = [0.0]
    metadata = Topics()
    metadata.add("t", 3)
    topics = ConsumerTopics(metadata, clock=lambda: now[0])  # type: ignore[arg-type]
    first = topics.image(["t"])
    assert first.topic("t") is not None and first.topic("t").num_partitions == 3  # type: ignore[union-attr]
    assert topics.image(["t"]) is first and metadata.walks == 1

    now[0] = 1.0  # stale, but nothing changed: the same image
    assert topics.image() is first and metadata.walks == 2

    metadata.add("u", 2)  # created: a heartbeat naming it sees it at once
    now[0] = 1.1
    image = topics.image(["u"])
    assert image is not first and image.version == first.version + 1
    assert image.topic("u") is not None

    # A topic that does not exist is looked for at most every tenth of a second.
    walks = metadata.walks
    for _ in range(5):
        topics.image(["nope"])
    assert metadata.walks == walks
    now[0] = 1.25
    for _ in range(5):
        topics.image(["nope"])
    assert metadata.walks == walks + 1

    metadata.add("t", 5)  # new partitions: seen once the image is a second old
    now[0] = 2.3
    assert topics.image().topic("t").num_partitions == 5  # type: ignore[union-attr]


def test_partitions_carry_the_racks_of_their_replicas_when_brokers_have_racks() -> None:
    plain = Topics()
    plain.add("t", 2)
    assert ConsumerTopics(plain).image().topic("t").partition_racks == ()  # type: ignore[union-attr]
    racked = Topics({0: "a", 1: "b", 2: None})
    racked.add("t", 3)
    topic = ConsumerTopics(racked).image().topic("t")
    assert topic is not None
    # Replicas (0, 1), (1, 2), (2, 0); broker 2 has no rack.
    assert topic.partition_racks == (frozenset("ab"), frozenset("b"), frozenset("a"))
