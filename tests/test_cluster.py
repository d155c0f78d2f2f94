"""A three-broker cluster on a real ZooKeeper, with real clients: replication as Kafka does it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import ClusterProcesses, running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as processes:
        yield processes


def create_topic(
    cluster: ClusterProcesses, name: str, partitions: int, rf: int, **configs: str
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, rf, config=configs)], operation_timeout=20
    )
    futures[name].result(timeout=30)
    cluster.wait_for(
        lambda m: (
            name in m.topics
            and len(m.topics[name].partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == rf for p in m.topics[name].partitions.values())
        ),
        what=f"{name} online with full ISRs",
    )


def produce(
    cluster: ClusterProcesses, topic: str, values: list[bytes], **settings: object
) -> list[tuple[int, int]]:
    """Produce with acks=all; returns (partition, offset) of each acknowledged record."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            **settings,
        }
    )
    acked: list[tuple[int, int]] = []
    errors: list[str] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for value in values:
        producer.produce(topic, value=value, key=value, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return acked


def consume_all(
    cluster: ClusterProcesses, topic: str, partitions: int, expected: int
) -> list[tuple[int, int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(seen) < expected and time.monotonic() < deadline:
        for message in consumer.consume(500, timeout=1):
            if message.error() is None:
                seen.append((message.partition(), message.offset(), message.value()))
    consumer.close()
    return seen


def test_brokers_register_and_elect_one_controller(cluster: ClusterProcesses) -> None:
    metadata = cluster.metadata()
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert metadata.controller_id in (1, 2, 3)
    # Every broker names the same controller and the same brokers.
    for process in cluster.brokers.values():
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        seen = admin.list_topics(timeout=10)
        assert seen.controller_id == metadata.controller_id
        assert sorted(seen.brokers) == [1, 2, 3]


def test_replicated_topic_is_spread_over_the_brokers(cluster: ClusterProcesses) -> None:
    create_topic(cluster, "spread", 6, 3)
    topic = cluster.metadata("spread").topics["spread"]
    leaders = [p.leader for p in topic.partitions.values()]
    assert sorted(set(leaders)) == [1, 2, 3], leaders
    for partition in topic.partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]


def test_acks_all_records_reach_every_replica_byte_for_byte(cluster: ClusterProcesses) -> None:
    create_topic(cluster, "copies", 3, 3, **{"min.insync.replicas": "2"})
    values = [f"record-{i}".encode() for i in range(3000)]
    acked = produce(cluster, "copies", values)
    assert len(acked) == len(values)
    seen = consume_all(cluster, "copies", 3, len(values))
    assert sorted(v for _, _, v in seen) == sorted(values)
    assert len({(p, o) for p, o, _ in seen}) == len(seen)

    # Once the followers have caught up, every replica's log is the leader's, byte for byte.
    def logs_of(broker_id: int, partition: int) -> bytes:
        directory = cluster.brokers[broker_id].data_dir / f"copies-{partition}"
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))

    deadline = time.monotonic() + 20
    while True:
        differing = [p for p in range(3) if len({logs_of(b, p) for b in (1, 2, 3)}) != 1]
        if not differing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not differing, f"partitions {differing} differ between replicas"
    assert all(logs_of(1, p) for p in range(3))


def test_replication_factor_above_the_broker_count_is_refused(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic("too-many", 1, 4)], operation_timeout=10)
    with pytest.raises(KafkaException) as raised:
        futures["too-many"].result(timeout=20)
    error = raised.value.args[0]
    assert error.name() == "INVALID_REPLICATION_FACTOR"
    assert "larger than available brokers: 3" in error.str()
    assert "too-many" not in cluster.metadata().topics


def test_a_duplicate_broker_id_is_refused_with_a_clear_error(
    cluster: ClusterProcesses, tmp_path: Path
) -> None:
    completed = subprocess.run(
        [
            "herdless",
            "serve",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "dup"),
            "--zookeeper",
            cluster.zookeeper.connect,
            "--broker-id",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode != 0
    assert "broker id 2 is already registered by a live broker" in completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout


def test_an_unreachable_zookeeper_is_a_clear_error(tmp_path: Path) -> None:
    from tests.support.broker import free_port

    completed = subprocess.run(
        [
            "herdless",
            "serve",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "lonely"),
            "--zookeeper",
            f"127.0.0.1:{free_port()}",
            "--set",
            "zookeeper.connection.timeout.ms=2000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode != 0
    assert "ZooKeeper" in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout


def test_describe_cluster_names_the_controller(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_cluster(request_timeout=10).result(timeout=20)
    assert described.controller.id == cluster.metadata().controller_id
    assert sorted(node.id for node in described.nodes) == [1, 2, 3]


def test_a_consumer_group_commits_and_resumes_on_the_cluster(cluster: ClusterProcesses) -> None:
    create_topic(cluster, "grouped", 3, 3)
    values = [f"g-{i}".encode() for i in range(300)]
    produce(cluster, "grouped", values)

    def member() -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "cluster-readers",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["grouped"])
        return consumer

    first = member()
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 150 and time.monotonic() < deadline:
        for message in first.consume(50, timeout=1):
            if message.error() is None:
                got.append(message.value())
    first.commit(asynchronous=False)
    first.close()

    second = member()
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        for message in second.consume(100, timeout=1):
            if message.error() is None:
                got.append(message.value())
    second.close()
    assert sorted(got) == sorted(values)
