"""Faults in a three-broker cluster under acks=all load: nothing acknowledged is lost.

Each test runs a writer (confluent-kafka, acks=all, idempotent) against a
topic with replication factor 3 and min.insync.replicas 2, injects a fault at
a random moment, lets the cluster recover, and checks what was acknowledged
against what a consumer and every replica's log hold afterwards.
"""

from __future__ import annotations

import random
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.checker import (
    Writer,
    high_watermarks,
    read_partitions,
)
from tests.support.cluster import (
    SESSION_TIMEOUT_MS,
    ClusterProcesses,
    running_cluster,
    verify_acknowledged,
)

PARTITIONS = 3


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(tmp_path_factory.mktemp("cluster-faults")) as processes:
        yield processes


@pytest.fixture
def cluster(shared_cluster: ClusterProcesses) -> ClusterProcesses:
    """The module's cluster, restored after the last test's faults: each test has its own
    topics, and starts with every broker up and every ISR full."""
    shared_cluster.restore()
    return shared_cluster


def create(cluster: ClusterProcesses, topic: str) -> None:
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})


def test_sigkill_of_a_leader_during_acks_all_produce(cluster: ClusterProcesses) -> None:
    create(cluster, "killed")
    writer = Writer(cluster.bootstrap, "killed").start()
    time.sleep(random.uniform(0.5, 2.0))
    victim = cluster.leader_of("killed", 0)
    cluster.brokers[victim].kill()
    killed_at = time.monotonic()
    cluster.wait_for(
        lambda m: m.topics["killed"].partitions[0].leader not in (victim, -1),
        what="a new leader for partition 0",
    )
    failover = time.monotonic() - killed_at
    time.sleep(random.uniform(0.5, 2.0))
    cluster.brokers[victim].start()
    verify_acknowledged(cluster, writer, "killed", PARTITIONS)
    # The controller notices a dead broker when its ZooKeeper session expires.
    assert failover < SESSION_TIMEOUT_MS / 1000 + 5, failover


def test_a_leader_paused_past_its_session_acknowledges_nothing_more(
    cluster: ClusterProcesses,
) -> None:
    create(cluster, "paused")
    writer = Writer(cluster.bootstrap, "paused").start()
    time.sleep(random.uniform(0.5, 1.5))
    victim = cluster.leader_of("paused", 0)
    cluster.pause(victim)
    paused_at = time.monotonic()
    cluster.wait_for(
        lambda m: m.topics["paused"].partitions[0].leader not in (victim, -1),
        what="a new leader while the old one is paused",
    )
    time.sleep(SESSION_TIMEOUT_MS / 1000 + random.uniform(0, 1))
    acked_before_resume = len(writer.acked)
    cluster.resume(victim)
    resumed_at = time.monotonic()
    time.sleep(2)
    verify_acknowledged(cluster, writer, "paused", PARTITIONS)
    assert acked_before_resume > 0
    assert resumed_at - paused_at > SESSION_TIMEOUT_MS / 1000


def test_rolling_restart_of_every_broker(cluster: ClusterProcesses) -> None:
    create(cluster, "rolling")
    writer = Writer(cluster.bootstrap, "rolling").start()
    for broker_id in (1, 2, 3):
        time.sleep(random.uniform(0.3, 1.0))
        cluster.brokers[broker_id].restart(hard=random.random() < 0.5)
        cluster.wait_serving("rolling")
    verify_acknowledged(cluster, writer, "rolling", PARTITIONS)


