"""A cluster in a network lab: ZooKeeper and each broker in a network namespace of its
own, partitioned silently while clients in the test process keep using it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient

from herdless.cluster.layout import BROKER_IDS_PATH
from tests.support.cluster import (
    SESSION_TIMEOUT_MS,
    ZOOKEEPER_NODE,
    LabCluster,
    running_lab_cluster,
)
from tests.support.members import wait_until

# Time for ZooKeeper to expire a session past its timeout and for a poll to see it.
EXPIRY_SLACK_S = 5.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabCluster]:
    with running_lab_cluster(tmp_path_factory.mktemp("cluster")) as processes:
        yield processes


@pytest.fixture
def zookeeper(cluster: LabCluster) -> Iterator[KazooClient]:
    """A ZooKeeper client in the test process, the root namespace."""
    client = KazooClient(cluster.zookeeper.connect)
    client.start(10)
    yield client
    client.stop()
    client.close()


def produce(cluster: LabCluster, topic: str, values: list[bytes]) -> None:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    errors: list[str] = []
    for value in values:
        producer.produce(
            topic, value, on_delivery=lambda err, _: err is None or errors.append(str(err))
        )
    assert producer.flush(30) == 0
    assert not errors, errors


def registered(zookeeper: KazooClient) -> set[int]:
    return {int(child) for child in zookeeper.get_children(BROKER_IDS_PATH)}


def test_every_process_runs_in_its_own_namespace_on_its_own_address(
    cluster: LabCluster,
) -> None:
    ours = os.readlink("/proc/self/ns/net")
    processes = {ZOOKEEPER_NODE: cluster.zookeeper}
    processes |= {cluster.node(i): p for i, p in cluster.brokers.items()}
    namespaces = set()
    for node, process in processes.items():
        assert process.process is not None
        # The pid started is the server's own (signals reach it), in the node's namespace.
        namespace = os.readlink(f"/proc/{process.process.pid}/ns/net")
        assert namespace != ours
        namespaces.add(namespace)
        assert process.host == cluster.lab.address(node)
    assert len(namespaces) == len(processes)
    # Brokers advertise their own addresses: a client follows metadata to them.
    brokers = cluster.metadata().brokers
    assert {b.id: b.host for b in brokers.values()} == {
        i: cluster.lab.address(cluster.node(i)) for i in cluster.brokers
    }


def test_clients_in_the_test_process_produce_and_consume_through_the_lab(
    cluster: LabCluster,
) -> None:
    cluster.create_topic("through-the-lab", 3, 3, **{"min.insync.replicas": "2"})
    values = [f"record-{n}".encode() for n in range(30)]
    produce(cluster, "through-the-lab", values)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "lab-readers",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["through-the-lab"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < len(values) and time.monotonic() < deadline:
        for message in consumer.consume(100, timeout=1):
            if message.error() is None:
                seen.append(message.value())
    consumer.close()
    assert sorted(seen) == sorted(values)


def test_a_broker_cut_from_zookeeper_is_deregistered_and_comes_back_on_heal(
    cluster: LabCluster, zookeeper: KazooClient
) -> None:
    controller = cluster.metadata().controller_id
    victim = max(i for i in cluster.brokers if i != controller)
    assert registered(zookeeper) == set(cluster.brokers)
    cluster.cut_from_zookeeper(victim)
    try:
        gone_after = wait_until(
            lambda: victim not in registered(zookeeper),
            SESSION_TIMEOUT_MS / 1000 + EXPIRY_SLACK_S,
            f"broker {victim} gone from {BROKER_IDS_PATH}",
            cluster.logs,
        )
        # Its process runs on, and the clients still reach it: only ZooKeeper is cut.
        assert cluster.brokers[victim].alive()
        print(f"broker {victim} deregistered {gone_after:.1f}s after the cut")
    finally:
        cluster.heal_network()
    wait_until(
        lambda: victim in registered(zookeeper),
        30,
        f"broker {victim} registered again",
        cluster.logs,
    )
    cluster.wait_registered(victim)
    cluster.create_topic("after-the-heal", 1, 3)
    produce(cluster, "after-the-heal", [b"healed"])
