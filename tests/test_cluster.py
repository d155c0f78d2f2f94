"""A three-broker cluster on a real ZooKeeper, with real clients: replication as Kafka does it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeTopicPartitionsResponse

from herdless.coordinator import partition_for
from herdless.testing.broker import set_args
from tests.support.broker import free_port
from tests.support.cli import sigint_as_in_a_terminal
from tests.support.cluster import BROKER_SETTINGS, ClusterProcesses, running_cluster
from tests.support.requests import describe_topic_partitions_request
from tests.support.waiting import wait_for
from tests.support.wire import Wire
from tests.test_metrics import scrape
from tests.test_metrics import value as sample


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(tmp_path_factory.mktemp("cluster")) as processes:
        yield processes


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
    cluster.create_topic("spread", 6, 3)
    topic = cluster.metadata("spread").topics["spread"]
    leaders = [p.leader for p in topic.partitions.values()]
    assert sorted(set(leaders)) == [1, 2, 3], leaders
    for partition in topic.partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]


def test_acks_all_records_reach_every_replica_byte_for_byte(cluster: ClusterProcesses) -> None:
    cluster.create_topic("copies", 3, 3, **{"min.insync.replicas": "2"})
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


def test_followers_fetch_in_fetch_sessions(cluster: ClusterProcesses) -> None:
    cluster.create_topic("in-sessions", 6, 3)
    acked = produce(cluster, "in-sessions", [b"%d" % i for i in range(600)])
    assert len(consume_all(cluster, "in-sessions", 6, len(acked))) == len(acked)
    for broker_id, port in cluster.metrics_ports.items():
        # Each broker leads some of the partitions, and each of the other two follows
        # it in a session of its own.
        sessions = sample(scrape(port), "herdless_fetch_sessions")
        assert sessions is not None and sessions >= 2, (broker_id, sessions)


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
            # Configured as its cluster's brokers are: it waits 1.5 of their (short)
            # sessions for the holder's registration to go before refusing.
            *set_args(cluster.settings),
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


def herdless(*args: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "herdless", *args], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_cluster_describe_shows_brokers_and_the_controller(cluster: ClusterProcesses) -> None:
    view = json.loads(herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "json"))
    assert [b["broker"] for b in view["brokers"]] == [1, 2, 3]
    assert view["controller"] == cluster.metadata().controller_id
    assert [b["controller"] for b in view["brokers"]].count(True) == 1
    plain = herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "plain")
    assert plain.splitlines()[0].split("\t")[:4] == ["BROKER", "HOST", "PORT", "RACK"]


def commit_for_new_group(cluster: ClusterProcesses, group: str, topic: str) -> None:
    """One OffsetCommit makes an Empty group on its coordinator, as in Kafka."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1)])]
    deadline = time.monotonic() + 20
    while True:
        try:
            answer = admin.alter_consumer_group_offsets(request)[group].result(timeout=20)
            errors = [tp.error for tp in answer.topic_partitions]
            assert errors == [None], f"{group}: {errors}"
            return
        except KafkaException as exc:
            # The first request for a group creates __consumer_offsets; its
            # partitions have no leader for a moment.
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_cluster_describe_counts_the_groups_each_broker_coordinates(
    cluster: ClusterProcesses,
) -> None:
    cluster.create_topic("committed-to", 1, 3)
    partitions = int(BROKER_SETTINGS["offsets.topic.num.partitions"])
    # Offsets partition p gets p + 1 new groups, so that brokers leading different
    # partitions coordinate different numbers of groups.
    placed = dict.fromkeys(range(partitions), 0)
    n = 0
    while any(placed[p] <= p for p in placed):
        group = f"placed-{n}"
        n += 1
        p = partition_for(group, partitions)
        if placed[p] <= p:
            placed[p] += 1
            commit_for_new_group(cluster, group, "committed-to")

    offsets_topic = cluster.metadata().topics["__consumer_offsets"]
    leaders = {p: offsets_topic.partitions[p].leader for p in range(partitions)}
    assert len(set(leaders.values())) > 1, leaders
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    every_group = [g.group_id for g in admin.list_consumer_groups().result(timeout=20).valid]
    expected = dict.fromkeys([1, 2, 3], 0)
    for group in every_group:
        expected[leaders[partition_for(group, partitions)]] += 1
    assert sum(expected.values()) >= sum(p + 1 for p in range(partitions))

    view = json.loads(herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "json"))
    assert {b["broker"]: b["groups"] for b in view["brokers"]} == expected
    assert all(b["groups_error"] is None for b in view["brokers"])
    assert {b["broker"]: b["offsets_leader_of"] for b in view["brokers"]} == {
        broker: list(leaders.values()).count(broker) for broker in (1, 2, 3)
    }
    plain = herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "plain")
    header, *rows = [line.split("\t") for line in plain.splitlines()]
    assert header[-2:] == ["OFFSETS-LEADER-OF", "GROUPS"]
    assert {int(row[0]): int(row[-1]) for row in rows} == expected
    table = herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "table")
    assert "GROUPS" in table


