"""kafka-python's and aiokafka's transactional producers against one broker: a committed
transaction is read with read_committed, an aborted one is not, and of two producers
with one transactional id the older is fenced and nothing it writes afterwards is
ever visible."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import ProducerFenced
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.errors import KafkaError

from tests.support.broker import BrokerProcess
from tests.support.exactly_once import read_committed


def _topic(broker: BrokerProcess, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def _committed_values(broker: BrokerProcess, topic: str) -> list[bytes]:
    return read_committed(broker.bootstrap, topic, 1, timeout=30)[0]


def _all_values(broker: BrokerProcess, topic: str) -> list[bytes]:
    """What read_uncommitted returns: aborted records too."""
    return read_committed(broker.bootstrap, topic, 1, 30, "read_uncommitted")[0]


def _kafka_python(broker: BrokerProcess, transactional_id: str) -> KafkaProducer:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=transactional_id, linger_ms=5
    )
    producer.init_transactions()
    return producer


def test_kafka_python_commits_and_aborts(broker: BrokerProcess) -> None:
    topic = _topic(broker, "kp-txn")
    producer = _kafka_python(broker, "kp-txn")
    producer.begin_transaction()
    for n in range(10):
        producer.send(topic, value=b"committed-%d" % n)
    producer.commit_transaction()
    producer.begin_transaction()
    for n in range(10):
        producer.send(topic, value=b"aborted-%d" % n)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(topic, value=b"after")
    producer.commit_transaction()
    producer.close()

    assert _committed_values(broker, topic) == [b"committed-%d" % n for n in range(10)] + [b"after"]
    # The aborted records are in the log; only read_committed skips them.
    assert b"aborted-9" in _all_values(broker, topic)


def test_kafka_python_older_producer_is_fenced(broker: BrokerProcess) -> None:
    topic = _topic(broker, "kp-fenced")
    older = _kafka_python(broker, "kp-fenced")
    older.begin_transaction()
    older.send(topic, value=b"older-before").get(timeout=30)
    newer = _kafka_python(broker, "kp-fenced")
    with pytest.raises(KafkaError):
        older.send(topic, value=b"older-after").get(timeout=30)
        older.commit_transaction()
    older.close(timeout=5)
    newer.begin_transaction()
    newer.send(topic, value=b"newer")
    newer.commit_transaction()
    newer.close()

    assert _committed_values(broker, topic) == [b"newer"]


def test_aiokafka_commits_aborts_and_is_fenced(broker: BrokerProcess) -> None:
    topic = _topic(broker, "aio-txn")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-txn")
        await producer.start()
        async with producer.transaction():
            for n in range(5):
                await producer.send(topic, value=b"committed-%d" % n)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, value=b"aborted")
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send_and_wait(topic, value=b"older-open")
        newer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-txn")
        await newer.start()
        with pytest.raises(ProducerFenced):
            await producer.send_and_wait(topic, value=b"older-after")
            await producer.commit_transaction()
        await producer.stop()
        async with newer.transaction():
            await newer.send(topic, value=b"newer")
        await newer.stop()

    asyncio.run(run())
    assert _committed_values(broker, topic) == [b"committed-%d" % n for n in range(5)] + [b"newer"]
    assert b"aborted" in _all_values(broker, topic)