def test_a_restarted_broker_answers_nobody_before_it_knows_the_cluster(
    cluster: ClusterProcesses,
) -> None:
    """A broker restarted after SIGKILL waits for its previous ZooKeeper session to
    expire before it registers. Until it has registered and read the cluster's state it
    must not answer clients: it once answered Metadata with no brokers, and librdkafka
    (2.10 on) forgets every broker a Metadata answer leaves out, so a producer asking it
    was left with no broker at all and stalled until it bootstrapped again, minutes later."""
    from herdless.protocol.codec import REQUESTS, RESPONSES
    from tests.support.wire import Wire

    create(cluster, "restarted")
    victim = cluster.brokers[2]
    victim.kill()
    victim.launch()  # at once: its previous session is still alive
    Request = REQUESTS[3]
    request = Request(
        topics=[Request.MetadataRequestTopic(name="restarted")],
        # As a producer asks: an unknown topic may be created.
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    request.API_VERSION = 9
    answers = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            wire = Wire(victim, timeout=10)
        except OSError:
            time.sleep(0.05)  # not serving yet
            continue
        try:
            answer = wire.call(request, RESPONSES[3])
        except OSError:
            continue
        finally:
            wire.close()
        brokers = sorted(b.node_id for b in answer.brokers)
        answers.append((brokers, [(t.name, t.error_code) for t in answer.topics]))
        if 2 in brokers:
            break
    assert answers, "the restarted broker never answered"
    assert all(a == ([1, 2, 3], [("restarted", 0)]) for a in answers), answers


def test_zookeeper_restart(cluster: ClusterProcesses) -> None:
    create(cluster, "zk-restart")
    writer = Writer(cluster.bootstrap, "zk-restart").start()
    time.sleep(random.uniform(0.5, 1.5))
    cluster.zookeeper.restart()
    time.sleep(random.uniform(0.5, 1.5))
    verify_acknowledged(cluster, writer, "zk-restart", PARTITIONS)
    # A restart slower than the session timeout expires the brokers' sessions: each
    # registers again, and the cluster is whole once more.
    cluster.restore()
    # Every broker still stops on SIGTERM, all at once: the last one's controller and
    # fetchers come and go while it stops (a lost cancellation once kept one running).
    create(cluster, "zk-restart-after")
    processes = [b.process for b in cluster.brokers.values()]
    for process in processes:
        assert process is not None
        process.send_signal(signal.SIGTERM)
    codes = [p.wait(30) for p in processes if p is not None]
    assert codes == [0, 0, 0], cluster.logs()
    for broker in cluster.brokers.values():
        broker.start()
    cluster.wait_for(
        lambda m: len(m.brokers) == len(cluster.brokers) and m.controller_id >= 0,
        timeout=60,
        what="every broker registered again",
    )


def test_consumers_read_only_what_the_isr_holds(tmp_path: Path) -> None:
    slow = {"replica.lag.time.max.ms": "20000", "zookeeper.session.timeout.ms": "20000"}
    with running_cluster(tmp_path / "cluster", **slow) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("committed", 1, 3)])["committed"].result(timeout=30)
        cluster.wait_for(
            lambda m: (
                "committed" in m.topics and len(m.topics["committed"].partitions[0].isrs) == 3
            ),
            what="committed online",
        )
        leader = cluster.leader_of("committed", 0)
        followers = [b for b in cluster.brokers if b != leader]
        bootstrap = cluster.brokers[leader].bootstrap

        def send(values: list[bytes], acks: str) -> None:
            producer = Producer({"bootstrap.servers": bootstrap, "acks": acks})
            for value in values:
                producer.produce("committed", value)
            assert producer.flush(20) == 0

        send([b"c%d" % i for i in range(10)], "all")
        for follower in followers:
            cluster.pause(follower)
        try:
            # acks=1: the leader has these, its followers do not.
            send([b"u%d" % i for i in range(5)], "1")
            ends = high_watermarks(bootstrap, "committed", 1)
            seen = read_partitions(bootstrap, "committed", 1, {0: 15}, timeout=2)
            assert ends == {0: 10}
            assert [v for _, v in seen[0]] == [b"c%d" % i for i in range(10)]
        finally:
            for follower in followers:
                cluster.resume(follower)
        seen = read_partitions(bootstrap, "committed", 1, {0: 15}, timeout=20)
        assert len(seen[0]) == 15


def test_the_group_coordinator_moves_with_its_offsets_partition(
    cluster: ClusterProcesses,
) -> None:
    from confluent_kafka import Consumer

    from herdless.coordinator import partition_for

    create(cluster, "grouped")
    values = [b"g-%d" % i for i in range(600)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for value in values:
        producer.produce("grouped", value)
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "movers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["grouped"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < 300 and time.monotonic() < deadline:
        for message in consumer.consume(50, timeout=1):
            if message.error() is None:
                seen.append(message.value())
    consumer.commit(asynchronous=False)
    # Kill the broker that coordinates the group: the leader of its offsets partition.
    offsets_partition = partition_for("movers", 6)
    coordinator = cluster.leader_of("__consumer_offsets", offsets_partition)
    cluster.brokers[coordinator].kill()
    successor = cluster.wait_for(
        lambda m: (
            (
                m.topics["__consumer_offsets"].partitions[offsets_partition].leader
                not in (coordinator, -1)
            )
            and m.topics["__consumer_offsets"].partitions[offsets_partition].leader
        ),
        what="a new coordinator",
    )
    # The member carries on with the new coordinator, and commits there.
    deadline = time.monotonic() + 60
    while len(seen) < len(values) and time.monotonic() < deadline:
        for message in consumer.consume(50, timeout=1):
            if message.error() is None:
                seen.append(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    # The successor had the group's offsets replayed already (a warm standby): on
    # election it replayed nothing, or only the tail it had not seen committed.
    takeovers = re.findall(
        rf"coordinating the groups of __consumer_offsets-{offsets_partition}: \d+ groups;"
        r" (\d+) records replayed, (\d+) of them since it became leader",
        # The whole log: a tail may have lost the takeover under the lines after it.
        cluster.brokers[successor].log_path.read_text(errors="replace"),
    )
    assert takeovers, cluster.brokers[successor].log_tail()
    replayed, since_leader = map(int, takeovers[-1])
    assert replayed > 0 and since_leader < replayed
    cluster.brokers[coordinator].start()
    assert sorted(set(seen)) == sorted(values)
    # What was committed before and after the move is all there: nothing left to read.
    again = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "movers",
            "auto.offset.reset": "earliest",
        }
    )
    again.subscribe(["grouped"])
    leftover = [m for m in again.consume(100, timeout=8) if m.error() is None]
    again.close()
    assert leftover == []