def test_a_group_commits_offsets_of_partitions_its_coordinator_does_not_host(
    cluster: ClusterProcesses,
) -> None:
    # Two replicas of three brokers (not one: a later test stops a broker and expects
    # nothing offline).
    cluster.create_topic("two-copies", 1, 2)
    partitions = int(BROKER_SETTINGS["offsets.topic.num.partitions"])
    groups = {partition_for(f"far-{n}", partitions): f"far-{n}" for n in range(200)}
    assert sorted(groups) == list(range(partitions))
    for group in groups.values():
        commit_for_new_group(cluster, group, "two-copies")
    metadata = cluster.metadata()
    hosts = set(metadata.topics["two-copies"].partitions[0].replicas)
    coordinators = {p.leader for p in metadata.topics["__consumer_offsets"].partitions.values()}
    assert coordinators - hosts, "every coordinator hosts the topic: nothing shown"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for group in groups.values():
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition("two-copies", 0)])]
        fetched = admin.list_consumer_group_offsets(request)[group].result(timeout=20)
        assert [tp.offset for tp in fetched.topic_partitions] == [1], group


def test_cluster_describe_shows_a_broker_it_cannot_reach(cluster: ClusterProcesses) -> None:
    # Registered at an address where nothing listens: what clients see of a broker
    # killed a moment ago, until its ZooKeeper session expires.
    unreachable = cluster.add_broker(
        4, "--set", f"advertised.listeners=PLAINTEXT://127.0.0.1:{free_port()}"
    )
    try:
        unreachable.start()
        cluster.wait_for(lambda m: 4 in m.brokers, what="broker 4 registered")
        view = json.loads(herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "json"))
        rows = {b["broker"]: b for b in view["brokers"]}
        assert sorted(rows) == [1, 2, 3, 4]
        assert (rows[4]["groups"], rows[4]["groups_error"]) == (None, "unreachable")
        assert all(isinstance(rows[b]["groups"], int) for b in (1, 2, 3))
        plain = herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "plain")
        last = plain.splitlines()[-1].split("\t")
        assert (last[0], last[-1]) == ("4", "unreachable")
    finally:
        unreachable.stop()
        del cluster.brokers[4]
    cluster.wait_for(lambda m: sorted(m.brokers) == [1, 2, 3], what="broker 4 gone")


