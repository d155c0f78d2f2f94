"""A broker whose wall clock steps an hour (NTP, `date -s`) keeps its groups as they were.

The broker process runs with its wall clock shifted by a shim (tests/support/
wall_clock.py); its monotonic clock, and the machine's clocks, run on. Stepped
back, a member killed just before still leaves its group within its session;
stepped forward, no live member is expelled. Before every deadline moved to the
monotonic clock, the killed member stayed for the hour and the group behind it
rebalanced over and over.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess
from tests.support.members import MemberSet, wait_balanced
from tests.support.wall_clock import SteppedWallClock

PARTITIONS = 6
# Below Kafka's 6 s minimum session (lowered here): the waits for an expiry, or for
# none, are a session or two.
SESSION_MS = 4_000
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def wall(tmp_path_factory: pytest.TempPathFactory) -> SteppedWallClock:
    return SteppedWallClock(tmp_path_factory.mktemp("wall-clock"))


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, wall: SteppedWallClock
) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("stepped") / "data"
    process = BrokerProcess(
        data_dir,
        *("--set", "group.initial.rebalance.delay.ms=0"),
        *("--set", f"group.min.session.timeout.ms={SESSION_MS}"),
        prefix=wall.prefix,
    ).start()
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log_tail()}"


def create_topic(broker: BrokerProcess, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1, config=configs)])[name].result(30)


def broker_wall_clock_ms(broker: BrokerProcess, topic: str) -> int:
    """The broker's wall clock, as it stamps a record of a LogAppendTime topic."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"now", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-reader"}
        | {"auto.offset.reset": "latest", "enable.auto.commit": False}
    )
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, end - 1)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return message.timestamp()[1]
        raise AssertionError("the record just produced could not be read back")
    finally:
        consumer.close()


def test_the_shim_steps_the_brokers_wall_clock(
    broker: BrokerProcess, wall: SteppedWallClock
) -> None:
    """Else the tests below would pass for want of a step."""
    create_topic(broker, "stamps", **{"message.timestamp.type": "LogAppendTime"})
    wall.step(-HOUR_MS)
    try:
        lag_ms = time.time() * 1000 - broker_wall_clock_ms(broker, "stamps")
    finally:
        wall.step(HOUR_MS)
    assert HOUR_MS - 60_000 < lag_ms < HOUR_MS + 60_000, lag_ms


def test_a_member_killed_before_a_step_back_leaves_within_its_session(
    broker: BrokerProcess, wall: SteppedWallClock, tmp_path: Path
) -> None:
    create_topic(broker, "back")
    with MemberSet(
        broker.bootstrap, "back", "back", tmp_path, session_timeout_ms=SESSION_MS
    ) as group:
        members = [group.start("kafka-python") for _ in range(3)]
        wait_balanced(members, PARTITIONS, 60, "three members sharing the topic")
        dead, *survivors = members

        dead.kill()
        killed = time.monotonic()
        wall.step(-HOUR_MS)
        try:
            wait_balanced(
                survivors, PARTITIONS, SESSION_MS / 1000 + 30, "the survivors taking over"
            )
        finally:
            wall.step(HOUR_MS)
        # Expired one session after its last heartbeat; the survivors rejoin at their
        # next heartbeat and sync.
        took = time.monotonic() - killed
        assert took <= SESSION_MS / 1000 + 10, took


def test_no_live_member_is_expelled_when_the_wall_clock_steps_forward(
    broker: BrokerProcess, wall: SteppedWallClock, tmp_path: Path
) -> None:
    create_topic(broker, "forward")
    with MemberSet(
        broker.bootstrap, "forward", "forward", tmp_path, session_timeout_ms=SESSION_MS
    ) as group:
        members = [group.start(c) for c in ("kafka-python", "confluent-kafka", "aiokafka")]
        wait_balanced(members, PARTITIONS, 60, "three members sharing the topic")
        time.sleep(2)  # any follow-up rebalance settles
        before = {m.name: (len(m.assignment_events()), m.generation) for m in members}

        wall.step(HOUR_MS)
        try:
            time.sleep(2 * SESSION_MS / 1000)
        finally:
            wall.step(-HOUR_MS)

        after = {m.name: (len(m.assignment_events()), m.generation) for m in members}
        assert after == before, f"members saw a rebalance:\n{group.describe()}"
