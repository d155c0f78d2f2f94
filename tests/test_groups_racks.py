"""Rack-aware assignment of consumer groups (KIP-848) on a cluster whose brokers have racks.

Three brokers, each in its own rack, a topic of six single-replica partitions
spread two to a broker, and three confluent-kafka members (``group.protocol=consumer``)
with ``client.rack`` set: each member is given the two partitions whose replica
is in its rack, so that it fetches within its rack. Brokers also say their rack
in Metadata and DescribeCluster, on a cluster and on a single broker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import herdless, succeeded
from tests.support.cluster import ClusterProcesses
from tests.support.members import wait_until

SETTLE_TIMEOUT_S = 60.0
GROUP_SETTINGS = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    racks = {broker_id: f"rack-{broker_id}" for broker_id in (1, 2, 3)}
    cluster = ClusterProcesses(tmp_path_factory.mktemp("racks"), 3, racks=racks, **GROUP_SETTINGS)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_each_member_is_given_the_partitions_in_its_rack(racked: ClusterProcesses) -> None:
    racked.create_topic("racked", 6, 1)
    topic = AdminClient({"bootstrap.servers": racked.bootstrap}).list_topics("racked", 30)
    replica = {p: meta.replicas[0] for p, meta in topic.topics["racked"].partitions.items()}
    in_rack = {f"rack-{b}": {p for p, r in replica.items() if r == b} for b in racked.brokers}
    assert sorted(len(ps) for ps in in_rack.values()) == [2, 2, 2], replica

    members = {
        rack: Consumer(
            {
                "bootstrap.servers": racked.bootstrap,
                "group.id": "racked",
                "group.protocol": "consumer",
                "client.rack": rack,
                "client.id": rack,
            }
        )
        for rack in in_rack
    }
    for consumer in members.values():
        consumer.subscribe(["racked"])

    def owned() -> dict[str, set[int]]:
        for consumer in members.values():
            consumer.poll(0.1)
        return {r: {tp.partition for tp in c.assignment()} for r, c in members.items()}

    try:
        wait_until(
            lambda: owned() == in_rack,
            SETTLE_TIMEOUT_S,
            "every member holding the partitions of its rack",
            lambda: f"owned {owned()}, in rack {in_rack}",
        )
        out = herdless("groups", "describe", "racked", "-o", "json", "-b", racked.bootstrap)
        (group,) = json.loads(succeeded(out))
        assert {m["client_id"]: m["rack"] for m in group["members"]} == {r: r for r in in_rack}
    finally:
        for consumer in members.values():
            consumer.close()


def test_brokers_say_their_racks(racked: ClusterProcesses) -> None:
    out = succeeded(herdless("cluster", "describe", "-o", "json", "-b", racked.bootstrap))
    brokers = json.loads(out)["brokers"]
    assert {b["broker"]: b["rack"] for b in brokers} == {b: f"rack-{b}" for b in racked.brokers}


@pytest.fixture(scope="module")
def one_racked_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data: Path = tmp_path_factory.mktemp("one-rack") / "data"
    with module_broker(data, "--set", "broker.rack=rack-x") as process:
        yield process


def test_a_single_broker_says_its_rack(one_racked_broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=one_racked_broker.bootstrap)
    try:
        (broker,) = admin.describe_cluster()["brokers"]
        assert broker["rack"] == "rack-x"
    finally:
        admin.close()