def test_describe_cluster_names_the_controller(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_cluster(request_timeout=10).result(timeout=20)
    assert described.controller.id == cluster.metadata().controller_id
    assert sorted(node.id for node in described.nodes) == [1, 2, 3]


def test_describe_topic_partitions_pages_through_any_broker(cluster: ClusterProcesses) -> None:
    """Each page from another broker, the cursor of one taken to the next: every broker
    names the replicated partitions' leaders, replicas and ISRs as Metadata does."""
    cluster.create_topic("described", 5, 3)
    metadata = cluster.metadata("described").topics["described"].partitions
    expected = [
        (p, metadata[p].leader, sorted(metadata[p].replicas), sorted(metadata[p].isrs))
        for p in sorted(metadata)
    ]
    assert {leader for _, leader, _, _ in expected} == {1, 2, 3}

    def pages() -> list[tuple[int, int, list[int], list[int]]] | None:
        found = []
        cursor = None
        for broker_id in (1, 2, 3):
            wire = Wire(cluster.brokers[broker_id])
            try:
                request = describe_topic_partitions_request(["described"], 2, cursor)
                answer = wire.call(request, DescribeTopicPartitionsResponse)
            finally:
                wire.close()
            (topic,) = answer.topics
            assert topic.error_code == 0 and topic.topic_id is not None
            found += [
                (p.partition_index, p.leader_id, sorted(p.replica_nodes), sorted(p.isr_nodes))
                for p in topic.partitions
            ]
            assert all(p.eligible_leader_replicas == [] for p in topic.partitions)
            if answer.next_cursor is None:
                break
            cursor = (answer.next_cursor.topic_name, answer.next_cursor.partition_index)
        # A broker may learn of a change a moment after the one Metadata was asked of.
        return found if found == expected else None

    wait_for(pages, "every broker's pages to be Metadata's partitions")


def test_a_consumer_group_commits_and_resumes_on_the_cluster(cluster: ClusterProcesses) -> None:
    cluster.create_topic("grouped", 3, 3)
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


def test_rebalances_are_recorded_whichever_broker_coordinates(cluster: ClusterProcesses) -> None:
    """A group's coordinator seldom leads the history topic's one partition: it forwards."""
    from herdless.coordinator import partition_for

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # The first FindCoordinator creates the internal topics.
    admin.describe_consumer_groups(["recorded-warm-up"])["recorded-warm-up"].exception(30)
    cluster.wait_for(lambda m: "__rebalance_history" in m.topics, what="the history topic")
    history_leader = cluster.leader_of("__rebalance_history", 0)
    group = next(
        f"recorded-{i}"
        for i in range(1000)
        if cluster.leader_of("__consumer_offsets", partition_for(f"recorded-{i}", 6))
        != history_leader
    )
    cluster.create_topic("recorded", 2, 3)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    consumer.subscribe(["recorded"])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment()
    consumer.close()
    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "history-reader",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition("__rebalance_history", 0, 0)])
    causes: list[str] = []
    deadline = time.monotonic() + 30
    while "member left" not in causes and time.monotonic() < deadline:
        for message in reader.consume(100, timeout=0.5):
            if message.error() is None and message.key() == group.encode():
                causes.append(json.loads(message.value())["cause"])
    reader.close()
    assert causes[0] == "member joined" and "member left" in causes, causes


