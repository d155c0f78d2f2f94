"""DescribeTopicPartitions (KIP-966) on one broker, asked by kafka-python's
KafkaAdminClient.describe_topic_partitions and, for what it hides, by raw requests:
Metadata's facts, a page at a time, with Kafka's cursor and limits.

The broker runs with `max.request.partition.size.limit` at 6, so that its cap on an
answer is seen without topics of 2000 partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeTopicPartitionsResponse

from herdless.protocol.errors import ErrorCode
from herdless.security.acls import SUPPORTED_OPERATIONS, ResourceType
from tests.support.broker import BrokerProcess, module_broker
from tests.support.requests import describe_topic_partitions_request
from tests.support.wire import Wire

BROKER_LIMIT = 6
# Topics of this module, made once: their names sort in this order.
TOPICS = {"dtp-a": 1, "dtp-b": 4, "dtp-c": 9, "dtp-d": 2}
EVERY_TOPIC_OPERATION = sum(1 << int(op) for op in SUPPORTED_OPERATIONS[ResourceType.TOPIC])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("describe-topic-partitions") / "data"
    with module_broker(
        data, "--set", f"max.request.partition.size.limit={BROKER_LIMIT}"
    ) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, partitions, 1) for name, partitions in TOPICS.items()]
        )
        for future in futures.values():
            future.result(30)
        yield process


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def describe(
    broker: BrokerProcess,
    topics: list[str],
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
) -> Any:
    """A raw request: what kafka-python's admin client hides (empty ELR lists, no topics)."""
    wire = Wire(broker)
    try:
        request = describe_topic_partitions_request(topics, limit, cursor)
        return wire.call(request, DescribeTopicPartitionsResponse)
    finally:
        wire.close()


def every_page(admin: KafkaAdminClient, topics: list[str], limit: int = 2000) -> list[Any]:
    """Every answer, from the first to the one with no cursor, each asked from the last."""
    answers = []
    cursor = None
    while True:
        answer = admin.describe_topic_partitions(
            topics, response_partition_limit=limit, cursor=cursor
        )
        answers.append(answer)
        cursor = answer["next_cursor"]
        if cursor is None:
            return answers
        assert len(answers) < 20, "the cursor does not move on"


def pages(admin: KafkaAdminClient, topics: list[str], limit: int) -> list[list[tuple[str, int]]]:
    """Each page's (topic, partition)s."""
    return [
        [(t["name"], p["partition_index"]) for t in answer["topics"] for p in t["partitions"]]
        for answer in every_page(admin, topics, limit)
    ]


