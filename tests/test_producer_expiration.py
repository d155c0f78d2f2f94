"""`producer.id.expiration.ms`: a partition leader forgets an idle producer's id, but
never one with a transaction open there (Kafka's rule), checked every
`producer.id.expiration.check.interval.ms`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.broker.peers.connection import PeerConnection
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess, module_broker
from tests.support.waiting import wait_for

TIMEOUT_S = 30
EXPIRATION_MS = 2_500


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("producer-expiration") / "data"
    with module_broker(
        data_dir,
        "--set",
        f"producer.id.expiration.ms={EXPIRATION_MS}",
        "--set",
        "producer.id.expiration.check.interval.ms=100",
    ) as process:
        yield process


@pytest.fixture(scope="module")
def producers_of(broker: BrokerProcess) -> Iterator[Callable[[str], list[Any]]]:
    """The producers partition 0 of a topic keeps state of (DescribeProducers)."""
    with asyncio.Runner() as runner:
        connection = PeerConnection("127.0.0.1", broker.port, "expiration-tests", TIMEOUT_S)

        def describe(topic: str) -> list[Any]:
            answer = runner.run(
                connection.request(
                    ApiKey.DESCRIBE_PRODUCERS,
                    0,
                    topics=[{"name": topic, "partition_indexes": [0]}],
                )
            )
            (partition,) = answer.topics[0].partitions
            assert partition.error_code == ErrorCode.NONE
            return list(partition.active_producers)

        yield describe
        connection.close()


def new_topic(broker: BrokerProcess) -> str:
    name = f"expiry-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT_S)
    return name


def test_an_idle_producer_is_forgotten(
    broker: BrokerProcess, producers_of: Callable[[str], list[Any]]
) -> None:
    topic = new_topic(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    # The record's timestamp, which its idleness is measured from, is no earlier.
    produced_s = time.time()
    producer.produce(topic, b"once", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    (known,) = producers_of(topic)
    wait_for(lambda: producers_of(topic) == [], "the idle producer forgotten")
    assert time.time() - produced_s >= EXPIRATION_MS / 1000
    # It is a new producer to the partition now, and may write on.
    producer.produce(topic, b"again", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    (again,) = producers_of(topic)
    assert again.producer_id == known.producer_id


def test_a_producer_with_a_transaction_open_is_kept(
    broker: BrokerProcess, producers_of: Callable[[str], list[Any]]
) -> None:
    topic = new_topic(broker)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"keep-{topic}"}
    )
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    time.sleep(2 * EXPIRATION_MS / 1000)
    (kept,) = producers_of(topic)
    assert kept.current_txn_start_offset == 0
    producer.abort_transaction(TIMEOUT_S)
    # Closed by its marker, it is idle like any other and goes.
    wait_for(lambda: producers_of(topic) == [], "the producer forgotten once its transaction ended")


def set_expiration(broker: BrokerProcess, value: str | None) -> None:
    """producer.id.expiration.ms as broker 0's own dynamic config (None: deleted)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    operation = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    entry = ConfigEntry("producer.id.expiration.ms", value, incremental_operation=operation)
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def test_an_expiration_changed_at_runtime_applies_at_once(
    broker: BrokerProcess, producers_of: Callable[[str], list[Any]]
) -> None:
    topic = new_topic(broker)
    set_expiration(broker, "3600000")
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        producer.produce(topic, b"kept", partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        time.sleep(2 * EXPIRATION_MS / 1000)
        assert len(producers_of(topic)) == 1  # idle past the file's expiration, yet kept
    finally:
        set_expiration(broker, None)
    wait_for(lambda: producers_of(topic) == [], "the producer forgotten by the file's expiration")