def test_kafka_python_produces_and_consumes_with_acks_all(cluster: ClusterProcesses) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition

    cluster.create_topic("kp", 3, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    futures = [producer.send("kp", key=b"k%d" % i, value=b"kp-%d" % i) for i in range(600)]
    producer.flush(30)
    acked = [f.get(timeout=30) for f in futures]
    producer.close()
    assert {m.partition for m in acked} == {0, 1, 2}
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    consumer.assign([KafkaTopicPartition("kp", p) for p in range(3)])
    consumer.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 600 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            got.extend(r.value for r in records)
    consumer.close()
    assert sorted(got) == sorted(b"kp-%d" % i for i in range(600))


def test_aiokafka_produces_and_consumes_with_acks_all(cluster: ClusterProcesses) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    cluster.create_topic("aio", 3, 3)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(300):
                await producer.send_and_wait("aio", b"aio-%d" % i, key=b"%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            consumer.assign([AioTopicPartition("aio", p) for p in range(3)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 30
            while len(got) < 300 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(run())
    assert sorted(got) == sorted(b"aio-%d" % i for i in range(300))


def test_kcat_produces_and_consumes(cluster: ClusterProcesses) -> None:
    import shutil

    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is not installed: apt-get install -y kcat"
    cluster.create_topic("kc", 2, 3)
    lines = "".join(f"kc-{i}\n" for i in range(200))
    subprocess.run(
        [kcat, "-P", "-b", cluster.bootstrap, "-t", "kc", "-X", "acks=all"],
        input=lines,
        text=True,
        check=True,
        timeout=60,
    )
    consumed = subprocess.run(
        [kcat, "-C", "-b", cluster.bootstrap, "-t", "kc", "-o", "beginning", "-e", "-q"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert sorted(consumed.stdout.split()) == sorted(f"kc-{i}" for i in range(200))


def test_configs_are_described_and_altered_from_any_broker(cluster: ClusterProcesses) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    cluster.create_topic("configured", 1, 2, **{"retention.ms": "3600000"})
    leader = cluster.leader_of("configured", 0)
    (not_hosting,) = [
        b
        for b in (1, 2, 3)
        if b not in cluster.metadata("configured").topics["configured"].partitions[0].replicas
    ]
    admin = AdminClient({"bootstrap.servers": cluster.brokers[not_hosting].bootstrap})
    resource = ConfigResource("topic", "configured")
    described = admin.describe_configs([resource])[resource].result(timeout=20)
    assert described["retention.ms"].value == "3600000"
    altered = ConfigResource(
        "topic",
        "configured",
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([altered])[altered].result(timeout=20)
    leader_admin = AdminClient({"bootstrap.servers": cluster.brokers[leader].bootstrap})
    deadline = time.monotonic() + 10
    while True:
        seen = leader_admin.describe_configs([resource])[resource].result(timeout=20)
        if seen["retention.ms"].value == "7200000" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert seen["retention.ms"].value == "7200000"


def test_partitions_per_request_are_limited_on_the_cluster(cluster: ClusterProcesses) -> None:
    from confluent_kafka.admin import NewPartitions

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic("endless", 50_000, 3)], operation_timeout=10)
    with pytest.raises(KafkaException) as raised:
        futures["endless"].result(timeout=20)
    assert raised.value.args[0].name() == "INVALID_PARTITIONS"
    assert "max.partitions.per.request (1000)" in raised.value.args[0].str()
    assert "endless" not in cluster.metadata().topics
    cluster.create_topic("bounded", 1, 3)
    grown = admin.create_partitions([NewPartitions("bounded", 100_000)])["bounded"]
    with pytest.raises(KafkaException) as raised:
        grown.result(timeout=20)
    assert raised.value.args[0].name() == "INVALID_PARTITIONS"
    assert len(cluster.metadata().topics["bounded"].partitions) == 1


def test_create_partitions_adds_replicated_partitions(cluster: ClusterProcesses) -> None:
    from confluent_kafka.admin import NewPartitions

    cluster.create_topic("growing", 2, 3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_partitions([NewPartitions("growing", 4)])["growing"].result(timeout=20)
    cluster.wait_for(
        lambda m: (
            len(m.topics["growing"].partitions) == 4
            and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in m.topics["growing"].partitions.values()
            )
        ),
        what="4 partitions online",
    )
    acked = produce(cluster, "growing", [b"g%d" % i for i in range(400)])
    assert {p for p, _ in acked} == {0, 1, 2, 3}


def test_a_topic_created_while_a_broker_is_down(cluster: ClusterProcesses) -> None:
    from kazoo.client import KazooClient

    cluster.create_topic("before-outage", 1, 3, **{"min.insync.replicas": "2"})
    cluster.brokers[3].stop()
    try:
        cluster.wait_for(lambda m: sorted(m.brokers) == [1, 2], what="broker 3 gone")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        futures = admin.create_topics([NewTopic("during-outage", 2, 3)], operation_timeout=10)
        with pytest.raises(KafkaException) as raised:
            futures["during-outage"].result(timeout=20)
        error = raised.value.args[0]
        assert error.name() == "INVALID_REPLICATION_FACTOR"
        assert "larger than available brokers: 2" in error.str()
        # Nothing of it was written: no half-created topic to clean up.
        zk = KazooClient(cluster.zookeeper.connect)
        zk.start(10)
        try:
            assert zk.exists("/brokers/topics/during-outage") is None
            assert zk.exists("/config/topics/during-outage") is None
        finally:
            zk.stop()
        # Two of three replicas still take acks=all writes (min.insync.replicas=2).
        assert len(produce(cluster, "before-outage", [b"while-down"])) == 1
        # The operator sees what is under-replicated, and why.
        view = json.loads(herdless("cluster", "describe", "-b", cluster.bootstrap, "-o", "json"))
        assert [b["broker"] for b in view["brokers"]] == [1, 2]
        assert view["under_replicated"] > 0 and view["offline"] == 0
        unhealthy = {(p["topic"], p["partition"]) for p in view["unhealthy_partitions"]}
        assert ("before-outage", 0) in unhealthy
        described = json.loads(
            herdless("topics", "describe", "before-outage", "-b", cluster.bootstrap, "-o", "json")
        )
        (partition,) = described["partitions"]
        assert sorted(partition["replicas"]) == [1, 2, 3]
        assert sorted(partition["isr"]) == [1, 2]
        assert partition["offline_replicas"] == [3]
    finally:
        cluster.brokers[3].start()
    cluster.wait_for(
        lambda m: (
            sorted(m.brokers) == [1, 2, 3]
            and len(m.topics["before-outage"].partitions[0].isrs) == 3
        ),
        what="broker 3 back in the ISR",
    )


def test_no_coordinator_until_the_offsets_topic_can_have_its_replicas(tmp_path: Path) -> None:
    from herdless.protocol.codec import REQUESTS, RESPONSES
    from tests.support.wire import Wire

    three_copies = {"offsets.topic.replication.factor": "3"}  # Kafka's default
    with running_cluster(tmp_path / "small", brokers=1, **three_copies) as small:
        find = REQUESTS[10](key="lonely", key_type=0)
        find.API_VERSION = 1
        wire = Wire(small.brokers[1])
        try:
            answer = wire.call(find, RESPONSES[10])
        finally:
            wire.close()
        assert answer.error_code == 15  # COORDINATOR_NOT_AVAILABLE, as Kafka answers
        assert "__consumer_offsets" not in small.metadata().topics


def test_cluster_up_starts_zookeeper_and_brokers_and_ctrl_c_stops_them(tmp_path: Path) -> None:
    import signal

    from tests.support.broker import free_port

    first, zk_port = free_port(), free_port()
    # Two consecutive free ports for the two brokers.
    while not _port_free(first + 1):
        first = free_port()
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "herdless",
            "cluster",
            "up",
            "--brokers",
            "2",
            "--port",
            str(first),
            "--zookeeper-port",
            str(zk_port),
            "--data-dir",
            str(tmp_path / "laptop"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,  # stopped with Ctrl-C below
    )
    try:
        deadline = time.monotonic() + 60
        bootstrap = f"127.0.0.1:{first},127.0.0.1:{first + 1}"
        while True:
            assert up.poll() is None, up.communicate()
            try:
                view = json.loads(herdless("cluster", "describe", "-b", bootstrap, "-o", "json"))
                if len(view["brokers"]) == 2 and view["controller"] in (1, 2):
                    break
            except (AssertionError, ValueError):
                pass
            assert time.monotonic() < deadline, "the local cluster did not come up"
            time.sleep(0.5)
    finally:
        up.send_signal(signal.SIGINT)
        _, stderr = up.communicate(timeout=60)
    assert up.returncode == 0, stderr  # Ctrl-C is how a local cluster is meant to stop
    assert "2 brokers up" in stderr and "Traceback" not in stderr
    for port in (first, first + 1, zk_port):
        assert not _listening(port), f"something still listens on {port} after Ctrl-C"


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_requests_to_a_follower_or_with_another_epoch_are_fenced(cluster: ClusterProcesses) -> None:
    from kafka import KafkaAdminClient

    from herdless.protocol.codec import REQUESTS, RESPONSES
    from tests.support.wire import Wire

    cluster.create_topic("fenced", 1, 3)
    produce(cluster, "fenced", [b"f%d" % i for i in range(5)])
    first_leader = cluster.leader_of("fenced", 0)
    cluster.brokers[first_leader].restart()  # a graceful stop moves leadership at once
    cluster.wait_for(
        lambda m: len(m.brokers) == 3 and len(m.topics["fenced"].partitions[0].isrs) == 3,
        what="fenced back to a full ISR",
    )
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    (described,) = admin.describe_topics(["fenced"])
    admin.close()
    (partition,) = described["partitions"]
    leader, epoch = partition["leader_id"], partition["leader_epoch"]
    assert epoch >= 1
    follower = next(b for b in partition["replica_nodes"] if b != leader)

    def list_offsets(broker_id: int, current_epoch: int) -> object:
        request = REQUESTS[2](
            replica_id=-1,
            isolation_level=0,
            topics=[
                REQUESTS[2].ListOffsetsTopic(
                    name="fenced",
                    partitions=[
                        REQUESTS[2].ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=current_epoch, timestamp=-1
                        )
                    ],
                )
            ],
        )
        request.API_VERSION = 5
        wire = Wire(cluster.brokers[broker_id])
        try:
            return wire.call(request, RESPONSES[2]).topics[0].partitions[0]
        finally:
            wire.close()

    assert list_offsets(follower, -1).error_code == 6  # NOT_LEADER_OR_FOLLOWER
    assert list_offsets(leader, epoch - 1).error_code == 74  # FENCED_LEADER_EPOCH
    assert list_offsets(leader, epoch + 1).error_code == 75  # UNKNOWN_LEADER_EPOCH
    answer = list_offsets(leader, epoch)
    assert (answer.error_code, answer.offset, answer.leader_epoch) == (0, 5, epoch)

    # OffsetForLeaderEpoch: epoch 0 (the first leader's) ended where the next began.
    request = REQUESTS[23](
        replica_id=-1,
        topics=[
            REQUESTS[23].OffsetForLeaderTopic(
                topic="fenced",
                partitions=[
                    REQUESTS[23].OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=epoch, leader_epoch=0
                    )
                ],
            )
        ],
    )
    request.API_VERSION = 4
    wire = Wire(cluster.brokers[leader])
    try:
        ended = wire.call(request, RESPONSES[23]).topics[0].partitions[0]
    finally:
        wire.close()
    assert ended.error_code == 0
    assert ended.end_offset == 5 and 0 <= ended.leader_epoch < epoch


def test_acks_all_with_no_time_to_replicate_is_answered_timed_out(
    cluster: ClusterProcesses,
) -> None:
    """A produce with acks=all and timeout_ms=0 cannot wait for the followers: Kafka answers
    REQUEST_TIMED_OUT (the records are written), and the connection serves on."""
    from herdless.protocol.codec import RESPONSES
    from tests.support.requests import produce_request, v2_batch
    from tests.support.wire import Wire

    cluster.create_topic("no-time", 1, 3)
    leader = cluster.leader_of("no-time", 0)
    request = produce_request(9, "no-time", v2_batch([(b"k", b"v", 0)]))
    request.timeout_ms = 0
    wire = Wire(cluster.brokers[leader])
    try:
        answered = wire.call(request, RESPONSES[0]).responses[0].partition_responses[0]
        assert answered.error_code == 7  # REQUEST_TIMED_OUT
        again = produce_request(9, "no-time", v2_batch([(b"k", b"w", 0)]))
        assert wire.call(again, RESPONSES[0]).responses[0].partition_responses[0].error_code == 0
    finally:
        wire.close()
