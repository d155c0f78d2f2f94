"""Each real client creates a topic, produces 100,000 keyed records and reads them all back.

Between them the clients cover every compression codec.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import NewTopic as KpNewTopic

from tests.support.broker import BrokerProcess
from tests.support.data import (
    Received,
    Sent,
    assert_same_records,
    make_records,
    stored_codecs,
)

COUNT = 100_000
PARTITIONS = 4


def assert_compressed_with(broker: BrokerProcess, topic: str, codec: str) -> None:
    # Clients send a batch uncompressed when compressing would not shrink it.
    codecs = stored_codecs(broker, topic)
    assert codec in codecs and codecs <= {codec, "none"}, f"stored {codecs}, wanted {codec}"


def test_confluent_kafka_round_trip_lz4(broker: BrokerProcess) -> None:
    topic = "ck-lz4"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([CkNewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    sent = make_records(COUNT, prefix="ck")
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5}
    )
    errors: list[str] = []
    for record in sent:
        while True:
            try:
                producer.produce(
                    topic,
                    key=record.key,
                    value=record.value,
                    headers=list(record.headers),
                    on_delivery=lambda err, _msg: errors.append(str(err)) if err else None,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ck-reader",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([CkTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    received: list[Received] = []
    while len(received) < COUNT:
        messages = consumer.consume(10_000, timeout=10)
        assert messages, f"stalled after {len(received)} records"
        for m in messages:
            assert m.error() is None, m.error()
            headers = tuple((k, v) for k, v in (m.headers() or []))
            received.append(Received(m.partition(), m.offset(), m.key(), m.value(), headers))
    consumer.close()
    assert_same_records(sent, received)
    assert_compressed_with(broker, topic, "lz4")


def test_kafka_python_round_trip_gzip(broker: BrokerProcess) -> None:
    topic = "kp-gzip"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([KpNewTopic(topic, PARTITIONS, 1)])
    admin.close()
    sent = make_records(COUNT, prefix="kp")
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type="gzip", acks="all", linger_ms=5
    )
    futures = [
        producer.send(topic, key=r.key, value=r.value, headers=list(r.headers)) for r in sent
    ]
    producer.flush(60)
    for future in futures:
        future.get(timeout=0)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tps = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    received: list[Received] = []
    while len(received) < COUNT:
        batches = consumer.poll(timeout_ms=10_000, max_records=10_000)
        assert batches, f"stalled after {len(received)} records"
        for messages in batches.values():
            for m in messages:
                headers = tuple((k, v) for k, v in m.headers)
                received.append(Received(m.partition, m.offset, m.key, m.value, headers))
    consumer.close()
    assert_same_records(sent, received)
    assert_compressed_with(broker, topic, "gzip")


def test_aiokafka_round_trip_snappy(broker: BrokerProcess) -> None:
    topic = "aio-snappy"
    sent = make_records(COUNT, prefix="aio")

    async def run() -> list[Received]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        await admin.create_topics([AioNewTopic(topic, PARTITIONS, 1)])
        await admin.close()
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, compression_type="snappy", acks="all", linger_ms=5
        )
        await producer.start()
        try:
            pending = [
                await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers))
                for r in sent
            ]
            await asyncio.gather(*pending)
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        received: list[Received] = []
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            while len(received) < COUNT:
                batches = await consumer.getmany(timeout_ms=10_000, max_records=10_000)
                assert batches, f"stalled after {len(received)} records"
                for messages in batches.values():
                    for m in messages:
                        headers = tuple((k, bytes(v)) for k, v in m.headers)
                        received.append(Received(m.partition, m.offset, m.key, m.value, headers))
        finally:
            await consumer.stop()
        return received

    assert_same_records(sent, asyncio.run(run()))
    assert_compressed_with(broker, topic, "snappy")


def test_kcat_round_trip_zstd(broker: BrokerProcess) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is not installed: apt-get install -y kcat"
    topic = "kcat-zstd"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "herdless",
            "topics",
            "create",
            topic,
            "--partitions",
            str(PARTITIONS),
            "--bootstrap-server",
            broker.bootstrap,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    # kcat sets the same headers on every record it produces from stdin.
    headers = (("source", b"kcat"), ("codec", b"zstd"))
    # kcat reads records as text lines, so these values are printable.
    sent = [
        Sent(f"kc-key-{i % 997}".encode(), f"kc-value-{i}-".encode() + b"x" * (i % 64), headers)
        for i in range(COUNT)
    ]
    lines = b"".join(r.key + b"\t" + r.value + b"\n" for r in sent)
    subprocess.run(
        [
            kcat,
            "-P",
            "-b",
            broker.bootstrap,
            "-t",
            topic,
            "-K",
            "\t",
            "-z",
            "zstd",
            "-X",
            "acks=all",
            "-H",
            "source=kcat",
            "-H",
            "codec=zstd",
        ],
        input=lines,
        check=True,
        capture_output=True,
        timeout=180,
    )
    # One line per record: partition, offset, key, value, headers, with separators
    # that the test values never contain.
    out = subprocess.run(
        [
            kcat,
            "-C",
            "-b",
            broker.bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%p\x1f%o\x1f%k\x1f%s\x1f%h\x1e",
        ],
        check=True,
        capture_output=True,
        timeout=180,
    ).stdout
    received = []
    for line in out.split(b"\x1e"):
        if not line.strip(b"\n"):
            continue
        partition, offset, key, value, header_text = line.split(b"\x1f")
        parsed = tuple(
            (name.decode(), raw)
            for name, _, raw in (h.partition(b"=") for h in header_text.split(b","))
        )
        received.append(Received(int(partition), int(offset), key, value, parsed))
    assert_same_records(sent, received)
    assert_compressed_with(broker, topic, "zstd")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_codec_is_stored_compressed(broker: BrokerProcess, codec: str) -> None:
    """The broker keeps what the producer compressed: read the raw batch attributes back."""
    topic = f"stored-{codec}"
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 50}
    )
    payload = b"compressible " * 200
    for i in range(50):
        producer.produce(topic, key=str(i).encode(), value=payload)
    assert producer.flush(30) == 0
    assert_compressed_with(broker, topic, codec)
    raw = b"".join(s.read_bytes() for s in broker.data_dir.glob(f"{topic}-0/*.log"))
    assert len(raw) < len(payload) * 50 / 4, "batches were not kept compressed"
