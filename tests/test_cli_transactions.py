"""`herdless transactions`: an open transaction listed, described and seen on its
partition; a transaction left hanging on a partition found and aborted there (on a
broker with transaction verification off, which also shows Produce v12 still adding
its partition to the transaction)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from herdless.broker.peers.connection import PeerConnection
from herdless.protocol.api_keys import ApiKey
from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import assert_documented, herdless, refused, succeeded, table_rows
from tests.support.exactly_once import read_committed
from tests.support.wire import Wire


@pytest.fixture(scope="module")
def unverified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker that takes transactional writes its coordinator never heard of, as
    brokers before KIP-890 did: how transactions came to hang on partitions."""
    with module_broker(
        tmp_path_factory.mktemp("txn-cli") / "data",
        "--set",
        "transaction.partition.verification.enable=false",
    ) as process:
        yield process


def _topic(broker: BrokerProcess, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def test_an_open_transaction_is_listed_described_and_seen_on_its_partition(
    unverified: BrokerProcess,
) -> None:
    topic = _topic(unverified, "cli-open")
    producer = Producer(
        {"bootstrap.servers": unverified.bootstrap, "transactional.id": "cli-open-id"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"pending")
    producer.flush(30)
    bootstrap = ("--bootstrap-server", unverified.bootstrap)

    listed = table_rows(succeeded(herdless("transactions", "list", *bootstrap)))
    assert [row[0] for row in listed if row[3] == "Ongoing"] == ["cli-open-id"]
    # kafka-transactions.sh's filters: open for longer than a duration, ids by a pattern.
    for filters, expected in (
        (("--duration-filter", "0"), ["cli-open-id"]),
        (("--duration-filter", "3600000"), []),
        (("--transactional-id-pattern", "cli-open-.*"), ["cli-open-id"]),
        (("--transactional-id-pattern", "cli-open"), []),
    ):
        found = table_rows(succeeded(herdless("transactions", "list", *filters, *bootstrap)))
        assert [row[0] for row in found] == expected, filters
    for command, args in {
        "transactions list": ("list",),
        "transactions describe ID": ("describe", "cli-open-id"),
        "transactions describe-producers T": ("describe-producers", topic),
    }.items():
        shown = succeeded(herdless("transactions", *args, "-o", "json", *bootstrap))
        assert_documented(command, json.loads(shown))
    described = table_rows(
        succeeded(herdless("transactions", "describe", "cli-open-id", *bootstrap))
    )
    assert described[0][4] == "Ongoing" and described[0][7] == f"{topic}-0"
    producers = table_rows(
        succeeded(herdless("transactions", "describe-producers", topic, *bootstrap))
    )
    assert [(row[0], row[1], row[5]) for row in producers] == [(topic, "0", "0")]
    # Any replica answers; here the one broker's.
    asked = ("describe-producers", topic, "--broker-id", "0")
    replica = table_rows(succeeded(herdless("transactions", *asked, *bootstrap)))
    # The same producers; DURATION-MS, the last column, moved on meanwhile.
    assert [row[:-1] for row in replica] == [row[:-1] for row in producers]

    producer.commit_transaction(30)
    listed = table_rows(succeeded(herdless("transactions", "list", *bootstrap)))
    assert [row[3] for row in listed if row[0] == "cli-open-id"] == ["CompleteCommit"]
    assert (
        table_rows(succeeded(herdless("transactions", "describe-producers", topic, *bootstrap)))
        == []
    )


def test_a_hanging_transaction_is_found_and_aborted_on_its_partition(
    unverified: BrokerProcess,
) -> None:
    topic = _topic(unverified, "cli-hanging")
    wire = Wire(unverified)
    init = wire.call(
        InitProducerIdRequest[0](transactional_id=None, transaction_timeout_ms=60_000),
        InitProducerIdResponse,
    )
    assert init.error_code == 0
    # Written 20 minutes ago, by a producer no coordinator knows: past any timeout.
    _write_transactional(wire, topic, init.producer_id, time.time() - 20 * 60)
    wire.close()
    after = Producer({"bootstrap.servers": unverified.bootstrap})
    after.produce(topic, b"after")
    assert after.flush(30) == 0
    bootstrap = ("--bootstrap-server", unverified.bootstrap)
    # The open transaction holds the last stable offset back: nothing is committed-readable.
    assert read_committed(unverified.bootstrap, topic, 1, timeout=5)[0] == []

    hanging = table_rows(
        succeeded(herdless("transactions", "find-hanging", "--topic", topic, *bootstrap))
    )
    assert [(row[2], row[5]) for row in hanging] == [(str(init.producer_id), "0")]
    said = succeeded(
        herdless(
            "transactions",
            "abort",
            "--topic",
            topic,
            "--partition",
            "0",
            "--start-offset",
            "0",
            *bootstrap,
        )
    )
    assert f"producer {init.producer_id}" in said
    assert (
        table_rows(
            succeeded(herdless("transactions", "find-hanging", "--topic", topic, *bootstrap))
        )
        == []
    )
    assert read_committed(unverified.bootstrap, topic, 1, timeout=30)[0] == [b"after"]


def test_bad_arguments_are_named(unverified: BrokerProcess) -> None:
    bootstrap = ("--bootstrap-server", unverified.bootstrap)
    refused(herdless("transactions", "find-hanging", *bootstrap), "--topic or --broker-id", 2)
    refused(
        herdless("transactions", "describe-producers", "no-such-topic", *bootstrap),
        "no topic 'no-such-topic'",
    )
    refused(
        herdless("transactions", "abort", "--topic", "t", "--partition", "0", *bootstrap),
        "--start-offset",
        2,
    )
    refused(herdless("transactions", "list", "--state", "Sleeping", *bootstrap), "Sleeping", 2)
    refused(
        herdless("transactions", "list", "--transactional-id-pattern", "cli-(", *bootstrap),
        "--transactional-id-pattern 'cli-(' is not a regular expression",
        2,
    )
    refused(
        herdless("transactions", "list", "--duration-filter", "-1", *bootstrap),
        "--duration-filter",
        2,
    )


def _write_transactional(wire: Wire, topic: str, producer_id: int, when_s: float) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=int(when_s * 1000), key=None, value=b"hanging", headers=[])
    Topic = ProduceRequest.TopicProduceData
    request = ProduceRequest[8](
        transactional_id="cli-hanging-id",
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            Topic(
                name=topic,
                partition_data=[
                    Topic.PartitionProduceData(index=0, records=bytes(builder.build()))
                ],
            )
        ],
    )
    answer = wire.call(request, ProduceResponse)
    assert answer.responses[0].partition_responses[0].error_code == 0, answer


