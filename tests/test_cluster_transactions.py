"""Transactions on a three-broker cluster: the transaction coordinator writes the
markers of a confluent-kafka producer's transactions on partition leaders that are
other brokers (WriteTxnMarkers between brokers), and a partition leader asks the
coordinator on another broker whether a transaction's first batch belongs to it
(AddPartitionsToTxn's verify-only form). A broker refuses markers for a partition it
does not lead, and a coordinator whose partition leader died writes the marker at the
new leader."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.broker.peers.connection import PeerConnection
from herdless.coordinator import partition_for
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from tests.support.cluster import ClusterProcesses, running_cluster
from tests.support.waiting import wait_for

TIMEOUT_S = 60
TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_PARTITIONS = 6  # transaction.state.log.num.partitions of the cluster
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    base: Path = tmp_path_factory.mktemp("cluster-transactions")
    with running_cluster(base) as processes:
        yield processes


def high_watermarks(cluster: ClusterProcesses, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "txn-watermarks"})
    try:
        return [
            consumer.get_watermark_offsets(KafkaPartition(topic, p), TIMEOUT_S)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def test_markers_reach_leaders_on_other_brokers(cluster: ClusterProcesses) -> None:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(TIMEOUT_S)
    leaders = {p: cluster.leader_of(topic, p) for p in range(PARTITIONS)}
    txn_id = f"cluster-{topic}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(TIMEOUT_S)
    coordinator = cluster.leader_of(
        TRANSACTION_STATE_TOPIC, partition_for(txn_id, TRANSACTION_STATE_PARTITIONS)
    )
    # Three partitions led by three brokers: at least two are not the coordinator.
    assert len(set(leaders.values())) == PARTITIONS, leaders
    assert sum(1 for leader in leaders.values() if leader != coordinator) >= 2

    producer.begin_transaction()
    for i in range(3 * PARTITIONS):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(TIMEOUT_S)
    # Three records and a COMMIT marker in each partition.
    wait_for(
        lambda: high_watermarks(cluster, topic) == [4] * PARTITIONS,
        "a COMMIT marker in every partition",
        timeout=TIMEOUT_S,
    )

    producer.begin_transaction()
    producer.produce(topic, value=b"dropped", partition=0)
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    wait_for(
        lambda: high_watermarks(cluster, topic) == [6, 4, 4],
        "an ABORT marker in partition 0",
        timeout=TIMEOUT_S,
    )
    # Said once the transaction completes, just after its markers are written.
    for ended in ("committed", "aborted"):
        wait_for(
            lambda ended=ended: (
                f"transaction {txn_id} {ended}" in cluster.brokers[coordinator].log()
            ),
            f"the coordinator saying the transaction {ended}",
            timeout=TIMEOUT_S,
        )


def test_a_new_coordinator_serves_the_transactional_id(cluster: ClusterProcesses) -> None:
    """The coordinator's broker is killed: a follower of its `__transaction_state`
    partition (a warm standby) takes over, knows the transactional id, and fences the
    producer of the old epoch when a new one starts."""
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(TIMEOUT_S)
    txn_id = f"failover-{topic}"
    first = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.produce(topic, value=b"before", partition=0)
    first.commit_transaction(TIMEOUT_S)
    state_partition = partition_for(txn_id, TRANSACTION_STATE_PARTITIONS)
    coordinator = cluster.leader_of(TRANSACTION_STATE_TOPIC, state_partition)
    # Killed once the transaction completed: a coordinator killed before that sends
    # the markers again, as Kafka's does, and the partition holds two (harmless).
    wait_for(
        lambda: f"transaction {txn_id} committed" in cluster.brokers[coordinator].log(),
        "the first transaction completing",
        timeout=TIMEOUT_S,
    )
    cluster.kill(coordinator)
    try:
        successor = wait_for(
            lambda: (
                (leader := cluster.leader_of(TRANSACTION_STATE_TOPIC, state_partition))
                != coordinator
                and leader
            ),
            "a new leader of the transactional id's partition",
            timeout=TIMEOUT_S,
        )
        second = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
        second.init_transactions(TIMEOUT_S)
        second.begin_transaction()
        for p in range(PARTITIONS):
            second.produce(topic, value=b"after", partition=p)
        second.commit_transaction(TIMEOUT_S)
        # partition 0: a record and its marker from each producer; the others one of each.
        wait_for(
            lambda: high_watermarks(cluster, topic) == [4, 2, 2],
            "markers from the new coordinator",
            timeout=TIMEOUT_S,
        )
        log = cluster.brokers[successor].log()
        assert (
            f"coordinating the transactions of {TRANSACTION_STATE_TOPIC}-{state_partition}" in log
        )
        assert f"transactional id {txn_id}: a new producer fenced" in log
    finally:
        cluster.restart(coordinator)


def new_topic(cluster: ClusterProcesses) -> str:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(TIMEOUT_S)
    return topic


def log_lines(cluster: ClusterProcesses, broker_id: int, *words: str) -> list[str]:
    log = cluster.brokers[broker_id].log()
    return [line for line in log.splitlines() if all(w in line for w in words)]


def test_markers_for_a_partition_the_broker_does_not_lead(cluster: ClusterProcesses) -> None:
    """WriteTxnMarkers to a follower: NOT_LEADER_OR_FOLLOWER, said once on that broker."""
    topic = new_topic(cluster)
    leader = cluster.leader_of(topic, 0)
    follower = next(i for i in cluster.brokers if i != leader)
    process = cluster.brokers[follower]

    async def send() -> object:
        connection = PeerConnection(process.host, process.port, "moved-markers", TIMEOUT_S)
        try:
            return await connection.request(
                ApiKey.WRITE_TXN_MARKERS,
                1,
                markers=[
                    {
                        "producer_id": 4242,
                        "producer_epoch": 0,
                        "transaction_result": True,
                        "topics": [{"name": topic, "partition_indexes": [0]}],
                        "coordinator_epoch": 0,
                    }
                ],
            )
        finally:
            connection.close()

    answer = asyncio.run(send())
    (partition,) = answer.markers[0].topics[0].partitions  # type: ignore[attr-defined]
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    (line,) = log_lines(cluster, follower, "WriteTxnMarkers from moved-markers")
    assert f"{topic}-0 NOT_LEADER_OR_FOLLOWER" in line
    assert high_watermarks(cluster, topic) == [0] * PARTITIONS


def test_every_replica_describes_its_producers(cluster: ClusterProcesses) -> None:
    """DescribeProducers is answered by followers as by the leader, as Kafka answers it:
    a follower holds the producer state its leader's batches gave it, open transaction
    included."""
    topic = new_topic(cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": topic})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    assert producer.flush(TIMEOUT_S) == 0

    async def describe(broker_id: int) -> object:
        process = cluster.brokers[broker_id]
        connection = PeerConnection(process.host, process.port, "describe-producers", TIMEOUT_S)
        try:
            answer = await connection.request(
                ApiKey.DESCRIBE_PRODUCERS, 0, topics=[{"name": topic, "partition_indexes": [0]}]
            )
        finally:
            connection.close()
        (partition,) = answer.topics[0].partitions
        assert partition.error_code == ErrorCode.NONE, (broker_id, partition)
        return [(p.producer_epoch, p.current_txn_start_offset) for p in partition.active_producers]

    try:
        expected = asyncio.run(describe(cluster.leader_of(topic, 0)))
        assert [start for _, start in expected] == [0]
        for broker_id in cluster.brokers:
            wait_for(
                lambda b=broker_id: asyncio.run(describe(b)) == expected,
                f"broker {broker_id} describing the open transaction",
                timeout=TIMEOUT_S,
            )
    finally:
        producer.abort_transaction(TIMEOUT_S)


def test_a_marker_reaches_the_new_leader_of_a_partition_whose_leader_died(
    cluster: ClusterProcesses,
) -> None:
    """The leader of a partition in a transaction is killed after AddPartitionsToTxn and
    before EndTxn: the commit is answered at once (the transaction log is on other
    brokers), and the coordinator retries the marker until the partition's new leader
    has it, saying once that it had to. Last in this module: it adds a fourth broker,
    which holds none of the transaction log, and leaves it dead."""
    newcomer = max(cluster.brokers) + 1
    cluster.add_broker(newcomer).start()
    cluster.wait_registered(newcomer)
    txn_id = f"moved-{uuid.uuid4().hex[:8]}"
    coordinator = cluster.leader_of(
        TRANSACTION_STATE_TOPIC, partition_for(txn_id, TRANSACTION_STATE_PARTITIONS)
    )
    follower = next(i for i in cluster.brokers if i not in (coordinator, newcomer))
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # Led by the newcomer, with a replica on a broker that stays.
    placed = NewTopic(topic, num_partitions=1, replica_assignment=[[newcomer, follower]])
    admin.create_topics([placed])[topic].result(TIMEOUT_S)
    assert cluster.leader_of(topic, 0) == newcomer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"kept", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    cluster.kill(newcomer)
    started = time.monotonic()
    producer.commit_transaction(TIMEOUT_S)
    wait_for(
        lambda: log_lines(cluster, coordinator, f"transaction {txn_id} committed"),
        "the coordinator completing the transaction at the new leader",
        timeout=TIMEOUT_S,
    )
    # Bounded: the new leader is elected once the dead one's ZooKeeper session expires.
    assert time.monotonic() - started < TIMEOUT_S
    assert cluster.leader_of(topic, 0) == follower
    (line,) = log_lines(
        cluster, coordinator, f"transaction {txn_id}: markers for {topic}-0 not written"
    )
    assert "retrying at their current leaders" in line
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{topic}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([KafkaPartition(topic, 0, 0)])
        message = wait_for(lambda: consumer.poll(0.5), "the committed record", TIMEOUT_S)
        assert message.error() is None and message.value() == b"kept"
    finally:
        consumer.close()