def test_partitions_leaders_and_isr_as_metadata_names_them(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    answer = admin.describe_topic_partitions(["dtp-b", "dtp-a"])
    assert answer["next_cursor"] is None
    # In name order, whatever order they were asked in.
    assert [t["name"] for t in answer["topics"]] == ["dtp-a", "dtp-b"]
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    for topic in answer["topics"]:
        assert topic["error_code"] == ErrorCode.NONE
        assert topic["topic_id"] != uuid.UUID(int=0)
        assert topic["is_internal"] is False
        # Every operation on a topic: there is no authorizer.
        assert topic["topic_authorized_operations"] == EVERY_TOPIC_OPERATION
        described = metadata.topics[topic["name"]].partitions
        assert [p["partition_index"] for p in topic["partitions"]] == sorted(described)
        for partition in topic["partitions"]:
            seen = described[partition["partition_index"]]
            assert partition["error_code"] == ErrorCode.NONE
            assert partition["leader_id"] == seen.leader == 0
            assert partition["replica_nodes"] == list(seen.replicas) == [0]
            assert partition["isr_nodes"] == list(seen.isrs) == [0]
            assert partition["offline_replicas"] == []
            assert partition["leader_epoch"] >= 0


def test_topic_ids_are_metadatas(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    ids = {t["name"]: t["topic_id"] for a in every_page(admin, list(TOPICS)) for t in a["topics"]}
    metadata = admin.describe_topics(list(TOPICS))
    assert ids == {t["name"]: uuid.UUID(t["topic_id"]) for t in metadata}


def test_a_cluster_without_kraft_has_no_eligible_leader_replicas(broker: BrokerProcess) -> None:
    answer = describe(broker, ["dtp-b"])
    for partition in answer.topics[0].partitions:
        # Empty, as Kafka answers for a partition without them, not null.
        assert partition.eligible_leader_replicas == []
        assert partition.last_known_elr == []


def test_pages_follow_the_cursor_over_every_partition_once(admin: KafkaAdminClient) -> None:
    every = [(name, p) for name in sorted(TOPICS) for p in range(TOPICS[name])]
    found = pages(admin, list(TOPICS), limit=4)
    assert [len(page) for page in found] == [4, 4, 4, 4]
    assert [tp for page in found for tp in page] == every
    # A page that ends with a topic's last partition points at the next topic's first.
    answer = admin.describe_topic_partitions(["dtp-a", "dtp-b"], response_partition_limit=1)
    assert answer["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 0}


def test_the_broker_caps_a_page_at_its_limit(admin: KafkaAdminClient) -> None:
    found = pages(admin, ["dtp-c"], limit=2000)
    assert [len(page) for page in found] == [BROKER_LIMIT, TOPICS["dtp-c"] - BROKER_LIMIT]
    # A limit below 1 is taken as 1, as Kafka takes it.
    assert [len(page) for page in pages(admin, ["dtp-d"], limit=0)] == [1, 1]


def test_every_topic_when_none_is_named(broker: BrokerProcess) -> None:
    answer = describe(broker, [], limit=2000, cursor=("dtp-b", 2))
    names = [t.name for t in answer.topics]
    # From the cursor on, in name order: dtp-b from partition 2.
    assert names[:2] == ["dtp-b", "dtp-c"]
    assert [p.partition_index for p in answer.topics[0].partitions] == [2, 3]
    assert answer.next_cursor is not None
    assert (answer.next_cursor.topic_name, answer.next_cursor.partition_index) == ("dtp-c", 4)
    # Internal topics are described as such.
    everything = describe(broker, ["__consumer_offsets"], limit=1)
    assert everything.topics[0].is_internal is True


def test_unknown_and_illegal_names(broker: BrokerProcess) -> None:
    answer = describe(broker, ["dtp-a", "dtp-nowhere", "no/slashes"])
    errors = {t.name: t.error_code for t in answer.topics}
    assert errors == {
        "dtp-a": ErrorCode.NONE,
        "dtp-nowhere": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "no/slashes": ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
    missing = next(t for t in answer.topics if t.name == "dtp-nowhere")
    assert missing.partitions == [] and missing.topic_id in (None, uuid.UUID(int=0))


def test_a_cursor_the_request_cannot_start_from_is_invalid(broker: BrokerProcess) -> None:
    # The cursor's topic must be among those named, its partition not negative.
    for cursor in (("dtp-c", 0), ("dtp-b", -1)):
        answer = describe(broker, ["dtp-a", "dtp-b"], cursor=cursor)
        assert {t.name: t.error_code for t in answer.topics} == {
            "dtp-a": ErrorCode.INVALID_REQUEST,
            "dtp-b": ErrorCode.INVALID_REQUEST,
        }
        assert all(t.partitions == [] for t in answer.topics)
        assert answer.next_cursor is None
    # A cursor past a topic's last partition describes none of it.
    answer = describe(broker, ["dtp-a"], cursor=("dtp-a", 5))
    assert answer.topics[0].error_code == ErrorCode.NONE and answer.topics[0].partitions == []
    assert broker.alive()


def test_confluent_kafka_describes_the_same_topics(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    """librdkafka's describe_topics asks Metadata, not this API: the two agree."""
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = confluent.describe_topics(
        TopicCollection(["dtp-b"]), request_timeout=10, include_authorized_operations=True
    )
    seen = futures["dtp-b"].result(10)
    described = admin.describe_topic_partitions(["dtp-b"])["topics"][0]
    assert [
        (p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
        for p in seen.partitions
    ] == [
        (p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
        for p in described["partitions"]
    ]
    operations = sum(1 << op.value for op in seen.authorized_operations)
    assert operations == described["topic_authorized_operations"]