def test_produce_v12_adds_its_partition_with_verification_off(unverified: BrokerProcess) -> None:
    """transaction.partition.verification.enable=false turns verification off, not the
    adding a transaction version 2 producer relies on (it sends no AddPartitionsToTxn):
    its Produce v12 still puts the partition in its transaction, as in Kafka."""
    topic = _topic(unverified, "cli-tv2")
    txn_id = "cli-tv2-id"

    async def run() -> list[tuple[str, int]]:
        connection = PeerConnection(unverified.host, unverified.port, "tv2", 30)
        try:
            await connection.request(
                ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=[txn_id]
            )
            init = await connection.request(
                ApiKey.INIT_PRODUCER_ID,
                5,
                transactional_id=txn_id,
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
            )
            assert init.error_code == 0
            builder = DefaultRecordBatchBuilder(
                magic=2,
                compression_type=0,
                is_transactional=True,
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                base_sequence=0,
                batch_size=1 << 20,
            )
            builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
            answer = await connection.request(
                ApiKey.PRODUCE,
                12,
                transactional_id=txn_id,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    {
                        "name": topic,
                        "partition_data": [{"index": 0, "records": bytes(builder.build())}],
                    }
                ],
            )
            assert answer.responses[0].partition_responses[0].error_code == 0
            described = await connection.request(
                ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=[txn_id]
            )
            (state,) = described.transaction_states
            return [(t.topic, p) for t in state.topics for p in t.partitions]
        finally:
            connection.close()

    assert asyncio.run(run()) == [(topic, 0)]
