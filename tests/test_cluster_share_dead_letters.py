"""A share group's dead letters on a cluster, where the dead-letter partition is led by
another broker than the share partition: its leader sends them there as a Produce
(acks=all) before it archives the record."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.protocol.errors import ErrorCode
from tests.support.cluster import ClusterProcesses, running_cluster
from tests.support.wire import Wire
from tests.test_group_configs import GROUP_CONFIG, alter, described
from tests.test_protocol_versions import topic_id_of
from tests.test_share_dead_letters import TOPIC_NAME, headers, produce, read_all
from tests.test_share_fetch import REJECT, Member, acquired, only_partition

TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    base: Path = tmp_path_factory.mktemp("cluster-share-dlq")
    with running_cluster(base, brokers=2) as processes:
        yield processes


def test_dead_letters_reach_a_partition_led_by_another_broker(
    cluster: ClusterProcesses,
) -> None:
    first, second = sorted(cluster.brokers)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topics = [
        NewTopic("orders", replica_assignment=[[first]], num_partitions=1),
        NewTopic(
            "dlq.orders",
            replica_assignment=[[second]],
            num_partitions=1,
            config={"errors.deadletterqueue.group.enable": "true"},
        ),
    ]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT_S)
    cluster.wait_serving("orders", "dlq.orders")
    leader = cluster.brokers[first]
    configs = {TOPIC_NAME.replace(".", "_"): "dlq.orders"}
    assert alter(leader.bootstrap, "workers", **configs) == "OK"
    # Every broker applies the group's configs when ZooKeeper tells it.
    deadline = time.monotonic() + TIMEOUT_S
    while described(leader, "workers")[TOPIC_NAME] != ("dlq.orders", GROUP_CONFIG):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    wire = Wire(leader)
    try:
        topic_id = topic_id_of(wire, "orders")
    finally:
        wire.close()
    member = Member(leader, "workers", topic_id)
    # The first fetch initializes the share partition through the share coordinator.
    while (got := member.fetch(max_wait_ms=1_000)).error_code != ErrorCode.NONE or any(
        p.error_code != ErrorCode.NONE for t in got.responses for p in t.partitions
    ):
        assert time.monotonic() < deadline, got
        member = Member(leader, "workers", topic_id)
    produce(leader, "orders", 1)
    assert acquired(member.fetch(max_wait_ms=10_000)) == [(0, 0, 1)]
    assert only_partition(member.acknowledge([(0, 0, [REJECT])])).error_code == ErrorCode.NONE
    [letter] = read_all(cluster.brokers[second], "dlq.orders", 1, wait_s=20)
    assert headers(letter)["__dlq.errors.topic"] == b"orders"
    assert headers(letter)["__dlq.errors.reason"] == b"rejected"
    assert (letter.key(), letter.value()) == (None, None)  # copies are off by default
