"""Restarts: a graceful stop keeps everything; kill -9 keeps every acknowledged record."""

from __future__ import annotations

import threading

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess
from tests.support.checker import high_watermarks, read_partitions
from tests.support.members import wait_until

# Records acknowledged before the kill, and again after the restart.
LOAD = 50_000


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record of the topic, up to each partition's high watermark."""
    ends = high_watermarks(bootstrap, topic, partitions)
    seen = read_partitions(bootstrap, topic, partitions, ends)
    return {p: [value for _, value in records] for p, records in seen.items()}


def test_graceful_restart_keeps_all_data(own_broker: BrokerProcess) -> None:
    create_topic(own_broker.bootstrap, "kept", 3)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap})
    for i in range(3000):
        producer.produce("kept", key=str(i).encode(), value=f"v{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    before = read_all(own_broker.bootstrap, "kept", 3)
    assert own_broker.stop() == 0, own_broker.log_tail()
    own_broker.start()
    after = read_all(own_broker.bootstrap, "kept", 3)
    assert after == before
    assert sum(len(v) for v in after.values()) == 3000


def test_kill_9_during_produce_loses_no_acknowledged_record(own_broker: BrokerProcess) -> None:
    """Producers run flat out; the broker is killed mid-stream, restarted, and checked."""
    create_topic(own_broker.bootstrap, "load", 4)
    acknowledged: list[tuple[int, int, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def produce(worker: int) -> None:
        producer = Producer(
            {
                "bootstrap.servers": own_broker.bootstrap,
                "linger.ms": 2,
                "message.timeout.ms": 30_000,
            }
        )

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                with lock:
                    acknowledged.append((msg.partition(), msg.offset(), msg.value()))

        i = 0
        while not stop.is_set():
            try:
                producer.produce(
                    "load", value=f"w{worker}-{i}".encode() * 8, on_delivery=on_delivery
                )
                i += 1
            except (BufferError, KafkaException):
                producer.poll(0.05)
            producer.poll(0)
        producer.flush(60)

    workers = [threading.Thread(target=produce, args=(w,)) for w in range(2)]
    for worker in workers:
        worker.start()
    # Flat out, the producers have this many acknowledged within a second: the kill
    # lands mid-stream whenever it comes.
    wait_until(lambda: len(acknowledged) > LOAD, 30, "producers under way", own_broker.log)
    own_broker.kill()
    killed_at = len(acknowledged)
    own_broker.start()
    wait_until(
        lambda: len(acknowledged) > killed_at + LOAD,
        30,
        "producers reconnect and carry on",
        own_broker.log,
    )
    stop.set()
    for worker in workers:
        worker.join(90)
    assert killed_at > 1000, "the load was too light to mean anything"
    assert len(acknowledged) > killed_at, "producers did not continue after the restart"

    stored = read_all(own_broker.bootstrap, "load", 4)
    for partition, offset, value in acknowledged:
        assert offset < len(stored[partition]), f"acknowledged {partition}@{offset} is gone"
        assert stored[partition][offset] == value, f"{partition}@{offset} holds another record"


def test_a_graceful_stop_marks_a_clean_shutdown_and_a_kill_does_not(
    own_broker: BrokerProcess,
) -> None:
    """The marker lets the next start skip recovery; it must never survive a start or a kill."""
    marker = own_broker.data_dir / "clean-shutdown"
    create_topic(own_broker.bootstrap, "marked", 1)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap})
    for i in range(500):
        producer.produce("marked", value=f"v{i}".encode())
    assert producer.flush(30) == 0
    assert not marker.exists()
    assert own_broker.stop() == 0, own_broker.log_tail()
    assert marker.exists()
    own_broker.start()
    assert not marker.exists()
    assert len(read_all(own_broker.bootstrap, "marked", 1)[0]) == 500
    own_broker.kill()
    assert not marker.exists()
    own_broker.start()
    assert [v.decode() for v in read_all(own_broker.bootstrap, "marked", 1)[0]] == [
        f"v{i}" for i in range(500)
    ]
