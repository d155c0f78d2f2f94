"""Consumers read from the replica in their rack (KIP-392) on a cluster whose brokers have racks.

Three brokers in racks a, b and c (`--rack`), with `replica.selector.class` set to
Kafka's RackAwareReplicaSelector, and topics of three partitions with a replica on
every broker, led by each broker in turn. A confluent-kafka consumer with
`client.rack=b` gets every record from broker 2, the one in rack b, whichever broker
leads the record's partition: the leaders send it there (preferred_read_replica) and
broker 2 serves it as a follower. Each broker's `herdless_bytes_out` counter on
/metrics says which broker answered consumers with records. With broker 2 paused,
the consumer goes back to the leaders and still reads every acknowledged record.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from herdless.broker.replication.replica_selector import RACK_AWARE_SELECTOR
from herdless.testing.clients import QUIET
from tests.support.cluster import ClusterProcesses, cluster_fixture
from tests.test_metrics import scrape
from tests.test_metrics import value as sample

RACKS = {1: "a", 2: "b", 3: "c"}
NEAR = 2  # the broker in rack b
PARTITIONS = 3
RECORDS = 300
READ_TIMEOUT_S = 60.0


racked = cluster_fixture("racks", racks=RACKS, **{"replica.selector.class": RACK_AWARE_SELECTOR})


def bytes_out(cluster: ClusterProcesses, topic: str, brokers: tuple[int, ...]) -> dict[int, float]:
    """Bytes of `topic`'s records each broker has answered consumers' fetches with."""
    return {
        b: sample(scrape(cluster.metrics_ports[b]), "herdless_bytes_out_total", topic=topic) or 0.0
        for b in brokers
    }


def rack_b_consumer(cluster: ClusterProcesses, topic: str, **settings: str) -> Consumer:
    consumer = Consumer(
        cluster.client_config(
            **QUIET,
            **settings,
            **{
                "group.id": f"{topic}-readers",
                "enable.auto.commit": False,
                "client.rack": RACKS[NEAR],
                # A paused broker's fetch times out, and its partitions go back to their
                # leaders, within seconds rather than the default minute.
                "socket.timeout.ms": 5000,
            },
        )
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    return consumer


def read(consumer: Consumer, count: int) -> list[bytes]:
    """The values of the next `count` records; fails if fewer come within READ_TIMEOUT_S."""
    values: list[bytes] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(values) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(values), timeout=1):
            assert message.error() is None, message.error()
            values.append(message.value())
    assert len(values) == count, f"read {len(values)} of {count} records"
    return values


def produce(cluster: ClusterProcesses, topic: str, prefix: str) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(RECORDS)]
    cluster.produce(topic, values, timeout=READ_TIMEOUT_S)
    return values


def test_a_consumer_reads_every_record_from_the_replica_in_its_rack(
    racked: ClusterProcesses,
) -> None:
    racked.create_topic("near", PARTITIONS, 3)
    leaders = {racked.leader_of("near", p) for p in range(PARTITIONS)}
    assert leaders - {NEAR}, "some partition must be led outside rack b for this to show"
    sent = produce(racked, "near", "near")

    consumer = rack_b_consumer(racked, "near")
    try:
        got = read(consumer, RECORDS)
    finally:
        consumer.close()

    assert sorted(got) == sorted(sent)
    out = bytes_out(racked, "near", (1, 2, 3))
    assert out[NEAR] > 0, out
    assert out[1] == out[3] == 0, f"brokers outside rack b answered with records: {out}"


def test_a_read_committed_consumer_reads_committed_records_from_the_follower(
    racked: ClusterProcesses,
) -> None:
    """The follower keeps the producers' state and the aborted transactions as it
    replicates, so it serves read_committed below its own last stable offset and tells
    the consumer which transactions to drop."""
    racked.create_topic("near-committed", PARTITIONS, 3)
    producer = Producer(
        racked.client_config(**QUIET, **{"transactional.id": "near-committed", "acks": "all"})
    )
    producer.init_transactions(READ_TIMEOUT_S)
    committed: list[bytes] = []
    for round_ in range(4):
        producer.begin_transaction()
        values = [f"round-{round_}-{i}".encode() for i in range(50)]
        for value in values:
            producer.produce("near-committed", value, partition=round_ % PARTITIONS)
        if round_ % 2:
            producer.abort_transaction(READ_TIMEOUT_S)
        else:
            producer.commit_transaction(READ_TIMEOUT_S)
            committed += values

    consumer = rack_b_consumer(racked, "near-committed", **{"isolation.level": "read_committed"})
    try:
        got = read(consumer, len(committed))
        assert not consumer.consume(10, timeout=2), "read past the committed records"
    finally:
        consumer.close()

    assert sorted(got) == sorted(committed)
    out = bytes_out(racked, "near-committed", (1, 2, 3))
    assert out[NEAR] > 0 and out[1] == out[3] == 0, out


def test_with_the_replica_in_its_rack_paused_a_consumer_goes_back_to_the_leaders(
    racked: ClusterProcesses,
) -> None:
    racked.create_topic("paused", PARTITIONS, 3)
    before = produce(racked, "paused", "before")
    consumer = rack_b_consumer(racked, "paused")
    try:
        got = read(consumer, RECORDS)
        assert bytes_out(racked, "paused", (1, 3)) == {1: 0, 3: 0}
        racked.pause(NEAR)
        try:
            # Acknowledged once broker 2 has left the ISRs (and lost its leaderships).
            after = produce(racked, "paused", "after")
            got += read(consumer, RECORDS)
            elsewhere = bytes_out(racked, "paused", (1, 3))
        finally:
            racked.resume(NEAR)
    finally:
        consumer.close()
    racked.restore()

    assert sorted(got) == sorted(before + after)
    assert sum(elsewhere.values()) > 0, elsewhere
